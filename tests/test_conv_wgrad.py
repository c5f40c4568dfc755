"""conv_wgrad: non-square kernels, a realistic layer, the split stages' determinism and workspaces,
planted faults. (Every stage over the grid with guard regions, short slices among its variants:
tests/test_stages.py.)"""
import dataclasses

import numpy as np
import pytest

import helpers
from helpers import stages as registry
from helpers.engine.build import kernel_source
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


def test_winograd_dropping_a_slice_is_caught(ctx, monkeypatch):
    """A planted bug, the output transform adding all slices but the last, fails the check."""
    st = helpers.get_stage("conv_wgrad", "winograd")
    src = kernel_source(st.kernel)
    old = "s < SPLITS; s++"
    assert old in src, "the planted bug no longer applies; update this test"
    bad = dataclasses.replace(st, number=94, name="lost_slice", source=lambda d: src.replace(old, "s < SPLITS - 1; s++"))
    monkeypatch.setitem(registry.REGISTRY, "conv_wgrad", registry.REGISTRY["conv_wgrad"] + [bad])
    args = random_problem_args(2, 5, 13, 11, 6, 3, 1, 1, "none", seed=3)
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_wgrad", "lost_slice", ctx=ctx, guard=True, defines={"SLICE": 8}, **args)


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
