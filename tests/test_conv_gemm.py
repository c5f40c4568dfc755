"""Chapter 11's GEMM-based conv_dgrad stages: the phase split's arithmetic, and that the fast
paths (one GEMM per phase, the delta table) are what actually runs on the grid's strided cases.
The stages' correctness over the whole grid is tests/test_conv_dgrad.py's."""
import helpers
import pytest
from helpers.launch import gemm as launch
from helpers.ops.conv_dgrad import random_problem_args

from shapes import conv_grid

pytestmark = pytest.mark.debug_builds      # breadth: built without the optimiser on a CPU (tests/conftest.py)

GRID = conv_grid()


def test_phase_taps_cover_every_tap_once():
    for kernel in (1, 2, 3, 5, 7):
        for stride in (1, 2, 3, 4):
            taps = [r for ph in range(stride) for r in launch.phase_taps(kernel, stride, ph)]
            assert sorted(taps) == list(range(kernel))


def test_phase_counts_partition_the_rows():
    for size in (1, 2, 5, 8, 13):
        for pad in range(4):
            for stride in (1, 2, 3):
                counts = [launch.phase_count(size, pad, stride, ph) for ph in range(stride)]
                brute = [sum((h + pad) % stride == ph for h in range(size)) for ph in range(stride)]
                assert counts == brute


def test_phase_split_runs_one_gemm_per_phase_on_strided_grid_cases(ctx):
    strided = [c for c in GRID if c["stride"] > 1]
    assert len(strided) >= 100
    for c in strided[::10]:
        args = random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"],
                                   c["padding"], c["activation"])
        for stage in ("igemm_phases", "igemm_delta"):
            plan = helpers.plan_stage("conv_dgrad", stage, ctx=ctx, **args)
            assert plan.stage.name == stage and plan.path == "fast"   # no fallback taken
            gemm = next(s for s in plan.steps if s.kernel == "conv_dgrad")   # (split_sum may follow)
            assert gemm.global_size[2] == c["stride"] ** 2            # one GEMM per phase
        assert plan.steps[0].kernel == "igemm_deltas"
        assert plan.arrays["deltas"].size == 4 * c["stride"] ** 2 * c["k"] * launch.max_taps(plan.problem.dims)


def test_phase_split_multiplies_no_zeros():
    """Reduction lengths summed over the phases equal the taps that really reach an input."""
    for kernel, stride in ((3, 2), (1, 2), (5, 3), (2, 3)):
        per_phase = [len(launch.phase_taps(kernel, stride, ph)) * len(launch.phase_taps(kernel, stride, pw))
                     for ph in range(stride) for pw in range(stride)]
        assert sum(per_phase) == kernel * kernel


def test_column_workspace_past_32_bit_indexing_falls_back_to_the_implicit_gemm():
    from helpers.ops.problem import Problem
    from helpers.stages import get_stage
    dims = {"N": 256, "C": 512, "H": 56, "W": 56, "K": 512, "OH": 56, "OW": 56, "KH": 3, "KW": 3,
            "stride": 1, "pad": 1}
    big = Problem(op="conv_dgrad", inputs={}, outputs={}, scalars={}, dims=dims)
    stage = get_stage("conv_dgrad", "gemm_col2im")
    assert "32-bit" in stage.requires(big, dict(stage.defines)) and stage.fallback == "igemm_delta"
    assert launch.cols_size(big) == 512 * 9 * 256 * 56 * 56


# the phase split's switches and split-K: every stage launched as phases
PHASE_STAGES = [s.name for s in helpers.REGISTRY["conv_dgrad"] if s.launch == "phases"]


def test_tap_major_reduction_runs_itself_where_k_allows_and_falls_back_elsewhere(ctx):
    """11_igemm_taps needs K % TK == 0 (a step inside one tap): on those grid cases it runs its own
    kernel (fast at stride > 1, general at stride 1), elsewhere igemm_phases, with the reason."""
    ran = {True: 0, False: 0}
    for c in GRID[::7]:
        args = random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"],
                                   c["padding"], c["activation"])
        plan = helpers.plan_stage("conv_dgrad", "igemm_taps", ctx=ctx, defines={"TK": 16}, **args)
        fits = c["k"] % 16 == 0
        assert plan.stage.name == ("igemm_taps" if fits else "igemm_phases"), c
        ran[fits] += 1
    assert ran[True] >= 10 and ran[False] >= 10, ran
    stage = helpers.get_stage("conv_dgrad", "igemm_taps")
    args = random_problem_args(1, 8, 9, 9, 12, 3, 1, 1, "none")
    why = stage.requires(helpers.prepare("conv_dgrad", **args), dict(stage.defines))
    assert "K (output channels) a multiple of TK = 16" in why and "K = 12" in why


@pytest.mark.parametrize("stage", PHASE_STAGES)
def test_phase_split_switches_match_the_reference_with_guards(ctx, stage):
    """The phase split's switches (the phase a constant or not, dx through local memory or not)
    under both tile-read layouts, on strided grid cases and two stride-1 ones, with guards. The
    defaults run the whole grid in tests/test_conv_dgrad.py."""
    cases = [c for c in GRID if c["stride"] > 1][::12] + [c for c in GRID if c["stride"] == 1][::100]
    if stage == "igemm_taps":                                   # cases where it runs itself
        cases = [c for c in GRID if c["stride"] > 1 and c["k"] % 16 == 0][::4] + \
                [c for c in GRID if c["stride"] == 1 and c["k"] % 16 == 0][::20]
    switches = [(0, 1, 1), (1, 0, 1), (1, 1, 1), (1, 0, 0)]     # PHASE_CONSTANT, STORE_LOCAL, GEMM_LDS4
    TILES = {"TM": 64, "TN": 64, "TK": 16, "WM": 4, "WN": 4}   # legal on any device, whatever is tuned
    for i, c in enumerate(cases):
        args = random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"],
                                   c["padding"], c["activation"], seed=i)
        for const, local, lds4 in switches:
            d = {"PHASE_CONSTANT": const, "STORE_LOCAL": local, "GEMM_LDS4": lds4, **TILES}
            res = helpers.check_stage("conv_dgrad", stage, ctx=ctx, guard=True, defines=d, **args)
            assert res.path == ("fast" if c["stride"] > 1 else "general"), (c, d)


@pytest.mark.parametrize("stage", PHASE_STAGES)
def test_phase_split_k_matches_the_reference_with_guards(ctx, monkeypatch, stage):
    """igemm_phases (and igemm_taps) with its reduction cut into runs (SPLIT_TARGET far above the grid, and runs
    down to 16 terms, so the grid's short reductions split too, into runs of one step or of
    several), on strided and stride-1 grid cases, with guards around dx and the workspace of
    slices; the plan must really run split_sum."""
    monkeypatch.setattr(launch, "SPLIT_MIN_TERMS", 16)
    cases = [c for c in GRID if c["stride"] > 1][::10] + [c for c in GRID if c["stride"] == 1][::25]
    if stage == "igemm_taps":
        cases = [c for c in GRID if c["k"] % 16 == 0][::6]
    split = 0
    for i, c in enumerate(cases):
        args = random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"],
                                   c["padding"], c["activation"], seed=i)
        d = {"SPLIT_TARGET": 4096, "TM": 64, "TN": 64, "TK": 16, "WM": 4, "WN": 4}
        plan = helpers.plan_stage("conv_dgrad", stage, ctx=ctx, defines=d, **args)
        assert plan.stage.name == stage
        splits = launch.phase_splits(plan.problem, plan.defines)
        assert plan.jit_defines["SPLITS"] == splits
        if splits > 1:
            split += 1
            assert [s.kernel for s in plan.steps] == ["conv_dgrad", "split_sum"]
            one = launch.phases_geometry(plan.problem, plan.defines)[0]
            assert plan.steps[0].global_size == (one[0], one[1] * splits, c["stride"] ** 2)
        helpers.check_stage("conv_dgrad", stage, ctx=ctx, guard=True, defines=d, **args)
    assert split >= len(cases) // 2, f"only {split} of {len(cases)} cases split"


def test_phase_split_k_counts():
    """Runs: none at or above the target, enough to reach it below, at most 16, each >= 128 terms."""
    assert launch.split_count(200, 4608, 128) == 1
    assert launch.split_count(8, 4608, 128) == 16
    assert launch.split_count(32, 4608, 128) == 4
    assert launch.split_count(8, 512, 128) == 4                  # 4 runs of 128 terms
    assert launch.split_count(8, 100, 4096) == 1                 # too short to split
    assert launch.split_count(8, 4608, 1) == 1                   # SPLIT_TARGET = 1: never


def test_phase_constant_compiles_one_copy_of_the_tile_loop_per_phase(ctx):
    """On NVIDIA's OpenCL driver (PTX as the program's binary): with PHASE_CONSTANT the stride-2
    kernel holds one copy of the tile loop per phase, so at least STRIDE^2 times the multiply-adds
    of the single copy built without it. A compiler that merged the copies back would make the
    phases run-time values again (x1.8 slower on the stride-2 ResNet-50 layer) without a wrong
    value anywhere: only this count sees it. Other drivers: skipped."""
    from helpers.registers import program_ptx
    args = random_problem_args(2, 16, 12, 12, 16, 3, 2, 1, "none")
    fmas = {}
    for const in (0, 1):
        ptx = program_ptx(ctx, "igemm_phases", {"PHASE_CONSTANT": const}, **args)
        if ptx is None:
            pytest.skip("the program's binary is PTX only on NVIDIA's OpenCL driver")
        fmas[const] = ptx.count("fma.rn.f32")
    assert fmas[0] > 0 and fmas[1] >= 4 * fmas[0], fmas


def test_the_h200s_split_target_splits_the_small_batch_layers():
    """The SPLIT_TARGET recorded for the H200 (results/tuned.json) cuts the reduction of every
    batch-1 edge layer into runs: if a new search or a change of the count stopped that, the
    recorded gains (x1.5 to x10 over the unsplit stage) would silently be gone."""
    from helpers.ops.layers import layer_set
    from helpers.ops.problem import Problem
    from helpers.stages import get_stage
    from helpers.tuned_values import tuned_defines
    stage = get_stage("conv_dgrad", "igemm_phases")
    d = {**stage.defines, **tuned_defines("conv_dgrad", stage.key, "NVIDIA H200")}
    assert d["SPLIT_TARGET"] > 1
    for lay in layer_set("edge"):
        s, pad, k = lay["stride"], lay["padding"], lay["kernel"]
        oh = (lay["h"] + 2 * pad - k) // s + 1
        dims = {"N": lay["n"], "C": lay["c"], "H": lay["h"], "W": lay["w"], "K": lay["k"], "OH": oh,
                "OW": oh, "KH": k, "KW": k, "stride": s, "pad": pad}
        splits = launch.phase_splits(Problem(op="conv_dgrad", inputs={}, outputs={}, scalars={}, dims=dims), d)
        if lay["n"] == 1:
            assert splits > 1, lay["name"]


# ---- the forward implicit GEMM's split-K (conv_forward 11_igemm: SPLITS, SPLIT_TARGET) ----------

def test_forward_split_k_matches_the_reference_with_guards(ctx, monkeypatch):
    """11_igemm with its C*KH*KW reduction cut into runs (SPLIT_TARGET far above the grid, runs down
    to 16 terms so the grid's short reductions split too), on pointwise, padded and strided grid
    cases, with guards around y and the workspace of slices; the plan must really run split_sum."""
    from helpers.ops.conv_forward import random_problem_args as forward_args
    monkeypatch.setattr(launch, "SPLIT_MIN_TERMS", 16)
    cases = [c for c in GRID if c["kernel"] == 1][::4] + [c for c in GRID if c["kernel"] > 1][::20]
    split = 0
    for i, c in enumerate(cases):
        args = forward_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"], c["padding"], seed=i)
        d = {"SPLIT_TARGET": 4096, "TM": 64, "TN": 64, "TK": 16, "WM": 4, "WN": 4}
        plan = helpers.plan_stage("conv_forward", "igemm", ctx=ctx, defines=d, **args)
        splits = launch.igemm_fwd_splits(plan.problem, plan.defines)
        assert plan.jit_defines["SPLITS"] == splits
        if splits > 1:
            split += 1
            assert [s.kernel for s in plan.steps] == ["weights_to_kcrs", "forward_igemm", "split_sum"]
            one = launch.blocked(plan.problem.dims["K"], plan.problem.dims["N"] * plan.problem.dims["OH"]
                                 * plan.problem.dims["OW"], plan.defines)[0]
            assert plan.steps[1].global_size == (one[0], one[1] * splits, 1)
        helpers.check_stage("conv_forward", "igemm", ctx=ctx, guard=True, defines=d, **args)
    assert split >= len(cases) // 2, f"only {split} of {len(cases)} cases split"


@pytest.mark.parametrize("old, new", [
    ("split * run), k_len", "split * run + TK), k_len"),             # each run skips its first step
    ("y += get_group_id(1) / CEIL_DIV(K, TM)", "y += 0 * get_group_id(1) / CEIL_DIV(K, TM)"),  # runs overwrite
])
def test_a_wrong_forward_split_is_caught(ctx, monkeypatch, old, new):
    """Planted faults in the runs: one that skips a step of each run, one that writes every run into
    the first slice. Both fail the check at the size the split test uses."""
    import dataclasses
    from helpers import stages as registry
    from helpers.engine.kernels import kernel_source
    from helpers.ops.conv_forward import random_problem_args as forward_args
    monkeypatch.setattr(launch, "SPLIT_MIN_TERMS", 16)
    st = helpers.get_stage("conv_forward", "igemm")
    src = kernel_source(st.kernel)
    assert old in src, "the planted fault no longer applies; update this test"
    bad = dataclasses.replace(st, number=94, name="bad_split", source=lambda d: src.replace(old, new))
    monkeypatch.setitem(registry.REGISTRY, "conv_forward", registry.REGISTRY["conv_forward"] + [bad])
    args = forward_args(2, 40, 9, 7, 24, 1, 1, 0, seed=5)
    d = {"SPLIT_TARGET": 4096, "TM": 64, "TN": 64, "TK": 16, "WM": 4, "WN": 4}
    assert helpers.plan_stage("conv_forward", "bad_split", ctx=ctx, defines=d, **args).jit_defines["SPLITS"] > 1
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_forward", "bad_split", ctx=ctx, guard=True, defines=d, **args)
