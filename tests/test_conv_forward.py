"""conv_forward (chapter 12): tune candidates, the F(4x4) launches and layouts, the epilogue,
refusals by name, PyTorch on random shapes, planted faults in the Winograd stages, bad input.

Every stage over the forward grid (tests/shapes.py: forward_cases; the Winograd stages' awkward
3x3 stride-1 shapes among it) with guard regions and its paths counted: tests/test_stages.py.
"""
import dataclasses
import itertools

import numpy as np
import pytest

import helpers
from helpers import stages as registry
from helpers.engine.build import kernel_source
from helpers.ops.conv_forward import random_problem_args
from helpers.runner import resolve

from shapes import covering, wino_grid

pytestmark = pytest.mark.debug_builds      # breadth: built without the optimiser on a CPU (tests/conftest.py)

STAGES = helpers.stage_names("conv_forward")
WINO = [s for s in STAGES if s.startswith("wino")]
GRID = wino_grid()


def case_id(c):
    return f"n{c['n']}c{c['c']}k{c['k']}_{c['h']}x{c['w']}p{c['padding']}"


def _args(c, seed, kernel=3, stride=1):
    return random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], kernel, stride, c["padding"], seed=seed)


def test_grid_is_awkward():
    assert {c["padding"] for c in GRID} == {0, 1, 2}
    assert any(c["h"] % 2 and c["w"] % 2 for c in GRID)               # partial tiles both ways
    assert any(c["h"] != c["w"] for c in GRID) and any(c["n"] > 1 for c in GRID)
    assert any(c["k"] % 16 and c["c"] % 8 for c in GRID)              # off every blocking


# The search may pick any combination of the Winograd stages' tune values. Each value alone is
# checked over the op's layer set (tests/test_tune_candidates.py); here the combinations are, on a
# layer with several blocks of products: every combination of any three parameters (a covering
# array, 16 runs for the 7 tile parameters of wino4_blocked instead of the 128 of the product).
COMBINATIONS = [(s.name, defines) for s in registry.REGISTRY["conv_forward"] if s.name.startswith("wino")
                for defines in covering(s.tune, strength=3)]


def test_the_combinations_cover_every_three_parameters():
    for s in registry.REGISTRY["conv_forward"]:
        if not s.name.startswith("wino"):
            continue
        rows = [d for name, d in COMBINATIONS if name == s.name]
        for three in itertools.combinations(sorted(s.tune), min(3, len(s.tune))):
            wanted = set(itertools.product(*(s.tune[n] for n in three)))
            assert {tuple(d[n] for n in three) for d in rows} == wanted, (s.name, three)
    assert len([1 for name, _ in COMBINATIONS if name == "wino4_blocked"]) <= 20


@pytest.mark.parametrize("stage, defines", COMBINATIONS)
def test_every_tune_candidate_is_correct(ctx, stage, defines):
    """The benchmark's search may pick any candidate, so each must be right on awkward shapes."""
    for i, c in enumerate([GRID[-1]]):   # several blocks of the products, the last one partial
        try:
            helpers.check_stage("conv_forward", stage, ctx=ctx, guard=True, defines=defines, **_args(c, seed=i))
        except ValueError as err:
            # a candidate this device cannot launch is refused before the launch, by name (the
            # benchmark's search records it as untried); anything else is a failure
            assert "allows at most" in str(err), err
        except (AssertionError, helpers.GuardViolation) as err:
            raise AssertionError(f"stage {stage} with {defines} failed on {case_id(c)}:\n{err}") from None


@pytest.mark.parametrize("op, stage", [("conv_forward", "wino_blocked"), ("conv_dgrad", "winograd")])
def test_without_prefetch(ctx, op, stage):
    """PREFETCH=0 (load each step's blocks, then compute) gives the same answers."""
    if op == "conv_forward":
        args = _args(GRID[-1], seed=5)
    else:
        from helpers.ops.conv_dgrad import random_problem_args as dgrad_args
        args = dgrad_args(2, 19, 11, 6, 24, 3, 1, 0, "relu", seed=5)
    helpers.check_stage(op, stage, ctx=ctx, guard=True, defines={"PREFETCH": 0}, **args)


def _f4x4_args(op, seed):
    """A layer F(4x4) takes, with partial tiles, padded channels and an activation (dgrad)."""
    if op == "conv_forward":
        return _args(dict(n=2, c=19, h=11, w=6, k=24, padding=1), seed=seed)
    from helpers.ops.conv_dgrad import random_problem_args as dgrad_args
    return dgrad_args(2, 19, 11, 6, 24, 3, 1, 0, "relu", seed=seed)


@pytest.mark.parametrize("op, stage", [("conv_forward", "wino4_blocked"), ("conv_dgrad", "winograd4")])
def test_joint_transforms_run_and_both_settings_are_right(ctx, op, stage):
    """JOINT_TRANSFORMS = 1 (the default) transforms filters and input tiles in one launch,
    0 in two; both give the right answer inside guards, and the default really takes one launch
    (a fast path that silently stopped running would fail here)."""
    for joint, kernels in ((1, ["wino_transforms", "wino_gemm", "wino_output"]),
                           (0, ["wino_filter", "wino_input", "wino_gemm", "wino_output"])):
        args = _f4x4_args(op, seed=7)
        plan = helpers.plan_stage(op, stage, ctx=ctx, defines={"JOINT_TRANSFORMS": joint}, **args)
        assert plan.stage.launch == "blocked_f4x4" and [s.kernel for s in plan.steps] == kernels
        helpers.check_stage(op, stage, ctx=ctx, guard=True, defines={"JOINT_TRANSFORMS": joint}, **_f4x4_args(op, seed=7))
    assert registry.get_stage(op, stage).defines["JOINT_TRANSFORMS"] == 1


@pytest.mark.parametrize("op, stage", [("conv_forward", "wino4_blocked"), ("conv_dgrad", "winograd4")])
def test_both_layouts_of_the_products_are_right(ctx, op, stage):
    """WINO_CHANNEL_MAJOR = 1 (the default) stores V and M channel-major, 0 product-major: both
    give the right answer inside guards, and a plan with no defines is built channel-major."""
    assert helpers.plan_stage(op, stage, ctx=ctx, **_f4x4_args(op, seed=8)).jit_defines["WINO_CHANNEL_MAJOR"] == 1
    for layout in (1, 0):
        plan = helpers.plan_stage(op, stage, ctx=ctx, defines={"WINO_CHANNEL_MAJOR": layout}, **_f4x4_args(op, seed=8))
        assert plan.stage.name == stage and plan.jit_defines["WINO_CHANNEL_MAJOR"] == layout
        helpers.check_stage(op, stage, ctx=ctx, guard=True, defines={"WINO_CHANNEL_MAJOR": layout}, **_f4x4_args(op, seed=8))


@pytest.mark.parametrize("old, new, error", [
    # a filter work-group's row one output channel off: U's first row never written, its last twice
    ("wino_filter_one(w, U, CI, CO, CIP, COP, ci, g / per)",
     "wino_filter_one(w, U, CI, CO, CIP, COP, ci, min(g / per + 1, COP - 1))", helpers.MismatchError),
    # the split one work-group late: the first input row's first tiles transformed as a filter
    ("if (g < GF) {", "if (g <= GF) {", (helpers.MismatchError, helpers.GuardViolation))])
def test_a_wrong_split_of_the_joint_launch_is_caught(ctx, monkeypatch, old, new, error):
    s = planted(monkeypatch, "wino4_blocked", old, new, header="winograd_transforms.h")
    with pytest.raises(error):
        helpers.check_stage("conv_forward", s, ctx=ctx, guard=True, **_f4x4_args("conv_forward", seed=3))


def test_epilogue_is_really_checked(ctx):
    """A kernel that forgets the bias, or skips the activation, fails the check: the reference
    applies both."""
    from helpers.engine.check import MismatchError
    args = random_problem_args(2, 5, 9, 7, 6, 3, 1, 1, 0, "relu", bias=True)
    good = registry.get_stage("conv_forward", "direct")
    src = kernel_source(good.kernel)
    for old, new in (("acc += bias[k];", ""), ("act_forward(acc)", "acc")):
        assert old in src, "the planted bug no longer applies; update this test"
        bad = dataclasses.replace(good, source=lambda d, o=old, n=new: src.replace(o, n))
        with pytest.raises(MismatchError):
            helpers.check_stage("conv_forward", bad, ctx=ctx, **args)


@pytest.mark.parametrize("stage", [s for s in STAGES if not registry.get_stage("conv_forward", s).epilogue
                                   and not registry.get_stage("conv_forward", s).choose])
def test_stages_without_an_epilogue_refuse_bias_and_activation(ctx, stage):
    """A stage that computes the bare convolution refuses a bias or an activation before any
    launch, naming the stages that fuse them, instead of silently dropping them."""
    for activation, bias in (("none", True), ("relu", False)):
        args = random_problem_args(1, 8, 9, 9, 16, 3, 1, 1, 0, activation, bias)
        with pytest.raises(ValueError, match=f"{stage} of conv_forward cannot run this problem: .*without a "
                                             f"bias or an activation; the stages that can are direct, tc_fp16_nhwc"):
            helpers.run_stage("conv_forward", stage, ctx=ctx, **args)


@pytest.mark.parametrize("stage", WINO)
@pytest.mark.parametrize("kernel, stride, need", [(5, 1, "3x3 kernel with stride 1.*5x5 kernel with stride 1"),
                                                  (3, 2, "3x3 kernel with stride 1.*3x3 kernel with stride 2"),
                                                  (1, 1, "3x3 kernel")])
def test_winograd_refuses_what_it_cannot_do(ctx, stage, kernel, stride, need):
    c = dict(n=1, c=3, h=9, w=9, k=4, padding=1)
    with pytest.raises(ValueError, match=f"cannot run this problem: Winograd F\\(2x2,3x3\\) needs a {need}"):
        helpers.run_stage("conv_forward", stage, ctx=ctx, **_args(c, 0, kernel, stride))


def test_f4x4_runs_itself_on_every_forward_grid_case(ctx):
    """F(4x4) forward has no channel minimum (the 6x6 tile scale covers it): no grid case falls back."""
    for c in GRID:
        problem = helpers.prepare("conv_forward", **_args(c, 0))
        assert resolve("conv_forward", "wino4_blocked", problem, ctx, None)[0].name == "wino4_blocked"


def test_stages_match_pytorch_on_random_shapes(ctx):
    """Shapes nobody chose, against an independent implementation (PyTorch, float64)."""
    torch = pytest.importorskip("torch")
    from helpers.engine.check import check_close
    from helpers.ops import conv_forward as op
    rng = np.random.default_rng(2026)
    for i in range(4):
        n, c, k = int(rng.integers(1, 3)), int(rng.integers(1, 40)), int(rng.integers(1, 70))
        h, w, pad = int(rng.integers(1, 20)), int(rng.integers(1, 20)), int(rng.integers(0, 3))
        if h + 2 * pad < 3 or w + 2 * pad < 3:
            continue
        a = random_problem_args(n, c, h, w, k, 3, 1, pad, seed=i)
        want = torch.nn.functional.conv2d(torch.from_numpy(a["input"]).double(),
                                          torch.from_numpy(a["weight"].transpose(1, 0, 2, 3).copy()).double(),
                                          padding=pad).numpy()
        problem = op.prepare(**a)
        _, mag = op.reference(problem)
        for s in STAGES:
            got = helpers.run_stage("conv_forward", s, ctx=ctx, **a)
            check_close(got, want, magnitude=mag["output"], rtol=op.rtol(problem), name=f"{s} n{n}c{c}k{k}_{h}x{w}p{pad}")
        # the whole layer, act(convolution + bias), through the direct stage's epilogue
        act = ("relu", "sigmoid", "tanh")[i % 3]
        a = random_problem_args(n, c, h, w, k, 3, 1, pad, i, act, bias=True)
        pre = torch.nn.functional.conv2d(torch.from_numpy(a["input"]).double(),
                                         torch.from_numpy(a["weight"].transpose(1, 0, 2, 3).copy()).double(),
                                         torch.from_numpy(a["bias"]).double(), padding=pad)
        want = getattr(torch, act)(pre).numpy()
        problem = op.prepare(**a)
        _, mag = op.reference(problem)
        check_close(helpers.run_stage("conv_forward", "direct", ctx=ctx, **a), want, magnitude=mag["output"],
                    rtol=op.rtol(problem), name=f"direct + bias {act} n{n}c{c}k{k}_{h}x{w}p{pad}")


@pytest.mark.parametrize("stage, cases", [
    ("winograd", [(2, 19, 11, 6, 24, 0, "relu"), (1, 8, 13, 13, 9, 2, "tanh")]),
    ("winograd4", [(2, 19, 11, 6, 24, 0, "relu"), (1, 8, 13, 13, 17, 2, "tanh"), (3, 5, 9, 14, 40, 1, "sigmoid")])])
def test_winograd_dgrad_matches_pytorch(ctx, stage, cases):
    torch = pytest.importorskip("torch")
    from helpers.engine.check import check_close
    from helpers.ops import conv_dgrad as op
    from helpers.ops.conv_dgrad import random_problem_args as dgrad_args
    for i, (n, c, h, w, k, pad, act) in enumerate(cases):
        a = dgrad_args(n, c, h, w, k, 3, 1, pad, act, seed=i)
        problem = op.prepare(**a)
        assert resolve("conv_dgrad", stage, problem, ctx, None)[0].name == stage
        dy = torch.from_numpy(a["grad_output"]).double()
        if act != "none":
            y = torch.from_numpy(a["output"]).double()
            dy = dy * {"relu": (y > 0).double(), "tanh": 1 - y * y, "sigmoid": y * (1 - y)}[act]
        want = torch.nn.grad.conv2d_input((n, c, h, w), torch.from_numpy(a["weight"].transpose(1, 0, 2, 3).copy()).double(),
                                          dy, padding=pad).numpy()
        _, mag = op.reference(problem)
        check_close(helpers.run_stage("conv_dgrad", stage, ctx=ctx, **a), want,
                    magnitude=mag["grad_input"], rtol=op.rtol(problem))


def test_winograd_dgrad_falls_back_where_it_must(ctx):
    from helpers.ops.conv_dgrad import random_problem_args as dgrad_args
    for a in (dgrad_args(1, 4, 9, 9, 8, 3, 2, 1), dgrad_args(1, 4, 9, 9, 8, 5, 1, 2), dgrad_args(1, 4, 9, 9, 2, 3, 1, 1)):
        problem = helpers.prepare("conv_dgrad", **a)
        ran = resolve("conv_dgrad", "winograd", problem, ctx, None)[0]
        assert ran.name != "winograd"
        helpers.check_stage("conv_dgrad", "winograd", ctx=ctx, guard=True, **a)


def test_winograd4_dgrad_falls_back_to_f2x2_below_its_minimum_k(ctx):
    from helpers.launch.winograd import WINO4_DGRAD_MIN_K, WINO_DGRAD_MIN_K
    from helpers.ops.conv_dgrad import random_problem_args as dgrad_args
    for k, runs in ((WINO4_DGRAD_MIN_K - 1, "winograd"), (WINO_DGRAD_MIN_K - 1, "width"), (WINO4_DGRAD_MIN_K, "winograd4")):
        a = dgrad_args(2, 5, 10, 7, k, 3, 1, 0, "relu", seed=k)
        problem = helpers.prepare("conv_dgrad", **a)
        assert resolve("conv_dgrad", "winograd4", problem, ctx, None)[0].name == runs
        helpers.check_stage("conv_dgrad", "winograd4", ctx=ctx, guard=True, **a)


# ---- the checks can fail: planted bugs in a copy of a Winograd stage are caught ---------------

def planted(monkeypatch, base, old, new, header=None):
    """A copy of stage ``base`` with ``old`` replaced by ``new``; with ``header``, the bug goes into
    that shared header, inlined into the copy in place of its #include."""
    st = registry.get_stage("conv_forward", base)
    src = kernel_source(st.kernel)
    if header:
        src = src.replace(f'#include "{header}"', kernel_source(f"common/{header}"))
    assert old in src, "the planted bug no longer applies; update this test"
    bad = dataclasses.replace(st, number=90, name="planted", title="planted bug",
                              source=lambda d: src.replace(old, new))
    monkeypatch.setitem(registry.REGISTRY, "conv_forward", registry.REGISTRY["conv_forward"] + [bad])
    return "planted"


def test_a_dropped_channel_is_caught(ctx, monkeypatch):
    s = planted(monkeypatch, "wino_tiles", "for (int ci = 0; ci < CIP; ci++)", "for (int ci = 1; ci < CIP; ci++)")
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_forward", s, ctx=ctx, guard=True, **_args(dict(n=1, c=16, h=7, w=6, k=5, padding=1), 0))


def test_a_partial_tile_written_past_the_edge_is_caught(ctx, monkeypatch):
    s = planted(monkeypatch, "wino_blocked", "if (oh < OH && ow < OW)", "if (oh < OH + 1 && ow < OW)",
                header="winograd_ladder.h")
    with pytest.raises(helpers.GuardViolation):
        helpers.check_stage("conv_forward", s, ctx=ctx, guard=True, **_args(dict(n=1, c=3, h=7, w=6, k=2, padding=1), 0))


def test_a_partial_6x6_tile_written_past_the_edge_is_caught(ctx, monkeypatch):
    s = planted(monkeypatch, "wino4_blocked", "if (oh < OH && ow < OW)", "if (oh < OH && ow < OW + 1)",
                header="winograd_transforms.h")
    with pytest.raises(helpers.GuardViolation):
        helpers.check_stage("conv_forward", s, ctx=ctx, guard=True, **_args(dict(n=1, c=3, h=7, w=6, k=2, padding=1), 0))


def test_a_dropped_f4x4_product_is_caught(ctx, monkeypatch):
    # one product of the 36 dropped (m[35] = 0): only the tile's last output row and column use it
    s = planted(monkeypatch, "wino4_blocked", "wino_output_tile(m, t);", "m[35] = 0.0f; wino_output_tile(m, t);",
                header="winograd_transforms.h")
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_forward", s, ctx=ctx, guard=True, **_args(dict(n=1, c=4, h=9, w=9, k=3, padding=1), 0))


@pytest.mark.parametrize("layout", [1, 0])
def test_a_missing_batch_offset_of_the_f4x4_products_is_caught(ctx, monkeypatch, layout):
    # every one of the 36 products reads V[0]: the course GEMM's batch entry xi ignored for B
    s = planted(monkeypatch, "wino4_blocked", "V + WINO_BASE(xi, CIP)", "V")
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_forward", s, ctx=ctx, guard=True, defines={"WINO_CHANNEL_MAJOR": layout},
                            **_args(dict(n=1, c=4, h=9, w=9, k=3, padding=1), 0))


def test_channel_major_rows_read_a_product_apart_is_caught(ctx, monkeypatch):
    # channel-major V read with the product-major row stride (PP instead of 36 * PP): the GEMM's
    # B rows are the next products' rows of one channel, all inside V
    s = planted(monkeypatch, "wino4_blocked", "V + (k) * WINO_ROW_STRIDE", "V + (k) * PP")
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_forward", s, ctx=ctx, guard=True, **_args(dict(n=1, c=6, h=9, w=9, k=3, padding=1), 0))


def test_a_wrong_transform_coefficient_is_caught(ctx, monkeypatch):
    # the sign of one entry of the output transform flipped: A^T[1][3] = -1 instead of +1
    s = planted(monkeypatch, "wino_blocked", "wino_output_tile(m, t);",
                "for (int b = 0; b < 4; b++) m[12 + b] = -m[12 + b]; wino_output_tile(m, t);",
                header="winograd_ladder.h")
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_forward", s, ctx=ctx, guard=True, **_args(dict(n=1, c=4, h=6, w=6, k=3, padding=1), 0))


# ---- bad input: errors name the problem, before any launch ------------------------------------

def good(**over):
    a = random_problem_args(2, 3, 7, 6, 4, 3, 1, 1, seed=0)
    a.update(over)
    return a


@pytest.mark.parametrize("over, err, match", [
    (dict(input=np.zeros((2, 3, 7), np.float32)), ValueError, "input must have 4 dimensions"),
    (dict(input=np.zeros((2, 3, 7, 6), np.float64)), TypeError, "input must be float32"),
    (dict(weight=np.zeros((5, 4, 3, 3), np.float32)), ValueError, "first dimension must equal the input's channels"),
    (dict(weight=np.zeros((3, 4, 9, 9), np.float32)), ValueError, "does not fit in the padded"),
    (dict(weight=np.zeros((3, 4, 3, 3), np.float32)[:, :, :, ::-1]), ValueError, "C-contiguous"),
    (dict(input=[[1.0]]), TypeError, "must be a NumPy array"),
    (dict(stride=0), ValueError, "stride must be >= 1"),
    (dict(padding=-1), ValueError, "padding must be >= 0"),
    (dict(padding=1.0), TypeError, "padding must be an integer"),
    (dict(dilate=2), TypeError, "unknown argument"),
    (dict(dilation=2), ValueError, "cannot run this problem: it runs 2-D convolutions with one stride and one "
                                   "padding for every side \\(at most the kernel's extent\\), without groups or dilation; "
                                   "the stages that can are any_shape"),
    (dict(bias=np.zeros(5, np.float32)), ValueError, r"bias must have shape \(K,\) = \(4,\)"),
    (dict(bias=np.zeros((4, 1), np.float32)), ValueError, "bias must have 1 dimensions"),
    (dict(bias=np.zeros(4, np.float64)), TypeError, "bias must be float32"),
    (dict(activation="gelu"), ValueError, "activation must be one of none, relu, sigmoid, tanh"),
])
@pytest.mark.parametrize("stage", ["direct", "wino_blocked"])
def test_bad_arguments(ctx, monkeypatch, stage, over, err, match):
    import pyopencl as cl
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lambda *a, **k: pytest.fail("a kernel was launched"))
    with pytest.raises(err, match=match):
        helpers.run_stage("conv_forward", stage, ctx=ctx, **good(**over))


def test_missing_input(ctx):
    a = good()
    del a["input"]
    with pytest.raises(TypeError, match="input is required"):
        helpers.run_stage("conv_forward", "direct", ctx=ctx, **a)


def test_bad_register_block_is_refused(ctx):
    with pytest.raises(ValueError, match="REG=6 must be a multiple of 4 that divides TM"):
        helpers.run_stage("conv_forward", "wino_blocked", ctx=ctx, defines={"REG": 6}, **good())


def test_bad_gemm_tile_of_f4x4_is_refused(ctx):
    # TN and TM: the registry's or the device's tuned values (results/tuned.json)
    with pytest.raises(ValueError, match=r"TK=6 and TN=\d+ must be multiples of 4 for float4 tile loads"):
        helpers.run_stage("conv_forward", "wino4_blocked", ctx=ctx, defines={"TK": 6}, **good())
    with pytest.raises(ValueError, match=r"TM=\d+ must be a multiple of WM=5"):
        helpers.run_stage("conv_forward", "wino4_blocked", ctx=ctx, defines={"WM": 5}, **good())
