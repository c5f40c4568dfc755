"""Batch normalization (chapter 14): the stages chained and against PyTorch's autograd; the
reference's backward against finite differences; the tolerance against the E[x^2] - E[x]^2
failure; bad input. (Every stage of both operations against the NumPy reference over the awkward
shapes of tests/shapes.py, with guard regions and its variants: tests/test_stages.py.)"""
import numpy as np
import pytest

import helpers
from helpers.ops import reference as ref
from helpers.engine.check import MismatchError, check_close
from helpers.ops.batchnorm_backward import random_backward_args
from helpers.ops.batchnorm_forward import random_args

from shapes import BN_SHAPES

STAGES = [s.name for s in helpers.REGISTRY["batchnorm_forward"] if not s.choose]   # the kernels (auto chooses among them)


def test_the_stage_list_is_shared():
    assert helpers.stage_names("batchnorm_backward") == helpers.stage_names("batchnorm_forward") == STAGES + ["auto"]
    numbers = [helpers.get_stage("batchnorm_forward", s).number for s in STAGES]
    assert numbers == sorted(set(numbers)), f"the batch-norm stages out of course order: {STAGES}"
    assert [s.variants for s in helpers.REGISTRY["batchnorm_backward"]] == \
        [s.variants for s in helpers.REGISTRY["batchnorm_forward"]]
    assert all(np.prod(s) >= 1 for s in BN_SHAPES)
    assert {(n * h * w) % 4 for n, c, h, w in BN_SHAPES} == {0, 1, 2, 3}
    assert {(h * w) % 4 for n, c, h, w in BN_SHAPES} == {0, 1, 2, 3}


def test_every_switch_is_tested_at_both_settings():
    """A switch (a 0/1 define of the registry that its kernel reads with `#if NAME`) is run over the
    grid with its default and with the other setting (tests/test_stages.py runs each stage's
    ``variants``): a new switch must join its stage's variants in helpers/stages/batchnorm.py."""
    from helpers.engine.kernels import kernel_source
    for stage in STAGES:
        s = helpers.get_stage("batchnorm_forward", stage)
        text = kernel_source(s.kernel)
        for name, value in s.defines.items():
            if value in (0, 1) and f"#if {name}" in text:
                assert any(d.get(name) == 1 - value for d in s.variants), f"{stage}: {name}={1 - value} untested"


def test_outputs_and_return_values(ctx):
    a = random_args(2, 3, 4, 5, seed=3)
    y, mean, inv_std = helpers.run_stage("batchnorm_forward", "fused", ctx=ctx, **a)
    assert y.shape == (2, 3, 4, 5) and mean.shape == (3,) and inv_std.shape == (3,)
    a = random_args(2, 3, 4, 5, momentum=0.25, seed=3)
    rm0, rv0 = a["running_mean"].copy(), a["running_var"].copy()
    out = helpers.run_stage("batchnorm_forward", "vec4", ctx=ctx, **a)
    assert len(out) == 5
    np.testing.assert_array_equal(a["running_mean"], rm0)           # inputs are not modified
    np.testing.assert_array_equal(a["running_var"], rv0)
    exp = ref.batchnorm_forward(a["x"], a["gamma"], a["beta"], 1e-5, True, rm0, rv0, 0.25)
    np.testing.assert_allclose(out[3], exp[3], rtol=1e-5)
    np.testing.assert_allclose(out[4], exp[4], rtol=1e-5)
    a = random_args(2, 3, 4, 5, training=False, seed=3)
    assert helpers.run_stage("batchnorm_forward", "naive", ctx=ctx, **a).shape == (2, 3, 4, 5)


def test_stages_agree_and_chain(ctx):
    """Forward then backward through every stage: the same numbers within the tolerance."""
    f = random_args(3, 8, 10, 9, offset=3.0, seed=11)
    rng = np.random.default_rng(5)
    dy = rng.standard_normal(f["x"].shape, dtype=np.float32)
    want = ref.batchnorm_backward(dy, f["x"], f["gamma"], *ref.batchnorm_forward(f["x"], f["gamma"], f["beta"])[1:],
                                  "relu", np.maximum(ref.batchnorm_forward(f["x"], f["gamma"], f["beta"])[0], 0))
    for s in STAGES:
        y, mean, inv_std = helpers.run_stage("batchnorm_forward", s, ctx=ctx, **f)
        got = helpers.run_stage("batchnorm_backward", s, ctx=ctx, grad_output=dy, x=f["x"], gamma=f["gamma"],
                                mean=mean, inv_std=inv_std, activation="relu", output=np.maximum(y, 0))
        for g, w, name in zip(got, want, ("grad_input", "grad_gamma", "grad_beta")):
            check_close(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max(), name=f"{s} {name}")


def test_matches_pytorch_autograd_on_random_shapes(ctx):
    """Shapes and values nobody chose (fixed seed), against torch.nn.functional.batch_norm in float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2026)
    for trial in range(6):
        n, c = int(rng.integers(1, 5)), int(rng.integers(1, 9))
        h, w = int(rng.integers(1, 12)), int(rng.integers(1, 12))
        if n * h * w < 2:
            h = 2
        stage = STAGES[trial % len(STAGES)]
        a = random_args(n, c, h, w, offset=float(rng.uniform(-50, 50)), scale=float(rng.uniform(0.1, 3)),
                        momentum=0.1, seed=trial)
        y, mean, inv_std, rm, rv = helpers.run_stage("batchnorm_forward", stage, ctx=ctx, **a)
        tx = torch.tensor(a["x"], dtype=torch.float64, requires_grad=True)
        tg = torch.tensor(a["gamma"], dtype=torch.float64, requires_grad=True)
        tb = torch.tensor(a["beta"], dtype=torch.float64, requires_grad=True)
        trm = torch.tensor(a["running_mean"], dtype=torch.float64)
        trv = torch.tensor(a["running_var"], dtype=torch.float64)
        ty = torch.nn.functional.batch_norm(tx, trm, trv, tg, tb, training=True, momentum=0.1, eps=1e-5)
        tz = torch.relu(ty)
        ty_np = ty.detach().numpy()
        np.testing.assert_allclose(y, ty_np, rtol=1e-4, atol=1e-4 * max(1, np.abs(ty_np).max()))
        np.testing.assert_allclose(rm, trm.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(rv, trv.numpy(), rtol=1e-4, atol=1e-4)
        dz = rng.standard_normal(tz.shape).astype(np.float32)
        tz.backward(torch.tensor(dz, dtype=torch.float64))
        gx, gg, gb = helpers.run_stage("batchnorm_backward", stage, ctx=ctx, grad_output=dz, x=a["x"],
                                       gamma=a["gamma"], mean=mean, inv_std=inv_std, activation="relu",
                                       output=np.maximum(y, 0))
        for got, t in ((gx, tx.grad), (gg, tg.grad), (gb, tb.grad)):
            t = t.numpy()
            np.testing.assert_allclose(got, t, rtol=1e-3, atol=1e-3 * max(1, np.abs(t).max()))


def test_reference_backward_against_finite_differences():
    rng = np.random.default_rng(0)
    n, c, h, w = 2, 3, 3, 2
    x = rng.standard_normal((n, c, h, w)) + 2.0
    gamma, beta = rng.uniform(0.5, 1.5, c), rng.uniform(-0.5, 0.5, c)
    wts = rng.standard_normal((n, c, h, w))
    eps = 1e-3

    def loss(x, gamma, beta):   # sum of weighted post-ReLU outputs: gradients reach every input
        return float((wts * np.maximum(ref.batchnorm_forward(x, gamma, beta, eps)[0], 0)).sum())

    y, mean, inv_std = ref.batchnorm_forward(x, gamma, beta, eps)
    out = np.maximum(y, 0)
    gx, gg, gb = ref.batchnorm_backward(wts, x, gamma, mean, inv_std, "relu", out)
    step = 1e-6
    for arr, grad in ((x, gx), (gamma, gg), (beta, gb)):
        num = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            keep = arr[i]
            arr[i] = keep + step
            up = loss(x, gamma, beta)
            arr[i] = keep - step
            down = loss(x, gamma, beta)
            arr[i] = keep
            num[i] = (up - down) / (2 * step)
        np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-7)


def test_reference_forward_normalizes():
    x = np.random.default_rng(1).standard_normal((4, 3, 5, 5)) * 3 + 7
    y, mean, inv_std = ref.batchnorm_forward(x, np.ones(3), np.zeros(3), 0.0)
    np.testing.assert_allclose(y.mean(axis=(0, 2, 3)), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=(0, 2, 3)), 1, rtol=1e-12)


def test_tolerance_rejects_the_one_pass_formula():
    """E[x^2] - E[x]^2 in float32 on 1000 + small noise fails the checker the stages pass."""
    a = random_args(4, 3, 8, 8, offset=1000.0, scale=0.05, seed=4)
    problem = helpers.prepare("batchnorm_forward", **a)
    from helpers.ops import batchnorm_forward as op
    expected, magnitude = op.reference(problem)
    x = a["x"]
    ex = x.mean(axis=(0, 2, 3), dtype=np.float32)
    ex2 = (x * x).mean(axis=(0, 2, 3), dtype=np.float32)
    var = np.maximum(ex2 - ex * ex, np.float32(0))
    inv_std = 1 / np.sqrt(var + np.float32(1e-5))
    with pytest.raises(MismatchError):
        check_close(inv_std, expected["inv_std"], magnitude=magnitude["inv_std"], rtol=op.rtol(problem))


def test_checker_rejects_the_unbiased_variance(ctx):
    """A kernel that divided by M - 1 instead of M would fail (the tests can fail)."""
    a = random_args(2, 4, 6, 5, seed=9)
    y, mean, inv_std = helpers.run_stage("batchnorm_forward", "welford", ctx=ctx, **a)
    m = 2 * 6 * 5
    x = a["x"].astype(np.float64)
    wrong = 1 / np.sqrt(x.var(axis=(0, 2, 3)) * m / (m - 1) + 1e-5)
    from helpers.ops import batchnorm_forward as op
    problem = helpers.prepare("batchnorm_forward", **a)
    _, magnitude = op.reference(problem)
    check_close(inv_std, op.reference(problem)[0]["inv_std"], magnitude=magnitude["inv_std"], rtol=op.rtol(problem))
    with pytest.raises(MismatchError):
        check_close(inv_std, wrong, magnitude=magnitude["inv_std"], rtol=op.rtol(problem))


# ---------------------------------------------------------------------------------------------
# bad input: a clear error before any launch

def no_launch(monkeypatch):
    import pyopencl as cl
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lambda *a, **k: pytest.fail("a kernel was launched"))


def fwd(**over):
    a = random_args(2, 3, 4, 5, momentum=0.1, seed=0)
    a.update(over)
    return a


def bwd(**over):
    a = random_backward_args(2, 3, 4, 5, activation="relu", seed=0)
    a.update(over)
    return a


F32 = np.float32


@pytest.mark.parametrize("over, err, match", [
    (dict(x=np.zeros((2, 3, 4), F32)), ValueError, "x must have 4 dimensions"),
    (dict(x=np.zeros((2, 3, 4, 5), np.float64)), TypeError, "x must be float32"),
    (dict(x=np.zeros((2, 3, 4, 5), np.float16)), TypeError, "x must be float32"),
    (dict(gamma=np.ones(4, F32)), ValueError, r"gamma must have shape \(C,\) = \(3,\)"),
    (dict(beta=np.ones((3, 1), F32)), ValueError, "beta must have 1 dimensions"),
    (dict(beta=np.ones(3, np.float64)), TypeError, "beta must be float32"),
    (dict(running_mean=np.ones(2, F32)), ValueError, r"running_mean must have shape \(C,\)"),
    (dict(running_var=-np.ones(3, F32)), ValueError, "running_var must be finite and >= 0"),
    (dict(x=np.zeros((1, 3, 1, 1), F32)), ValueError, "at least 2 values per channel"),
    (dict(eps=0.0), ValueError, "eps must be a finite number"),
    (dict(eps="1e-5"), TypeError, "eps must be a real number"),
    (dict(momentum=1.5), ValueError, "momentum must be a finite number"),
    (dict(momentum=None), ValueError, "pass momentum"),
    (dict(running_mean=None), TypeError, "running_mean and running_var are required"),
    (dict(training="yes"), TypeError, "training must be True or False"),
    (dict(training=False), ValueError, "momentum only applies in training"),
    (dict(x=np.zeros((2, 3, 4, 5), F32)[..., ::-1]), ValueError, "C-contiguous"),
    (dict(activation="relu"), TypeError, "unknown argument"),
])
def test_forward_bad_arguments(ctx, monkeypatch, over, err, match):
    no_launch(monkeypatch)
    with pytest.raises(err, match=match):
        helpers.run_stage("batchnorm_forward", "fused", ctx=ctx, **fwd(**over))


def test_inference_needs_running_statistics(ctx, monkeypatch):
    no_launch(monkeypatch)
    a = fwd(training=False, momentum=None)
    del a["running_var"]
    with pytest.raises(TypeError, match="training=False normalizes with running_mean and running_var"):
        helpers.run_stage("batchnorm_forward", "naive", ctx=ctx, **a)
    # one value per channel is fine in inference
    a = random_args(1, 3, 1, 1, training=False, seed=0)
    monkeypatch.undo()
    assert helpers.run_stage("batchnorm_forward", "naive", ctx=ctx, **a).shape == (1, 3, 1, 1)


@pytest.mark.parametrize("over, err, match", [
    (dict(x=np.zeros((2, 3, 4, 6), F32)), ValueError, "x must have grad_output's shape"),
    (dict(grad_output=np.zeros((2, 3, 4, 5), np.float64)), TypeError, "grad_output must be float32"),
    (dict(gamma=np.ones(2, F32)), ValueError, r"gamma must have shape \(C,\)"),
    (dict(mean=np.ones(4, F32)), ValueError, r"mean must have shape \(C,\) = \(3,\)"),
    (dict(inv_std=np.ones((3,), np.float64)), TypeError, "inv_std must be float32"),
    (dict(output=None), TypeError, "needs output"),
    (dict(output=np.zeros((2, 3, 5, 4), F32)), ValueError, "output must have grad_output's shape"),
    (dict(activation="tanh"), ValueError, "activation must be one of none, relu"),
    (dict(activation="none"), ValueError, "output is only used with an activation"),
    (dict(eps=1e-5), TypeError, "unknown argument"),
])
def test_backward_bad_arguments(ctx, monkeypatch, over, err, match):
    no_launch(monkeypatch)
    with pytest.raises(err, match=match):
        helpers.run_stage("batchnorm_backward", "fused", ctx=ctx, **bwd(**over))


@pytest.mark.parametrize("defines, match", [({"WG": 48}, "power of two"), ({"WG": 2}, "power of two"),
                                             ({"ITEMS": 0}, "ITEMS must be >= 1"), ({"TILE": 4}, "no JIT parameter")])
def test_bad_jit_parameters(ctx, monkeypatch, defines, match):
    no_launch(monkeypatch)
    with pytest.raises(ValueError, match=match):
        helpers.run_stage("batchnorm_forward", "fused", ctx=ctx, defines=defines, **fwd())


def test_split4_covers_every_slab_once():
    from helpers.chapters.pictures_batchnorm import split4
    for hw in range(1, 23):
        for start in range(0, 9):
            a0, a1 = split4(start, start + hw)
            assert start <= a0 <= a1 <= start + hw
            assert a0 - start < 4 and start + hw - a1 < 4
            assert a0 % 4 == 0 or a0 == start + hw
            assert (a1 - a0) % 4 == 0


def _switch_run(tag, times):
    """A recorded run in results/'s format: one row per layer of stage 02, (median, q1, q3) in ms."""
    rows = [{"layer": name, "stage": "local_two_pass", "key": "02_local_two_pass", "ran": "02_local_two_pass", "path": "only",
             "shape": {"n": 2, "c": 3, "h": hw, "w": 1}, "defines": {"WG": 4, "COALESCED": int(tag[-1])},
             "median_ms": t[0], "q1_ms": t[1], "q3_ms": t[2], "pct_copy": 10.0}
            for name, hw, t in times]
    return {"op": "batchnorm_forward", "layer_set": "bn", "tag": tag, "date": "2026-01-01T00:00:00",
            "device": {"name": "dev", "platform": "p", "driver": "d", "type": "GPU", "compute_units": 2},
            "settings": {"activation": "none", "command": f"bench --tag {tag}"}, "rows": rows}


def test_recorded_switch_pairs_layers_and_reads_the_spread(monkeypatch):
    from helpers.analysis import results
    from helpers.chapters.pictures_batchnorm import recorded_switch, switch_summary, switch_table
    runs = [_switch_run("coalesced0", [("a", 16, (2.0, 1.9, 2.1)), ("b", 16, (1.0, 0.9, 1.1)), ("c", 2, (1.0, 0.9, 1.1))]),
            _switch_run("coalesced1", [("a", 16, (1.0, 0.9, 1.1)), ("b", 16, (1.05, 0.95, 1.15)), ("c", 2, (0.5, 0.45, 0.55))])]
    monkeypatch.setattr(results, "load", lambda pattern="*.json": runs)
    pair = recorded_switch("batchnorm_forward", "local_two_pass", "COALESCED")
    assert [r["layer"] for r in pair["rows"]] == ["a", "b", "c"] and pair["stage"] == "02_local_two_pass"
    a, b, c = pair["rows"]
    assert a["ratio"] == 2.0 and not a["overlap"] and b["overlap"] and a["mb"] == 4 * 2 * 3 * 16 / 1e6
    assert pair["commands"] == ["bench --tag coalesced0", "bench --tag coalesced1"]
    same = lambda r: r["hw"] <= r["defines"]["WG"]
    text = switch_summary(pair, ("chunked", "interleaved"), same)
    assert "interleaved faster, beyond the spread: a (" in text          # c is left out: same addresses
    assert "chunked faster, beyond the spread: none" in text and "within the spread: b (" in text
    assert "same addresses: 0 / 1 from 2.00 to 2.00" in text and "largest difference: a, interleaved at x2.000" in text
    assert len(switch_table(pair, note=lambda r: "same" if same(r) else "").splitlines()) == 3 + 3
    assert recorded_switch("batchnorm_forward", "local_two_pass", "REVERSE") is None     # no pair recorded


def test_exercise_check_accepts_chan_and_rejects_wrong_merges(capsys):
    from helpers.chapters.exercises import check_chan_merge

    def chan(na, ma, m2a, nb, mb, m2b):
        n = na + nb
        d = mb - ma
        return n, ma + d * nb / n, m2a + m2b + d * d * na * nb / n

    def no_cross_term(na, ma, m2a, nb, mb, m2b):
        n = na + nb
        return n, (na * ma + nb * mb) / n, m2a + m2b

    def via_squares(na, ma, m2a, nb, mb, m2b):
        n = na + nb
        mean = (na * ma + nb * mb) / n
        return n, mean, m2a + na * ma * ma + m2b + nb * mb * mb - n * mean * mean

    assert check_chan_merge(chan)
    assert not check_chan_merge(no_cross_term)
    assert not check_chan_merge(via_squares)
    assert "avoid subtracting large squares" in capsys.readouterr().out


@pytest.mark.parametrize("op", ["batchnorm_forward", "batchnorm_backward"])
def test_one_pass_is_one_launch_where_the_channel_fits(ctx, op):
    """Stage 06's single-kernel path (one launch) runs where a channel fits one work-group's
    registers, and a larger channel falls back to stage 05 (two launches): a change that makes
    the fast path stop running fails here."""
    from helpers.ops.layers import LAYER_SETS
    from helpers.ops.batchnorm_forward import layer_args as fwd_args
    from helpers.ops.batchnorm_backward import layer_args as bwd_args
    make = fwd_args if op == "batchnorm_forward" else bwd_args

    def ran(layer):
        plan = helpers.plan_stage(op, "one_pass", ctx=ctx, **make(layer))
        return plan.path, len(plan.steps)

    bn = {layer["name"]: layer for layer in LAYER_SETS["bn"]}
    # N = 1: every ResNet-50 channel (at most 112 x 112 values) fits 256 work-items x 25 float4s
    assert {name: ran({**layer, "n": 1}) for name, layer in bn.items()} == {name: ("only", 1) for name in bn}
    assert ran(bn["bn512@7"]) == ("only", 1)          # N = 32: 1,568 values a channel
    assert ran(bn["bn128@28"]) == ("only", 1)         # N = 32: 25,088 values = 256 x 24.5 float4s
    assert ran(bn["bn512@28"]) == ("only", 1)
    assert ran(bn["bn64@56"]) == ("fallback", 2)      # N = 32: 100,352 values a channel


def test_one_pass_forward_recomputes_offsets_only_for_many_units(ctx):
    """HOLD_OFFSETS: the forward kernel holds each unit's offset up to 8 units a work-item and
    computes it again above (bn128@28 at batch 32: 25 float4s at 256 work-items; bn256@14: 13 at
    128); the backward kernel always holds them (it has no such switch). The grid runs both
    settings: (2, 6, 14, 14) at WG 4 is 25 units, at the default WG one. The recorded register
    counts the rule rests on are read back."""
    from helpers.ops.layers import LAYER_SETS
    from helpers.ops.batchnorm_forward import layer_args as fwd_args
    from helpers.ops.batchnorm_backward import layer_args as bwd_args
    bn = {layer["name"]: layer for layer in LAYER_SETS["bn"]}
    jit = {name: helpers.plan_stage("batchnorm_forward", "one_pass", ctx=ctx, **fwd_args(bn[name])).jit_defines
           for name in ("bn128@28", "bn256@14")}
    assert (jit["bn128@28"]["ITEMS"], jit["bn128@28"]["HOLD_OFFSETS"]) == (25, 0)
    assert (jit["bn256@14"]["ITEMS"], jit["bn256@14"]["HOLD_OFFSETS"]) == (13, 0)
    tiny = helpers.plan_stage("batchnorm_forward", "one_pass", ctx=ctx, **random_args(2, 6, 14, 14)).jit_defines
    assert (tiny["ITEMS"], tiny["HOLD_OFFSETS"]) == (1, 1)
    back = helpers.plan_stage("batchnorm_backward", "one_pass", ctx=ctx, **bwd_args(bn["bn128@28"])).jit_defines
    assert back["ITEMS"] == 25 and "HOLD_OFFSETS" not in back
    small = helpers.plan_stage("batchnorm_forward", "one_pass", ctx=ctx, defines={"WG": 4}, **random_args(2, 6, 14, 14))
    assert small.jit_defines["HOLD_OFFSETS"] == 0 and small.path == "only"
    from helpers import registers
    (recorded,) = registers.recorded_registers("one_pass")
    regs = {(r["ITEMS"], r["HOLD_OFFSETS"]): r for r in recorded["rows"]}
    groups = {k: registers.groups_per_unit(r["registers"], r["WG"]) for k, r in regs.items()}
    assert groups[(25, 1)] < groups[(25, 0)]      # why 25 recomputes
    assert groups[(7, 1)] == groups[(7, 0)]       # at 7 recomputing buys no work-group: why 7 holds them
    assert all(regs[(n, 1)]["registers"] > regs[(n, 0)]["registers"] for n in registers.ONE_PASS_ITEMS)
    log = ("ptxas info : Compiling entry function 'bn_backward' for 'sm_90a'\nptxas info : Used 241 registers\n"
           "ptxas info : Compiling entry function 'bn_forward_train' for 'sm_90a'\nptxas info : Used 124 registers")
    assert registers.ptxas_usage(log, "bn_forward_train")["registers"] == 124     # its kernel's, not the first


def test_groups_per_unit_counts_registers_in_blocks_of_8():
    """An SM gives out registers per warp in blocks of 256, 8 a work-item: 51 registers take 56, so
    a compute unit holds 4 work-groups of 256 at 51 registers, as at 59 (taking 64), not 5."""
    from helpers.registers import groups_per_unit
    assert [groups_per_unit(r) for r in (51, 56, 57, 59, 64)] == [4, 4, 4, 4, 4]
    assert groups_per_unit(48) == 5 and groups_per_unit(49) == 4
    assert (groups_per_unit(73), groups_per_unit(91), groups_per_unit(124), groups_per_unit(178)) == (3, 2, 2, 1)
    assert groups_per_unit(16) == 8                       # 2,048 work-items bound it, not the registers
    assert groups_per_unit(32, wg=1024) == 2 and groups_per_unit(33, wg=1024) == 1


def test_one_pass_work_group_grows_with_the_channel(ctx):
    """Stage 06's forward work-group: WG (128) work-items for ResNet-50's 14x14 and 7x7 channels at
    batch 32 (1,568 units: 13 a work-item), doubled to 256 for its 28x28 ones (6,272 units: 25), and
    no further: a channel of more than 256 x 25 units falls back to stage 05. The kernel is built
    with the work-group it is launched with; a WG given above what a channel needs is kept. The
    backward pass keeps 256."""
    from helpers.ops.layers import LAYER_SETS
    from helpers.ops.batchnorm_forward import layer_args as fwd_args
    from helpers.ops.batchnorm_backward import layer_args as bwd_args
    bn = {layer["name"]: layer for layer in LAYER_SETS["bn"]}

    def launched(name, op="batchnorm_forward", make=fwd_args, defines=None):
        plan = helpers.plan_stage(op, "one_pass", ctx=ctx, defines=defines, **make(bn[name]))
        (step,) = plan.steps
        assert step.local_size[0] == plan.jit_defines["WG"] and step.global_size[0] == step.local_size[0] * bn[name]["c"]
        return plan.jit_defines["WG"], plan.jit_defines["ITEMS"]

    assert launched("bn256@14") == launched("bn512@7") == launched("bn2048@7") == (128, 13)
    assert launched("bn128@28") == launched("bn512@28") == (256, 25)
    # a WG above what the channel needs is kept (256: NVIDIA's OpenCL allows this kernel at most 256)
    assert launched("bn256@14", defines={"WG": 256}) == (256, 7)
    assert launched("bn256@14", "batchnorm_backward", bwd_args) == (256, 7)
    plan = helpers.plan_stage("batchnorm_forward", "one_pass", ctx=ctx, **fwd_args(bn["bn64@56"]))
    assert plan.path == "fallback"                   # 25,088 float4s a channel
    with pytest.raises(ValueError, match="RADIX=6 for stage 06_one_pass: .* a power of two from 2 to 16"):
        helpers.plan_stage("batchnorm_forward", "one_pass", ctx=ctx, defines={"RADIX": 6}, **random_args(2, 6, 14, 14))


def test_defines_given_for_a_stage_do_not_reach_its_fallback(ctx):
    """A WG asked of stage 06 on a channel too large for it: stage 05 runs with its own WG (on the
    H200 stage 05's kernels allow at most 256 work-items: an inherited WG = 512 failed the launch)."""
    args = random_args(8, 3, 64, 64, seed=1)        # 32,768 values a channel: more than 256 x 25 float4s
    plan = helpers.plan_stage("batchnorm_forward", "one_pass", ctx=ctx, defines={"WG": 8}, **args)
    assert plan.path == "fallback" and plan.stage.key == "05_fused"
    assert plan.defines["WG"] != 8
