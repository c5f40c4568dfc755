"""conv_wgrad: non-square kernels, a realistic layer, the split stages' determinism and workspaces,
planted faults. (Every stage over the grid with guard regions, short slices among its variants:
tests/test_stages.py.)"""
import dataclasses

import numpy as np
import pytest

import helpers
from helpers import stages as registry
from helpers.engine.build import kernel_source
from helpers.launch import gemm, wgrad
from helpers.ops.conv_wgrad import random_problem_args
from helpers.runner import path_of, workspace_bytes

STAGES = helpers.stage_names("conv_wgrad")


def test_non_square_kernel(ctx):
    """R != S: a 3x1 and a 1x5 kernel, with a stride and padding, on every stage."""
    rng = np.random.default_rng(5)
    for (r, s), stride, pad in (((3, 1), 2, 1), ((1, 5), 1, 2)):
        x = rng.standard_normal((2, 5, 9, 11), dtype=np.float32)
        oh, ow = (9 + 2 * pad - r) // stride + 1, (11 + 2 * pad - s) // stride + 1
        dy = rng.standard_normal((2, 6, oh, ow), dtype=np.float32)
        for stage in STAGES:
            helpers.check_stage("conv_wgrad", stage, ctx=ctx, guard=True, input=x, grad_output=dy,
                                weight_shape=(5, 6, r, s), stride=stride, padding=pad)


def test_stages_agree_on_a_realistic_layer(ctx):
    args = random_problem_args(2, 32, 14, 14, 48, 3, 1, 1, "relu", seed=7)
    for s in STAGES:
        r = helpers.run_stage("conv_wgrad", s, ctx=ctx, **args)
        assert r.shape == (32, 48, 3, 3) and r.dtype == np.float32
        helpers.check_stage("conv_wgrad", s, ctx=ctx, **args)


@pytest.mark.parametrize("stage, defines", [("split_reduction", {"WG": 64, "ITEMS": 4}), ("igemm", {"SLICE": 256})])
def test_split_stages_are_deterministic_and_declare_their_workspace(ctx, stage, defines):
    """The slices' partials are added in a fixed order: two runs agree to the bit. The workspace
    holds one partial per (slice, weight), as declared."""
    args = random_problem_args(3, 5, 13, 11, 6, 3, 1, 1, "sigmoid", seed=3)   # 429 positions: 2 slices of 256
    a, b = (helpers.run_stage("conv_wgrad", stage, ctx=ctx, defines=defines, **args) for _ in range(2))
    assert np.array_equal(a, b)
    assert workspace_bytes("conv_wgrad", stage, ctx=ctx, defines=defines, **args) == 4 * 2 * 5 * 6 * 9


def test_a_short_reduction_tree_is_caught(ctx, monkeypatch):
    """A planted bug, the local-memory tree stopping one step early (half of each group's sums
    dropped), fails the check."""
    st = helpers.get_stage("conv_wgrad", "split_reduction")
    src = kernel_source(st.kernel)
    old = "width > 0; width /= 2"
    assert old in src, "the planted bug no longer applies; update this test"
    bad = dataclasses.replace(st, number=92, name="short_tree",
                              source=lambda d: src.replace(old, "width > 1; width /= 2"))
    monkeypatch.setitem(registry.REGISTRY, "conv_wgrad", registry.REGISTRY["conv_wgrad"] + [bad])
    args = random_problem_args(3, 5, 13, 11, 6, 3, 1, 1, "none", seed=3)
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_wgrad", "short_tree", ctx=ctx, guard=True, **args)


def test_split_limits_are_refused_before_launch(ctx):
    """Too many slices for a grid dimension, or a WG the tree cannot halve: a one-line error."""
    args = random_problem_args(1, 1, 299, 299, 1, 1, 1, 0, "none", seed=0)       # 89,401 positions
    with pytest.raises(ValueError, match="at most 65535"):
        helpers.run_stage("conv_wgrad", "igemm", ctx=ctx, defines={"SLICE": 1, "TK": 1}, **args)
    with pytest.raises(ValueError, match="power of two"):
        helpers.run_stage("conv_wgrad", "split_reduction", ctx=ctx, defines={"WG": 96}, **args)
    with pytest.raises(ValueError, match="multiple of TK"):
        helpers.run_stage("conv_wgrad", "igemm", ctx=ctx, defines={"SLICE": 100}, **args)


def test_inputs_may_be_device_tensors(ctx):
    """A training step chains plans: the input and the gradient can stay on the device."""
    from helpers.engine.backends.opencl import DeviceTensor
    args = random_problem_args(2, 3, 7, 6, 4, 3, 1, 1, "relu", seed=4)
    args["input"] = DeviceTensor.from_array(ctx, args["input"])
    args["grad_output"] = DeviceTensor.from_array(ctx, args["grad_output"])
    for s in STAGES:
        plan = helpers.plan_stage("conv_wgrad", s, ctx=ctx, **args)
        plan.enqueue()
        helpers.check_outputs(plan)


def test_winograd_is_deterministic_and_declares_its_workspace(ctx):
    """Stage 04: the slices' partial products are added in a fixed order (two runs agree to the
    bit), and the three workspaces are as declared: 13x11 outputs -> 4x3 tiles, 36 per batch of 3,
    cut into 3 slices of 12 (SLICE=16 tiles: ceil(36/16) slices, each rounded up to TK=4);
    K=6 and C=5 padded to the 64-wide GEMM blocks."""
    args = random_problem_args(3, 5, 13, 11, 6, 3, 1, 1, "sigmoid", seed=3)
    defines = {"SLICE": 16, "TK": 4}
    assert path_of("conv_wgrad", "winograd", ctx=ctx, defines=defines, **args) == "only"
    a, b = (helpers.run_stage("conv_wgrad", "winograd", ctx=ctx, defines=defines, **args) for _ in range(2))
    assert np.array_equal(a, b)
    qp, kp, cp, splits = 36, 64, 64, 3
    want = 4 * 36 * (kp * qp + qp * cp + splits * kp * cp)     # U, V, M
    assert workspace_bytes("conv_wgrad", "winograd", ctx=ctx, defines=defines, **args) == want


def planted_winograd(monkeypatch, name: str, old: str, new: str) -> str:
    """Stage 04 with ``old`` replaced by ``new`` in its kernel, registered as ``name``."""
    st = helpers.get_stage("conv_wgrad", "winograd")
    src = kernel_source(st.kernel)
    assert old in src, "the planted bug no longer applies; update this test"
    bad = dataclasses.replace(st, number=94, name=name, source=lambda d: src.replace(old, new))
    monkeypatch.setitem(registry.REGISTRY, "conv_wgrad", registry.REGISTRY["conv_wgrad"] + [bad])
    return name


def test_winograd_dropping_a_slice_is_caught(ctx, monkeypatch):
    """A planted bug, the output transform adding all slices but the last, fails the check."""
    bad = planted_winograd(monkeypatch, "lost_slice", "s < SPLITS; s++", "s < SPLITS - 1; s++")
    args = random_problem_args(2, 5, 13, 11, 6, 3, 1, 1, "none", seed=3)
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_wgrad", bad, ctx=ctx, guard=True, defines={"SLICE": 8}, **args)


def test_winograd_transforms_through_local_memory_give_the_same_bits(ctx):
    """Stage 04's LOAD_LOCAL and STORE_LOCAL move the transforms' loads and stores, not their
    arithmetic: all four settings give the same bits, with several slices and blocks of channels
    and filters that end part-way (C=21, K=19). The registry's plan launches the local-memory
    kernels (their work-groups: 4 tiles x 16 channels, 8 channels x 8 filters x 4)."""
    args = random_problem_args(2, 21, 13, 10, 19, 3, 1, 1, "relu", seed=5)
    runs = [helpers.run_stage("conv_wgrad", "winograd", ctx=ctx, guard=True,
                              defines={"SLICE": 8, "TK": 4, "LOAD_LOCAL_W": 1 if a else 1 << 20, "STORE_LOCAL": b}, **args)
            for a in (0, 1) for b in (0, 1)]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])
    plan = helpers.plan_stage("conv_wgrad", "winograd", ctx=ctx, defines={"LOAD_LOCAL_W": 1}, **args)
    assert (plan.jit_defines["LOAD_LOCAL"], plan.jit_defines["STORE_LOCAL"]) == (1, 1)
    local = {s.kernel: s.local_size for s in plan.steps}
    assert local["wgrad_wino_input"] == (wgrad.IN_TILES * wgrad.IN_CHANNELS,)
    assert local["wgrad_wino_output"] == (wgrad.OUT_WG,)
    src = kernel_source(helpers.get_stage("conv_wgrad", "winograd").kernel)
    for name in ("IN_TILES", "IN_CHANNELS", "OUT_C", "OUT_K", "OUT_WG"):
        assert f"#define {name} {getattr(wgrad, name)} " in src, f"{name}: the kernel and the launch disagree"


def test_winograd_loads_x_through_local_memory_where_a_row_passes_a_line(ctx):
    """The registry's LOAD_LOCAL_W (33) turns the kernel's LOAD_LOCAL on where a row of x is longer
    than 32 floats, and the launch with it (a plain work-group of 32 tells the two apart)."""
    assert helpers.get_stage("conv_wgrad", "winograd").defines["LOAD_LOCAL_W"] == 33
    for w, want in ((32, 0), (33, 1)):
        args = random_problem_args(1, 2, 5, w, 3, 3, 1, 1, "none", seed=0)
        plan = helpers.plan_stage("conv_wgrad", "winograd", ctx=ctx, defines={"WG": 32}, **args)
        local = {s.kernel: s.local_size for s in plan.steps}["wgrad_wino_input"]
        assert plan.jit_defines["LOAD_LOCAL"] == want
        assert local == ((wgrad.IN_TILES * wgrad.IN_CHANNELS,) if want else (32,))


def test_winograd_taps_stored_to_the_wrong_filters_are_caught(ctx, monkeypatch):
    """A planted bug in STORE_LOCAL's contiguous run (each channel's run starts at filter 0, not at
    the block's first filter) fails the check when K spans three blocks of filters."""
    bad = planted_winograd(monkeypatch, "runs_from_zero", "dw[((c0 + cl) * K + k0) * 9 + r]", "dw[(c0 + cl) * K * 9 + r]")
    args = random_problem_args(1, 9, 8, 8, 19, 3, 1, 1, "none", seed=4)
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_wgrad", bad, ctx=ctx, guard=True, **args)


def test_winograd_refuses_bad_tiles_and_too_many_slices(ctx):
    """The caller's tile parameters are refused by name (not sent to the fallback); more slices
    than a grid dimension holds is refused before launch."""
    args = random_problem_args(2, 3, 9, 9, 4, 3, 1, 1, "none", seed=0)
    with pytest.raises(ValueError, match="multiples of 4"):
        helpers.run_stage("conv_wgrad", "winograd", ctx=ctx, defines={"TK": 6}, **args)
    big = random_problem_args(64, 1, 64, 64, 1, 3, 1, 1, "none", seed=0)          # 16,384 tiles
    with pytest.raises(ValueError, match="at most 65535"):
        helpers.run_stage("conv_wgrad", "winograd", ctx=ctx, defines={"SLICE": 4, "TK": 4}, **big)


def test_phase_split_is_deterministic_and_declares_its_workspace(ctx):
    """Stage 05 on 13x11 at stride 2, pad 1, 3x3: OH x OW = 7 x 6, the taps' windows start at
    rows floor((r - 1) / 2) + 1 = 0, 1, 1 of their phase, so each of the 2 x 2 planes holds
    (7 + 1) x (6 + 1) values per (image, channel); 3 * 42 = 126 positions in 4 slices of 32.
    Two runs agree to the bit; at stride 1 stage 03 runs instead."""
    args = random_problem_args(3, 5, 13, 11, 6, 3, 2, 1, "sigmoid", seed=3)
    defines = {"SLICE": 32}
    assert path_of("conv_wgrad", "igemm_phases", ctx=ctx, defines=defines, **args) == "general"   # 42 % 4 != 0
    a, b = (helpers.run_stage("conv_wgrad", "igemm_phases", ctx=ctx, defines=defines, **args) for _ in range(2))
    assert np.array_equal(a, b)
    xp, partials = 4 * 3 * 5 * 8 * 7, 4 * 5 * 6 * 9
    assert workspace_bytes("conv_wgrad", "igemm_phases", ctx=ctx, defines=defines, **args) == 4 * (xp + partials)
    one = random_problem_args(3, 5, 13, 11, 6, 3, 1, 1, "sigmoid", seed=3)
    assert path_of("conv_wgrad", "igemm_phases", ctx=ctx, **one) == "fallback"


def test_phase_split_stores_only_the_phases_a_tap_reads(ctx):
    """A 1x1 stride-2 layer (ResNet's projection shortcut) reads one phase of four: its workspace
    holds one plane, a quarter of x, beside the partial sums."""
    args = random_problem_args(2, 3, 8, 10, 4, 1, 2, 0, "none", seed=1)      # OH x OW = 4 x 5
    bytes_ = workspace_bytes("conv_wgrad", "igemm_phases", ctx=ctx, **args)
    assert bytes_ == 4 * (2 * 3 * 4 * 5 + 1 * 3 * 4)
    helpers.check_stage("conv_wgrad", "igemm_phases", ctx=ctx, guard=True, **args)


# ---- slices shortened to fill the device (SPLIT_TARGET: stages 04, 06 and 16_igemm_nd) -----------

FILL_STAGES = ("winograd", "igemm_blocked", "igemm_nd")


def slices_of(stage: str, plan) -> tuple:
    """(slice length, slice count) a plan runs: its slices of tiles (stage 04) or of positions."""
    from helpers.launch import igemm_nd
    p, d = plan.problem, plan.defines
    if stage == "winograd":
        g = wgrad.wino_geometry(p, d)
        return g["SLICE_LEN"], g["SPLITS"]
    if stage == "igemm_nd":
        return igemm_nd.slice_length(p, d), igemm_nd.splits(p, d)
    return plan.jit_defines["SLICE"], wgrad.splits(p, wgrad.blocked_slice(p, d))


def test_filled_halves_the_slice_until_the_launch_reaches_its_target():
    """wgrad.filled: SPLIT_TARGET = 1 or a launch already at its target keeps the slice; below it,
    the runs split_count asks for, rounded down to a power of two of halvings: at most four
    (SPLIT_MAX = 16 runs), never below SPLIT_MIN_TERMS, each length a multiple of the tile step."""
    assert wgrad.filled(1024, 16, 4, 100_000, 1) == 1024                 # never
    assert wgrad.filled(1024, 16, 8, 100_000, 512) == 1024               # 8 x 98 slices >= 512
    assert wgrad.filled(1024, 16, 32, 1352, 512) == 128                  # a YOLO head at 13x13: 2 -> 11 slices
    assert wgrad.filled(1024, 16, 3, 100_352, 512) == 512                # 294 work-groups: one halving
    assert wgrad.filled(1024, 16, 1, 4_000, 4096) == 128                 # the floor, 128 positions
    assert wgrad.filled(384, 16, 1, 4_000, 4096) == 192                  # 96 would be below the floor
    assert wgrad.filled(48, 16, 1, 4_000, 4096) == 48                    # not a multiple of 2 x TK


@pytest.mark.parametrize("stage", FILL_STAGES)
def test_slices_shortened_to_fill_the_device_match_the_reference_with_guards(ctx, monkeypatch, stage):
    """With SPLIT_TARGET far above what these layers have, each stage cuts its sum into more,
    shorter slices than at SPLIT_TARGET = 1 (the floor lowered to 16 terms, so that small layers
    split too), and still matches the reference, with guards around dw and the workspace."""
    monkeypatch.setattr(gemm, "SPLIT_MIN_TERMS", 16)
    shorter = 0
    for i, (n, c, h, w, k, ksize, stride) in enumerate([(2, 5, 13, 11, 6, 3, 1), (3, 24, 8, 8, 40, 1, 1),
                                                        (1, 16, 12, 12, 8, 3, 1), (2, 8, 9, 10, 12, 3, 2),
                                                        (2, 5, 30, 30, 6, 3, 1)]):      # 128 tiles of 4x4
        args = random_problem_args(n, c, h, w, k, ksize, stride, ksize // 2, "none", seed=i)
        if stage == "winograd" and (ksize != 3 or stride != 1):
            continue
        small = {"TK": 8, "SLICE": 128}
        plans = [helpers.plan_stage("conv_wgrad", stage, ctx=ctx, defines={**small, "SPLIT_TARGET": t}, **args)
                 for t in (1, 4096)]
        assert all(p.stage.name == stage for p in plans)
        (len1, n1), (len2, n2) = (slices_of(stage, p) for p in plans)
        assert len2 <= len1 and n2 >= n1
        shorter += len2 < len1 and n2 > n1
        helpers.check_stage("conv_wgrad", stage, ctx=ctx, guard=True, defines={**small, "SPLIT_TARGET": 4096}, **args)
    assert shorter >= (1 if stage == "winograd" else 3), f"only {shorter} layers had their slices shortened"


def test_a_launch_that_counts_the_unshortened_slices_is_caught(ctx, monkeypatch):
    """A planted bug: stage 06 built with the shortened slice but launched over as many slices as the
    full SLICE makes (the tail of the sum never added) fails the check."""
    monkeypatch.setattr(gemm, "SPLIT_MIN_TERMS", 16)
    monkeypatch.setattr(wgrad, "slice_size", lambda stage, p, d: d["SLICE"])
    args = random_problem_args(3, 24, 8, 8, 40, 1, 1, 0, "none", seed=1)
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_wgrad", "igemm_blocked", ctx=ctx, guard=True,
                            defines={"TK": 8, "SLICE": 128, "SPLIT_TARGET": 4096}, **args)


def test_the_h200s_split_target_shortens_the_slices_of_the_small_batch_layers():
    """The SPLIT_TARGET recorded for the H200 (results/tuned.json, task tune-wgrad-fill) shortens the
    slices of stages 04, 06 and 16_igemm_nd on some of the edge set's layers of 28x28 and larger
    (batch 1 and 8): if a new search or a change of the rule stopped that, the recorded gains on the zoo's
    small layers (a YOLO head x0.36 -> x0.85 cuDNN) would silently be gone."""
    from helpers.launch import igemm_nd
    from helpers.ops.layers import layer_set
    from helpers.runner import prepare
    from helpers.tuned_values import tuned_defines
    for name in FILL_STAGES:
        stage = helpers.get_stage("conv_wgrad", name)
        d = {**stage.defines, **tuned_defines("conv_wgrad", stage.key, "NVIDIA H200")}
        assert d["SPLIT_TARGET"] > 1, name
        shortened = 0
        for lay in layer_set("edge"):
            if lay["h"] < 28:
                continue
            p = prepare("conv_wgrad", **random_problem_args(lay["n"], lay["c"], lay["h"], lay["w"], lay["k"],
                                                           lay["kernel"], lay["stride"], lay["padding"], "none"))
            if name == "winograd" and lay["stride"] != 1:
                continue
            if name == "winograd":
                full = wgrad.wino_geometry(p, {**d, "SPLIT_TARGET": 1})["SLICE_LEN"]
                shortened += wgrad.wino_geometry(p, d)["SLICE_LEN"] < full
            elif name == "igemm_nd":
                shortened += igemm_nd.slice_length(p, d) < d["SLICE"]
            else:
                shortened += wgrad.blocked_slice(p, d) < d["SLICE"]
        assert shortened >= (1 if name == "winograd" else 3), (name, shortened)     # Winograd: res64@56/n8
