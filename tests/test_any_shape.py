"""Convolutions of any shape (helpers/ops/shape.py): bad input refused in one line before any
launch, the stages of chapters 00-15 refusing what they cannot run with the requirement named,
stage auto choosing only among the stages that run, the plain 2-D problem unchanged, and planted
faults in the any-shape kernels that the grid test's own code catches on the ANY_SHAPE tier.

The any-shape stages themselves run every case of their operation's grid in tests/test_stages.py
(ANY_SHAPE is part of the three convolutions' grids)."""
import numpy as np
import pytest

import helpers
from helpers import chooser
from helpers.ops import conv_dgrad, conv_forward, op_module
from helpers.stages import REGISTRY

from shapes import ANY_SHAPE, GRIDS, any_shape_args
from test_bad_input import no_launch
from test_stages import planted, run_grid

pytestmark = pytest.mark.debug_builds      # breadth: built without the optimiser on a CPU (tests/conftest.py)

CONV = ("conv_forward", "conv_dgrad", "conv_wgrad")
F32 = np.float32


def forward(**over):
    """A grouped, dilated 2-D forward problem with strides and padding per axis."""
    a = dict(input=np.ones((2, 6, 9, 8), F32), weight=np.ones((6, 2, 3, 3), F32), groups=2, stride=(1, 2),
             padding=((1, 0), (2, 1)), dilation=(2, 1))
    a.update(over)
    return a


@pytest.mark.parametrize("over, err, match", [
    (dict(groups=4), ValueError, r"conv_forward: groups = 4 must divide the input channels C = 6 \(each group "
                                 r"convolves C/groups of them\); groups = C is the depthwise convolution"),
    (dict(groups=0), ValueError, "groups must be >= 1, got 0"),
    (dict(groups=2.0), TypeError, "groups must be an integer"),
    (dict(dilation=0), ValueError, "dilation must be >= 1, got 0"),
    (dict(dilation=(1, 0)), ValueError, r"dilation\[1\] must be >= 1, got 0"),
    (dict(dilation=(1, 1, 1)), ValueError, r"dilation has 3 entries but the convolution is 2-D: give one integer, "
                                           r"or one per spatial axis \(H, W\)"),
    (dict(stride=(2,)), ValueError, r"stride has 1 entries but the convolution is 2-D"),
    (dict(stride="2"), TypeError, "stride must be an integer or a tuple of one per spatial axis"),
    (dict(padding=((1, 1),)), ValueError, r"padding has 1 entries but the convolution is 2-D: give one \(begin, "
                                          r"end\) pair per spatial axis \(H, W\)"),
    (dict(padding=((1, 1), 2)), ValueError, r"padding\[1\] must be a \(begin, end\) pair like the other entries"),
    (dict(padding=((1, 1), (0, -1))), ValueError, r"padding\[1\] must be >= 0"),
    (dict(dilation=(5, 1), padding=0), ValueError, r"a 3x3 kernel dilated by \(5, 1\) \(spanning 11x3\) does not "
                                                   r"fit in the padded 9x8 input"),
    (dict(input=np.ones((2, 6, 9, 8, 4), F32)), ValueError, r"input must have 4 dimensions \(N, C, H, W\) like "
                                                            r"weight \(a 2-D convolution\), got shape \(2, 6, 9, 8, 4\)"),
    (dict(input=np.ones((2, 6), F32)), ValueError, r"input must have 3 to 6 dimensions \(N, C and 1 to 4 "
                                                   r"spatial axes\)"),
    (dict(input=np.ones((1, 1, 1, 1, 1, 1, 1), F32)), ValueError, r"input must have 3 to 6 dimensions"),
    (dict(weight=np.ones((4, 2, 3, 3), F32)), ValueError, r"weight is \(C_in, C_out/groups, R, S\) = \(4, 2, 3, 3\), "
                                                          r"so its first dimension must equal the input's channels"),
])
def test_bad_arguments_are_refused_in_one_line_before_any_launch(ctx, monkeypatch, over, err, match):
    no_launch(monkeypatch)
    with pytest.raises(err, match=match) as info:
        helpers.run_stage("conv_forward", "any_shape", ctx=ctx, **forward(**over))
    assert "\n" not in str(info.value)


def test_bad_arguments_of_the_gradients(ctx, monkeypatch):
    """The backward passes take the same arguments: groups that do not divide K (grad_output's
    channels), ranks that differ between input_shape, weight and grad_output."""
    no_launch(monkeypatch)
    dy = np.ones((1, 5, 4, 4), F32)
    with pytest.raises(ValueError, match=r"conv_dgrad: groups = 2 must divide the output channels K = 5"):
        helpers.run_stage("conv_dgrad", "any_shape", ctx=ctx, grad_output=dy, weight=np.ones((4, 2, 3, 3), F32),
                          input_shape=(1, 4, 6, 6), groups=2)
    with pytest.raises(ValueError, match=r"conv_dgrad: input_shape must have 4 entries \(N, C, H, W\) like weight "
                                         r"and grad_output \(a 2-D convolution\), got shape \(1, 4, 6\)"):
        helpers.run_stage("conv_dgrad", "any_shape", ctx=ctx, grad_output=dy, weight=np.ones((4, 5, 3, 3), F32),
                          input_shape=(1, 4, 6))
    with pytest.raises(ValueError, match=r"conv_wgrad: weight_shape must have 5 entries \(C, K/groups, T, R, S\) like "
                                         r"input and grad_output \(a 3-D convolution\)"):
        helpers.run_stage("conv_wgrad", "any_shape", ctx=ctx, input=np.ones((1, 4, 3, 6, 6), F32),
                          grad_output=np.ones((1, 4, 1, 4, 4), F32), weight_shape=(4, 2, 3, 3), groups=2)
    with pytest.raises(ValueError, match=r"conv_wgrad: grad_output must have shape \(N, K, OD, OH, OW\) = "
                                         r"\(1, 4, 1, 4, 4\) for input \(1, 4, 3, 6, 6\), a 3x3x3 kernel with 4 output "
                                         r"channels, stride \(1, 1, 1\), padding \(\(0, 0\), \(0, 0\), \(0, 0\)\), "
                                         r"dilation \(1, 1, 1\), groups 2; got \(1, 4, 1, 4, 5\)"):
        helpers.run_stage("conv_wgrad", "any_shape", ctx=ctx, input=np.ones((1, 4, 3, 6, 6), F32),
                          grad_output=np.ones((1, 4, 1, 4, 5), F32), weight_shape=(4, 2, 3, 3, 3), groups=2)


def test_bad_arguments_of_a_4d_convolution(ctx, monkeypatch):
    """The fourth axis is named in every message: ranks that disagree, a stride or padding of the
    wrong length, a grad_output whose shape does not follow."""
    no_launch(monkeypatch)
    x, w = np.ones((1, 4, 3, 4, 4, 4), F32), np.ones((4, 1, 3, 3, 3, 3), F32)
    with pytest.raises(ValueError, match=r"conv_forward: input must have 5 dimensions \(N, C, D, H, W\) like weight "
                                         r"\(a 3-D convolution\), got shape \(1, 4, 3, 4, 4, 4\)"):
        helpers.run_stage("conv_forward", "any_shape", ctx=ctx, input=x, weight=np.ones((4, 1, 3, 3, 3), F32))
    with pytest.raises(ValueError, match=r"stride has 3 entries but the convolution is 4-D: give one integer, or one "
                                         r"per spatial axis \(A, D, H, W\)"):
        helpers.run_stage("conv_forward", "any_shape", ctx=ctx, input=x, weight=w, groups=4, stride=(1, 2, 1))
    with pytest.raises(ValueError, match=r"conv_dgrad: grad_output must have shape \(N, K, OA, OD, OH, OW\) = "
                                         r"\(1, 4, 3, 4, 4, 4\) for input \(1, 4, 3, 4, 4, 4\), a 3x3x3x3 kernel"):
        helpers.run_stage("conv_dgrad", "any_shape", ctx=ctx, grad_output=np.ones((1, 4, 3, 4, 4, 3), F32), weight=w,
                          input_shape=x.shape, padding=1, groups=4)
    with pytest.raises(ValueError, match=r"conv_wgrad: weight_shape must have 6 entries \(C, K/groups, Q, T, R, S\) "
                                         r"like input and grad_output \(a 4-D convolution\)"):
        helpers.run_stage("conv_wgrad", "any_shape", ctx=ctx, input=x, grad_output=np.ones((1, 4, 3, 4, 4, 4), F32),
                          weight_shape=(4, 1, 3, 3, 3), padding=1, groups=4)


# ---- the plain 2-D problem is what it was --------------------------------------------------------

def test_a_plain_problem_keeps_its_arguments_defines_and_label():
    """2-D, one stride, one padding, no groups or dilation, spelled with ints or per axis: the same
    int32 arguments and structural defines as before (no kernel of chapters 00-15 is built
    differently)."""
    a = conv_dgrad.random_problem_args(2, 3, 9, 7, 4, 3, 2, 1, "relu", seed=0)
    p = helpers.prepare("conv_dgrad", **a)
    assert p.scalars == {"N": 2, "C": 3, "H": 9, "W": 7, "K": 4, "OH": 5, "OW": 4, "PAD": 1}
    assert p.defines == {"KH": 3, "KW": 3, "STRIDE": 2, "ACT": 1}
    assert p.label == "N2 C3 9x7 K4 3x3 s2 p1 relu"
    spelled = helpers.prepare("conv_dgrad", **dict(a, stride=(2, 2), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=1))
    assert (spelled.scalars, spelled.defines, spelled.label) == (p.scalars, p.defines, p.label)
    f = helpers.prepare("conv_forward", **conv_forward.random_problem_args(1, 3, 8, 8, 5, 3, 1, 1, bias=True))
    assert f.defines == {"KH": 3, "KW": 3, "STRIDE": 1, "BIAS": 1, "ACT": 0}
    assert f.scalars == {"N": 1, "C": 3, "H": 8, "W": 8, "K": 5, "OH": 8, "OW": 8, "PAD": 1}


# ---- every other stage refuses other shapes by name ---------------------------------------------

@pytest.mark.parametrize("op", CONV)
def test_every_stage_but_the_any_shape_one_refuses_other_shapes(op):
    """stage_requires (checked before fallbacks) names the requirement for every stage, CUDA too,
    on every case of ANY_SHAPE but the last (a plain shape spelled per axis, which all run)."""
    refuse = op_module(op).stage_requires
    for i, case in enumerate(ANY_SHAPE):
        p = helpers.prepare(op, **any_shape_args(op, case, i))
        for s in REGISTRY[op]:
            need = refuse(s, p)
            if s.any_shape or p.dims["plain"]:
                assert need is None or "bias" in need, (s.key, case)
            else:
                assert need == ("it runs 2-D convolutions with one stride and one padding for every side (at most "
                                "the kernel's extent), without groups or dilation"), (s.key, case)
    assert helpers.prepare(op, **any_shape_args(op, ANY_SHAPE[-1], 1)).dims["plain"]


def test_the_refusal_names_the_stage_and_those_that_can(ctx, monkeypatch):
    no_launch(monkeypatch)
    a = any_shape_args("conv_dgrad", ANY_SHAPE[5], 0)            # depthwise 3x3, stride 2
    with pytest.raises(ValueError, match=r"^stage 05_input_vec of conv_dgrad cannot run this problem: it runs 2-D "
                                         r"convolutions with one stride and one padding for every side \(at most the "
                                         r"kernel's extent\), without groups or dilation; the stages that can are "
                                         r"any_shape, dw_tiles, dw_regs, igemm_nd$"):
        helpers.run_stage("conv_dgrad", "input_vec", ctx=ctx, **a)
    # a stage with a fallback is refused too: its fallback is a 2-D stage
    with pytest.raises(ValueError, match="stage 12_winograd4 of conv_dgrad cannot run this problem: it runs 2-D"):
        helpers.run_stage("conv_dgrad", "winograd4", ctx=ctx, **a)


def test_auto_chooses_only_among_the_stages_that_run(ctx, monkeypatch, tmp_path):
    """The candidates of a grouped problem: the any-shape stages alone (the direct one and the
    implicit GEMM); of a plain one with a bias: the stages with a fused epilogue. conv_dgrad's auto
    runs a depthwise 3-D problem on one of the any-shape stages, checked."""
    monkeypatch.setenv("COURSE_CHOICES", str(tmp_path / "choices.json"))
    grouped = helpers.prepare("conv_dgrad", **any_shape_args("conv_dgrad", ANY_SHAPE[4], 0))
    names, excluded = chooser.candidates(grouped, None)
    assert names == ["any_shape", "igemm_nd"]
    assert excluded["width"].startswith("it runs 2-D convolutions")
    biased = helpers.prepare("conv_forward", **conv_forward.random_problem_args(1, 3, 8, 8, 5, 3, 1, 1, bias=True))
    assert chooser.candidates(biased, None)[0] == ["direct", "any_shape", "igemm_nd"]
    a = any_shape_args("conv_dgrad", ANY_SHAPE[11], 0)
    assert helpers.check_stage("conv_dgrad", "auto", ctx=ctx, guard=True, **a).verdict.split()[0] in ("16_any_shape", "16_igemm_nd")


# ---- planted faults in the any-shape kernels, caught by the grid test's code ---------------------

def tier(op):
    return GRIDS[op]()[-len(ANY_SHAPE):]


@pytest.mark.parametrize("op, old, new, caught", [
    # dilation dropped on the H axis: only a case dilated along H shows it
    ("conv_forward", "oh * SH + r * DH - PH", "oh * SH + r - PH", r"failed on 2d_n2c3k5_\(9, 9\).*d2g1"),
    # every channel read as group 0's: only a grouped case shows it (the first one is 1-D)
    ("conv_dgrad", "KG = K / G, g = c / CG;", "KG = K / G, g = 0;", r"failed on 1d_n2c4k6_.*g2_relu"),
    # the padding before the depth axis forgotten: only a 3-D case padded in front along D shows it
    ("conv_wgrad", "od * SD + t * DD - PD", "od * SD + t * DD", r"failed on 3d_n1c2k3_"),
    # the last output of the single-element 1-D case written one past the output
    ("conv_forward", "y[((n * K + k) * OA + oa) * (OD * OH * OW) + o]",
     "y[((n * K + k) * OA + oa) * (OD * OH * OW) + o + (N * K * OA * OD * OH * OW == 1)]",
     r"failed on 1d_n1c1k1_.*\n.*output.*after the tensor"),
    # the fourth axis' stride ignored: only a 4-D case strided along it shows it (the first one)
    ("conv_forward", "oa * SA + q * DA - PA", "oa + q * DA - PA", r"failed on 4d_n2c4k4_"),
    # the fourth axis' dilation dropped: only the 4-D case dilated along it shows it
    ("conv_dgrad", "a + PA - q * DA", "a + PA - q", r"failed on 4d_n1c6k4_"),
    # every weight's tap on the fourth axis taken as 0: the first 4-D case (two taps there) shows it
    ("conv_wgrad", "const int q = (i / (S * R * T)) % Q;", "const int q = 0;", r"failed on 4d_n2c4k4_"),
])
def test_a_planted_fault_in_an_any_shape_kernel_is_caught_on_the_tier(ctx, op, old, new, caught):
    bad = planted(helpers.get_stage(op, "any_shape"), old, new)
    with pytest.raises(AssertionError, match=caught):
        run_grid(bad, ctx, tier(op))


def test_a_padding_past_the_kernels_reach_is_taken_by_the_any_shape_stages(ctx):
    """PyTorch and ONNX accept a padding larger than the kernel's reach: the outputs that see only
    padding are the bias (zero without one). The any-shape stages compute them; a plain stage
    refuses the shape by name, whatever form the padding is written in."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 3, 4), dtype=F32)
    w = rng.standard_normal((2, 3, 3, 3), dtype=F32)
    bias = np.array([0.5, -1.0, 2.0], F32)
    for padding in (5, (5, 5), ((5, 5), (5, 5))):
        y = helpers.run_stage("conv_forward", "any_shape", ctx=ctx, input=x, weight=w, bias=bias, padding=padding)
        assert y.shape == (1, 3, 11, 12)
        np.testing.assert_array_equal(y[0, :, 0, 0], bias)              # sees only padding: the bias
        helpers.check_stage("conv_forward", "any_shape", ctx=ctx, guard=True, input=x, weight=w, bias=bias,
                            padding=padding)
        with pytest.raises(ValueError, match=r"stage 00_direct of conv_forward cannot run this problem: .*\(at most "
                                             r"the kernel's extent\)"):
            helpers.run_stage("conv_forward", "direct", ctx=ctx, input=x, weight=w, bias=bias, padding=padding)


# ---- planted faults in 16_igemm_nd, caught by the grid test's code --------------------------------

@pytest.mark.parametrize("op, old, new, header, caught", [
    # the dilation left out of the forward gather's tap shift: the first dilated case shows it
    ("conv_forward", "return nd_tap(tap) * DIL4;", "return nd_tap(tap);", "igemm_nd.h", r"failed on 1d_n2c4k6_.*d2g2"),
    # every group reading group 0's weights: the first grouped case
    ("conv_dgrad", "OV, oext, ph, g * CG * KG * TAPS,", "OV, oext, ph, 0,", None, r"failed on 1d_n2c4k6_.*g2"),
    # a phase's first tap found as if the kernel were not dilated: only a stride and a dilation
    # without a common factor show it (with one, each phase has one tap per axis, found either way)
    ("conv_dgrad", "if ((r * dil - rho) % s == 0) tap0 = r;", "if ((r - rho) % s == 0) tap0 = r;", "igemm_nd.h",
     r"failed on 2d_n1c3k2_\(13, 12\)"),
    # the depth axis left out of the bounds test: the first 3-D case padded along it
    ("conv_wgrad", "in = in && (uint)p.y < (uint)e.y;", "", "igemm_nd.h", r"failed on 3d_"),
    # the fourth axis' position decoded as 0: the first 4-D case
    ("conv_wgrad", "p.x = i / e.y;", "p.x = 0;", "igemm_nd.h", r"failed on 4d_"),
    # one row past the group's output channels stored: the next group's first, past the tensor after the last
    ("conv_forward", "if (m >= KG) continue;", "if (m > KG) continue;", None, r"failed on .*\n(.|\n)*after the tensor"),
])
def test_a_planted_fault_in_the_nd_implicit_gemm_is_caught_on_the_tier(ctx, op, old, new, header, caught):
    bad = planted(helpers.get_stage(op, "igemm_nd"), old, new, header)
    with pytest.raises(AssertionError, match=caught):
        run_grid(bad, ctx, tier(op))

