"""Chapter 16's depthwise stages (conv_dgrad and conv_wgrad 16_dw_tiles, 16_dw_regs;
helpers/launch/depthwise.py): what they refuse and run instead, stage auto choosing them, the
weight gradient's fixed order of additions, and planted faults caught at the size of a real layer.

Their grid (every case of the convolutions' grid, the DEPTHWISE cases of the ANY_SHAPE tier among
them, with guard regions; their float4 paths counted) runs in tests/test_stages.py."""
import itertools

import numpy as np
import pytest

import helpers
from helpers import chooser
from helpers.launch.depthwise import depthwise_requires, geometry
from helpers.runner import path_of

from shapes import ANY_SHAPE, DEPTHWISE, any_shape_args
from test_stages import planted

DW = [(op, name) for op in ("conv_dgrad", "conv_wgrad") for name in ("dw_tiles", "dw_regs")]
CONV2D_GROUPED = ANY_SHAPE[4]          # 2-D, 6 channels in 2 groups, K = 4
DEPTHWISE_3D = ANY_SHAPE[11]           # 3-D depthwise
MULTIPLIER_2 = ((1, 4, 9, 8), (4, 2, 3, 3), 1, 1, 1, 4, "none")     # groups = C, K = 2C


@pytest.mark.parametrize("case, need", [
    (DEPTHWISE_3D, "it runs 2-D depthwise convolutions; this one is 3-D"),
    (CONV2D_GROUPED, "it runs depthwise convolutions with channel multiplier 1 (groups = C = K); this one has "
                     "groups = 2, C = 6, K = 4"),
    (MULTIPLIER_2, "it runs depthwise convolutions with channel multiplier 1 (groups = C = K); this one has "
                   "groups = 4, C = 4, K = 8"),
])
@pytest.mark.parametrize("op, name", DW)
def test_other_shapes_are_refused_by_name_and_run_any_shape(ctx, op, name, case, need):
    stage = helpers.get_stage(op, name)
    args = any_shape_args(op, case, 0)
    assert depthwise_requires(helpers.prepare(op, **args), dict(stage.defines)) == need
    assert path_of(op, name, ctx=ctx, **args) == "fallback"
    grouped = helpers.prepare(op, **args)
    assert chooser.candidates(grouped, None)[1][name] == f"runs any_shape instead: {need}"


@pytest.mark.parametrize("op", ["conv_dgrad", "conv_wgrad"])
def test_a_depthwise_layers_candidates_are_chapter_16s_stages(op):
    """The stages for plain layers refuse a grouped one; chapter 16's four take it: the direct
    any_shape, the two depthwise stages and the implicit GEMM per group."""
    args = any_shape_args(op, DEPTHWISE[6], 1)          # 20 x 36, several tiles
    names, _ = chooser.candidates(helpers.prepare(op, **args), None)
    assert names == ["any_shape", "dw_tiles", "dw_regs", "igemm_nd"]


def test_auto_times_the_depthwise_stages_first_on_a_depthwise_layer(ctx, monkeypatch, tmp_path):
    """conv_dgrad's auto on a depthwise layer: the model ranks dw_regs first (from this device's
    runs, or, where it has none of the depthwise stages, a GPU's), times it first, and runs the
    fastest stage it timed, checked."""
    monkeypatch.setenv("COURSE_CHOICES", str(tmp_path / "choices.json"))
    args = any_shape_args("conv_dgrad", DEPTHWISE[6], 1)
    verdict = helpers.check_stage("conv_dgrad", "auto", ctx=ctx, guard=True, **args).verdict
    rec = next(iter(chooser.cached(ctx.devices[0].name).values()))
    assert rec["ranked"][0][0] == "dw_regs" and next(iter(rec["times_ms"])) == "dw_regs", rec
    fastest = min(rec["times_ms"], key=rec["times_ms"].get)
    assert verdict.split()[0] == helpers.get_stage("conv_dgrad", fastest).key, (verdict, rec["times_ms"])


@pytest.mark.parametrize("defines, match", [
    (dict(TX=3), "TX must be a power of two >= 1"),
    (dict(TX=1, TY=1), r"TX \* TY = 1 work-items: a work-group takes 2 to 1024"),
    (dict(TX=64, TY=32), r"TX \* TY = 2048 work-items"),
])
def test_bad_tile_parameters_are_refused_before_any_launch(ctx, defines, match):
    args = any_shape_args("conv_dgrad", DEPTHWISE[0], 0)
    with pytest.raises(ValueError, match=match):
        helpers.plan_stage("conv_dgrad", "dw_regs", ctx=ctx, defines=defines, **args)


def test_the_tile_shrinks_to_a_small_plane_and_the_rest_become_slices():
    """A 7x7 plane under a 32 x 8 tile: an 8 x 8 tile (powers of two), 4 slices: the work-group
    keeps its 256 work-items."""
    p = helpers.prepare("conv_wgrad", **any_shape_args("conv_wgrad", ((2, 8, 7, 7), (8, 1, 7, 7), 1, 3, 1, 8, "none"), 0))
    g = geometry(p, {"TX": 32, "TY": 8, "SPLIT_TARGET": 16})
    assert (g["BX"], g["BY"], g["PL"], g["LH"], g["LW"]) == (8, 8, 4, 14, 14)
    assert (g["SPLITS"], g["PER_SPLIT"]) == (1, 4)      # 2 tiles per channel, a split of 4 (one per slice)


def test_the_weight_gradient_adds_in_a_fixed_order(ctx):
    """No atomics: two runs give the same bits."""
    args = any_shape_args("conv_wgrad", DEPTHWISE[11], 3)
    first = helpers.run_stage("conv_wgrad", "dw_regs", ctx=ctx, **args)
    assert np.array_equal(first, helpers.run_stage("conv_wgrad", "dw_regs", ctx=ctx, **args))


# ---- planted faults at the size of a real layer (batch 1): the check fails there --------------

MOBILENET = ((1, 32, 112, 112), (32, 1, 3, 3), 1, 1, 1, 32, "relu")      # MobileNetV2's first depthwise
MOBILENET_S2 = ((1, 96, 112, 112), (96, 1, 3, 3), 2, 1, 1, 96, "none")   # and its first strided one
CONVNEXT = ((1, 96, 56, 56), (96, 1, 7, 7), 1, 3, 1, 96, "none")          # ConvNeXt-T's first 7x7


@pytest.mark.parametrize("op, name, case, old, new", [
    # the last tap of the last row dropped for the last element of each work-item's block
    ("conv_dgrad", "dw_regs", CONVNEXT, "if (((off % SW) + SW) % SW == 0) grad[i]",
     "if (((off % SW) + SW) % SW == 0 && !(r == R - 1 && s == S - 1 && i == XPW - 1)) grad[i]"),
    # the last element of every plane (one in 12,544) left at zero
    ("conv_dgrad", "dw_tiles", MOBILENET_S2, "dx[plane * H * W + h * W + x] = grad;",
     "dx[plane * H * W + h * W + x] = h == H - 1 && x == W - 1 ? 0.0f : grad;"),
    # the activation's derivative forgotten on the float4 path's dy' (relu: dy where y <= 0 leaks in)
    ("conv_wgrad", "dw_regs", MOBILENET, "v *= (float4)", "v *= (float4)(1.0f) + 0.0f * (float4)"),
    # the last tile of every split left out of the sums
    ("conv_wgrad", "dw_tiles", CONVNEXT, "for (int t0 = first; t0 < last; t0 += PL)",
     "for (int t0 = first; t0 + PL < last; t0 += PL)"),
])
def test_a_planted_fault_is_caught_at_a_real_layers_size(ctx, op, name, case, old, new):
    args = any_shape_args(op, case, 0)
    bad = planted(helpers.get_stage(op, name), old, new)
    helpers.check_stage(op, name, ctx=ctx, **args)          # the stage itself passes at this size
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage(op, bad, ctx=ctx, **args)


def test_the_input_gradients_staged_tile_holds_every_read():
    """The dy rows a tile of TH input rows reads through its taps (kernel: a = h + PH - r*DH -
    oh0*SH, read where SH divides it, row a / SH) lie in the LH staged rows, for every tile origin,
    stride, padding and dilation: a read past them would take another slice's values."""
    from helpers.launch.depthwise import _span
    for taps, stride, pad, dil, th in itertools.product((1, 3, 5, 7), (1, 2, 3), (0, 1, 3), (1, 2), (1, 4, 8)):
        lh = _span(th, pad, taps, dil, stride)
        for h0 in range(0, 6 * th, th):
            oh0 = (h0 + pad - (taps - 1) * dil) // stride
            rows = {(h + pad - r * dil - oh0 * stride) // stride for h in range(h0, h0 + th) for r in range(taps)
                    if (h + pad - r * dil - oh0 * stride) % stride == 0}
            assert all(0 <= a < lh for a in rows), (taps, stride, pad, dil, th, h0)


# NVIDIA's OpenCL: at most (1024, 1024, 64) work-items per dimension of a work-group and 1024 in all.
# PoCL takes more, so a launch NVIDIA rejects (the weight gradient's 1x1 plane once asked for 256
# slices along the third dimension) would pass on the CPU: the launches are checked against it here.
NVIDIA_ITEMS = (1024, 1024, 64)


@pytest.mark.parametrize("op, name", DW)
def test_every_launch_fits_the_smallest_work_group_limits(op, name):
    """Each depthwise case (the degenerate ones among them: one channel, a 1x1 plane, one row or
    column), with the stage's defaults and every variant: positive grids that the work-groups
    divide, work-groups within NVIDIA's per-dimension limits, a reduction of 2 work-items or more,
    local memory of 1 byte or more."""
    from helpers.launch import depthwise
    stage = helpers.get_stage(op, name)
    for case, defines in itertools.product(DEPTHWISE, [dict(stage.defines), *({**stage.defines, **v} for v in stage.variants)]):
        p = helpers.prepare(op, **any_shape_args(op, case, 0))
        g = geometry(p, defines)
        for step in depthwise.steps(stage, p, defines):
            local = step.local_size
            assert all(n >= 1 for n in step.global_size) and all(gs % ls == 0 for gs, ls in zip(step.global_size, local))
            assert all(n <= most for n, most in zip(local, NVIDIA_ITEMS)) and np.prod(local) <= 1024, (case, defines, local)
        assert g["LOCAL"] >= 1 and (op == "conv_dgrad" or g["BX"] * g["BY"] * g["PL"] >= 2), (case, defines, g)


def test_a_launch_past_a_devices_work_group_dimension_is_refused_by_name(ctx, monkeypatch):
    """A work-group larger along one dimension than the device allows there is a DeviceLimitError
    naming the dimension and the limit, before the launch (NVIDIA's driver answered such a launch
    with CL_INVALID_KERNEL_ARGS)."""
    from helpers.launch import depthwise
    monkeypatch.setattr(depthwise, "PL_MAX", 4096)
    monkeypatch.setattr(type(ctx.devices[0]), "max_work_item_sizes", property(lambda self: [1024, 1024, 64]))
    args = any_shape_args("conv_wgrad", DEPTHWISE[-4], 0)                # a 1x1 plane: all slices
    with pytest.raises(helpers.DeviceLimitError, match="along dimension 2, but .* allows at most 64 there"):
        helpers.plan_stage("conv_wgrad", "dw_tiles", ctx=ctx, **args)
