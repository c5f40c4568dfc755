"""The layer sets of convolutions of any shape (helpers/ops/layers.py, kind "anyshape"): what
each holds, accepted by the three convolutions' checks, refused by the other operations by
name, and the small sets run by the any-shape stages on this machine, checked with guards."""
import numpy as np
import pytest

import helpers
from helpers import bench
from helpers.ops import op_module
from helpers.ops.layers import LAYER_SETS, kind_of, layer_set, sets_of
from helpers.ops.shape import conv_shape

CONV = ("conv_forward", "conv_dgrad", "conv_wgrad")
SETS = ("mobilenetv2_dw", "convnext_dw", "resnext_grouped", "deeplab_dilated", "video3d", "conv4d", "conv4d_small",
        "anyshape_ci")


def test_the_sets_are_a_kind_of_their_own():
    # the zoo's layers name their kernel per axis
    assert sets_of("anyshape") == [*SETS, "zoo", "zoo_ci", "zoo_pointwise", "bottleneck", "asymmetric", "stems"]
    assert all(kind_of(name) == "conv" for name in ("resnet50", "ci"))


def test_the_sets_hold_the_layers_they_are_named_for():
    """The networks' shapes: batch, channels, size, kernel, stride, padding, dilation, groups."""
    def rows(name):
        return [(l["n"], l["c"], l["k"], l["size"], l["kernel"], l["stride"], l["padding"], l["dilation"], l["groups"])
                for l in LAYER_SETS[name]]
    mobilenet = [(64, c, c, (s, s), (3, 3), st, 1, 1, c) for c, s, st in
                 ((32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (192, 28, 2), (384, 14, 1),
                  (576, 14, 1), (576, 14, 2), (960, 7, 1))]
    assert rows("mobilenetv2_dw") == mobilenet
    assert rows("convnext_dw") == [(64, c, c, (s, s), (7, 7), 1, 3, 1, c) for c, s in ((96, 56), (192, 28), (384, 14),
                                                                                      (768, 7))]
    assert rows("resnext_grouped") == [(64, c, c, (s, s), (3, 3), st, 1, 1, 32) for c, s, st in
                                       ((128, 56, 1), (256, 56, 2), (256, 28, 1), (512, 28, 2), (512, 14, 1),
                                        (1024, 14, 2), (1024, 7, 1))]
    assert rows("deeplab_dilated") == [(16, c, k, (33, 33), (3, 3), 1, d, d, 1) for c, k, d in
                                       ((512, 512, 2), (2048, 256, 6), (2048, 256, 12), (2048, 256, 18))]
    assert rows("video3d") == [(8, c, k, size, (3, 3, 3), st, 1, 1, 1) for c, k, size, st in
                               ((64, 64, (16, 56, 56), 1), (128, 128, (8, 28, 28), 1), (256, 256, (4, 14, 14), 1),
                                (512, 512, (2, 7, 7), 1), (64, 128, (16, 56, 56), 2))]
    assert rows("conv4d") == [(2, c, c, size, (3, 3, 3, 3), 1, 1, 1, 1) for c, size in
                              ((16, (8, 16, 16, 16)), (32, (8, 8, 8, 8)))]
    assert len({l["name"] for name in SETS for l in LAYER_SETS[name]}) == sum(len(LAYER_SETS[n]) for n in SETS)


@pytest.mark.parametrize("name", SETS)
def test_every_layer_is_a_convolution_the_three_operations_accept(name):
    """Checked on the shapes alone (no tensors): each layer's ConvShape, and its output size where
    the network keeps or halves the input."""
    for op in CONV:
        assert layer_set(name, op) is LAYER_SETS[name]
    for lay in LAYER_SETS[name]:
        x = (lay["n"], lay["c"], *lay["size"])
        w = (lay["c"], lay["k"] // lay["groups"], *lay["kernel"])
        shape = conv_shape("conv_forward", x, w, stride=lay["stride"], padding=lay["padding"],
                           dilation=lay["dilation"], groups=lay["groups"])
        st = lay["stride"] if isinstance(lay["stride"], int) else lay["stride"][0]
        assert shape.out == tuple(-(-s // st) for s in lay["size"]), lay["name"]
        assert not shape.plain


@pytest.mark.parametrize("op", ("gemm", "batchnorm_forward"))
def test_other_operations_refuse_them_by_name(op):
    with pytest.raises(ValueError, match=f"layer set 'conv4d' holds anyshape layers, but {op} takes"):
        layer_set("conv4d", op)
    with pytest.raises(ValueError, match="layer set 'gemm' holds gemm layers, but conv_dgrad takes conv or anyshape "
                                         "layers: choose from resnet50, .*, mobilenetv2_dw, .*, anyshape_ci"):
        layer_set("gemm", "conv_dgrad")


@pytest.mark.parametrize("op", CONV)
@pytest.mark.parametrize("name", ("anyshape_ci", "conv4d_small"))
def test_the_small_sets_run_on_the_any_shape_stages(ctx, op, name):
    """What CI and a CPU run: every layer, checked against the reference with guards."""
    for i, lay in enumerate(layer_set(name, op)):
        args = op_module(op).layer_args(lay, activation=("none", "relu")[i % 2], seed=i)
        res = helpers.check_stage(op, "any_shape", ctx=ctx, guard=True, **args)
        assert res.verdict.startswith("16_any_shape")


def test_the_benchmark_runs_a_set_beside_its_reference(ctx):
    """The benchmark over an any-shape set: every row checked before and after timing, the
    problem labelled with its groups and dilation."""
    out = bench.run("conv_wgrad", ["any_shape"], "anyshape_ci", ctx, warmup=0, repeats=3, vendor=False, peak=False,
                    progress=False)
    assert [r["layer"] for r in out["rows"]] == [l["name"] for l in LAYER_SETS["anyshape_ci"]]
    assert all(r["verified"] for r in out["rows"])
    assert out["rows"][0]["problem"] == "N2 C16 12x12 K16 3x3 s(2, 2) p((1, 1), (1, 1)) d(1, 1) g16 none"
    assert np.isfinite([r["gflops"] for r in out["rows"]]).all()
