"""Kernel exercises: the table of gaps, one per kernel exercise of the course.

    from helpers.chapters.kernel_exercises import kernel_gap
    gap = kernel_gap("naive_checks")
    gap.show()                       # the kernel, with the gap marked
    gap.check(my_code, ctx=nb.ctx)   # splice the code in, run it through the one checker

Each entry of GAPS is a ``Gap`` (helpers/chapters/gap.py: how a gap is shown, spliced, run in a
process of its own and judged) with the shapes it runs, the hints of each and, where the chapter
teaches a way and not only values, the lesson that proves it (helpers/chapters/kernel_lessons.py;
chapter 10's bank model: helpers/chapters/slab_swizzle.py). ``secret_lines()`` is every gap's
hidden lines, course-wide, which the student edition hides in every listing.
"""
from __future__ import annotations

import functools

import numpy as np

from . import kernel_lessons
from .gap import NOT_ANSWERED_KERNEL, Gap  # noqa: F401 (NOT_ANSWERED_KERNEL: the editions writer's)
from .slab_swizzle import _slab_banks, _slab_layout


def _dgrad(*shape):
    def make():
        from ..ops.conv_dgrad import random_problem_args
        return random_problem_args(*shape, seed=len(shape))
    return make


def _fwd(*shape):
    def make():
        from ..ops.conv_forward import random_problem_args
        return random_problem_args(*shape, seed=3)
    return make


def _bn(*shape, offset=0.0, scale=1.0, momentum=None):
    def make():
        from ..ops.batchnorm_forward import random_args
        return random_args(*shape, offset=offset, scale=scale, momentum=momentum, seed=5)
    return make


def _bn_variance_mistake(args, got) -> str:
    """Which known slip the wrong inv_std matches, per channel, from the case's own x and eps."""
    x = args["x"].astype(np.float64)
    count = x.size // x.shape[1]
    m2 = ((x - x.mean(axis=(0, 2, 3), keepdims=True)) ** 2).sum(axis=(0, 2, 3))
    eps = args["eps"]
    slips = {
        "Your inv_std has no eps. eps keeps a channel whose values are all equal (variance 0) from "
        "dividing by zero, and wherever the variance is small it changes the result":
            1 / np.sqrt(m2 / count),
        "Your eps is added after the square root; section 1 adds it to the variance, under the root":
            1 / (np.sqrt(m2 / count) + eps),
        "Your variance is divided by count - 1. That unbiased estimate is for the running statistics; "
        "the batch is normalized by its own, biased variance (section 1)": 1 / np.sqrt(m2 / (count - 1) + eps),
        "Your inv_std is 1 / (variance + eps): the factor is one over a standard deviation":
            1 / (m2 / count + eps),
    }
    inv = np.asarray(got["inv_std"], np.float64)
    off = lambda value: float(np.max(np.abs(inv - value) / np.abs(value)))
    miss = off(1 / np.sqrt(m2 / count + eps))          # how far the kernel is from the right factor
    says, value = min(slips.items(), key=lambda kv: off(kv[1]))
    if off(value) < min(1e-2, miss / 4):
        return says
    if "running_var_out" in got and miss < 1e-3:     # inv_std right: what does m2 hold for running_update?
        mom, before = args["momentum"], args["running_var"].astype(np.float64)
        rv = np.asarray(got["running_var_out"], np.float64)
        held = (1 - mom) * before + mom * (m2 / count) / (count - 1)
        if np.max(np.abs(rv - held) / np.abs(held)) < 1e-3:
            return ("Your inv_std is right, but m2 holds the variance (m2 / count) when running_update reads it: "
                    "running_update takes m2 as the sum of squared deviations and divides it by count - 1 itself. "
                    "Keep m2 the sum; divide by count only inside inv_std's formula")
    return ""


# (N, C, H, W, K, kernel, stride, padding, activation)
_DGRAD_CASES = (
    ("3x3, stride 1, padding 1", _dgrad(2, 5, 7, 6, 9, 3, 1, 1, "relu")),
    ("3x3, stride 1, no padding", _dgrad(1, 4, 6, 7, 5, 3, 1, 0, "none")),
    ("3x3, stride 2, padding 1", _dgrad(1, 3, 9, 8, 6, 3, 2, 1, "tanh")),
    ("5x5, stride 3, padding 2", _dgrad(1, 2, 11, 10, 3, 5, 3, 2, "none")),
    ("1x1 kernel on a 1x1 input", _dgrad(1, 3, 1, 1, 4, 1, 1, 0, "none")),
)
_STRIDE_HINT = {"3x3, stride 2, padding 1": "Stride 1 works: what if h + PAD - r is not a multiple of STRIDE?",
                "5x5, stride 3, padding 2": "Stride 1 works: what if h + PAD - r is not a multiple of STRIDE?",
                "3x3, stride 1, no padding": "Look at the last rows and columns: which oh, ow exist?"}

def _any_shape_kind(case) -> str:
    """What a case of the any-shape grid adds to chapter 02's layer: plain, dilated, grouped, both."""
    dilation, groups = case[4], case[5]
    dilated = any(v != 1 for v in (dilation if isinstance(dilation, tuple) else (dilation,)))
    return {(False, False): "plain", (True, False): "dilated", (False, True): "grouped"}.get(
        (dilated, groups > 1), "grouped and dilated")


def _any_shape_label(case, i: int) -> str:
    """A case of the grid as a learner reads it: rank, sizes, kernel, groups, dilation, stride."""
    xs, ws, stride, _, dilation, groups, _ = case
    kind = ("depthwise" if groups == xs[1] > 1 else f"{groups} groups" if groups > 1 else "1 group")
    return (f"#{i} {len(xs) - 2}-D {'x'.join(map(str, xs[2:]))}, kernel {'x'.join(map(str, ws[2:]))}, {kind}, "
            f"dilation {dilation}, stride {stride}")


def _any_shape_cases() -> tuple:
    """Every case of the any-shape grid (helpers/ops/grid_any_shape.py), with the seed the grid
    test gives it: the plain ones first, then those with dilation only, then groups only, then both.
    A kernel that ignores dilation or groups passes the cases before and fails at the first that
    has it, so the first failure names what is missing."""
    from ..ops.grid_any_shape import ANY_SHAPE, any_shape_args
    order = ("plain", "dilated", "grouped", "grouped and dilated")
    ranked = sorted(enumerate(ANY_SHAPE), key=lambda ic: order.index(_any_shape_kind(ic[1])))
    return tuple((_any_shape_label(c, i), lambda i=i, c=c: any_shape_args("conv_dgrad", c, i)) for i, c in ranked)


def _any_shape_hints(cases) -> dict:
    """Where to look, by what the first failing case adds (every case before it has passed)."""
    from ..ops.grid_any_shape import ANY_SHAPE
    says = {
        "plain": "This shape has one group and no dilation: look at the checks on each axis (chapter 02's: the "
                 "candidate negative, not a multiple of the stride, or past the last output).",
        "dilated": "The shapes without dilation pass. On an axis with dilation d, tap q sits q·d positions into "
                   "the window, not q: which output read this input through it (section 4)?",
        "grouped": "The shapes with one group pass. Input channel c belongs to one group: which output channels "
                   "of dy does it send its gradient to, and where are its weights in w, which is (C, K/G, ...)? "
                   "The group moves the index of one of the two tensors, not both.",
        "grouped and dilated": "Every shape before this one passes, each with groups or dilation alone. Here they "
                               "meet, and only the 4-D shapes dilate or stride the first axis (a, q, DA): check "
                               "that axis too, and how your indices combine the group and the tap.",
    }
    kinds = {_any_shape_label(c, i): _any_shape_kind(c) for i, c in enumerate(ANY_SHAPE)}
    return {label: says[kinds[label]] for label, _ in cases}


def _any_shape_summary() -> str:
    from collections import Counter

    from ..ops.grid_any_shape import ANY_SHAPE
    n = Counter(_any_shape_kind(c) for c in ANY_SHAPE)
    return (f"the any-shape grid, ranks 1 to 4: {n['plain']} plain, {n['dilated']} dilated, {n['grouped']} "
            f"grouped or depthwise, {n['grouped and dilated']} both")


_ANY_SHAPE_CASES = _any_shape_cases()


GAPS = {
    # chapter 02: the checks of the naive kernel (which output positions exist)
    "naive_checks": Gap(
        "conv_dgrad", "naive", "const int oh_s = h + PAD - r;", "if (ow >= OW) continue;",
        "for weight (r, s), find (oh, ow) and skip the offsets whose output does not exist",
        _DGRAD_CASES, _STRIDE_HINT),
    # chapter 03: the table of valid offsets, built once per work-item
    "memo_table": Gap(
        "conv_dgrad", "memoized_bounds", "const int oh_s = h + PAD - r;", "valid[r][s] = row_ok",
        "fill valid[r][s] for every (r, s): does output ((h+PAD-r)/STRIDE, (x+PAD-s)/STRIDE) exist?",
        _DGRAD_CASES, _STRIDE_HINT, inline=("dgrad_memoized.h",)),
    # chapter 04: the 3x3 weights through one 8-wide load and one scalar
    "weight_load": Gap(
        "conv_dgrad", "weight_vec", "const weights3x3 wk = load_weights3x3(", "const weights3x3 wk = load_weights3x3(",
        "declare `weights3x3 wk`: the 9 weights of (c, k), fetched with one 8-wide load and one scalar",
        _DGRAD_CASES[:3], {lbl: "Which float of w is the first weight of block (c, k) in IOHW order?"
                           for lbl, _ in _DGRAD_CASES}, lesson=kernel_lessons.vector_weights),
    # chapter 05: when may a work-item read its three dy columns as one 3-wide load?
    "inside_test": Gap(
        "conv_dgrad", "input_vec", "const bool inside = x + PAD - 2 >= 0", "const bool inside = x + PAD - 2 >= 0",
        "declare `const bool inside`: true exactly where this work-item may read its window of dy with "
        "one 3-wide load per row",
        _DGRAD_CASES[:3] + (("3x3, stride 1, a 2-wide input", _dgrad(1, 2, 5, 2, 3, 3, 1, 1, "none")),),
        {"3x3, stride 1, padding 1": "Check both ends of the window: the leftmost and rightmost columns.",
         "3x3, stride 1, no padding": "Check both ends of the window: the leftmost and rightmost columns.",
         "3x3, stride 1, a 2-wide input": "Check both ends of the window: the leftmost and rightmost columns."},
        lesson=kernel_lessons.vector_path,
        conceal=("// Memory safety: the vector path runs only when", "// floats lie inside one row of dy")),
    # chapter 09: the cooperative copy of the dy patch (the tile with its halo) into local memory
    "tile_copy": Gap(
        "conv_dgrad", "local_tile", "const int kk = i / (PH * PW), py = i / PW % PH, px = i % PW;",
        "dyt[kk][py][px] = ok ?",
        "element i of the chunk's patch: find (kk, py, px), store its dy value (activation derivative "
        "applied) into dyt[kk][py][px], or 0 where that output does not exist",
        (("3x3, padding 1, tiles that do not divide the plane", _dgrad(2, 5, 7, 6, 9, 3, 1, 1, "relu")),
         ("3x3, no padding", _dgrad(1, 4, 6, 7, 5, 3, 1, 0, "none")),
         ("5x5, padding 2, K not a multiple of KC", _dgrad(1, 3, 9, 8, 11, 5, 1, 2, "tanh")),
         ("1x1 kernel on a 1x1 input", _dgrad(1, 3, 1, 1, 4, 1, 1, 0, "none"))),
        {"3x3, padding 1, tiles that do not divide the plane":
             "Patch row py is dy row oh0 + py: which rows and columns of dy exist? And is the activation "
             "derivative applied (GRAD_IN in kernels/common/course.h)?",
         "3x3, no padding": "Patch row py is dy row oh0 + py: does the bounds check cover both ends?",
         "5x5, padding 2, K not a multiple of KC": "The last chunk runs past K: which output channels exist?"},
        lesson=kernel_lessons.coalesced_copy,
        conceal=("// Memory safety: the copy reads dy only at (k < K, 0 <= oh < OH, 0 <= ow < OW)",),
        # 09_prefetch's copy of these lines, shown in chapter 09's diff beside the gap
        spellings=("oh = oh0 + py, ow = ow0 + px", "k < K && oh >= 0 && oh < OH && ow >= 0 && ow < OW",
                   "ok ? GRAD_IN(dy, y, ((n * K + k) * OH + oh) * OW + ow) : 0.0f",
                   "[i / (PH * PW)][i / PW % PH][i % PW]")),
    # chapter 10: the XOR-swizzled address of a weight in the transposed slab
    "slab_swizzle": Gap(
        "conv_dgrad", "swizzle", "#define WADDR(R, cc)", "#define WADDR(R, cc)",
        "#define WADDR(R, cc): the float of weight (row R, channel cc) in a half of the slab, rows of CB "
        "floats, no padding, each float4 of 4 channels kept whole",
        (("3x3, C=40, K=9, odd plane", _dgrad(1, 40, 9, 7, 9, 3, 1, 1, "relu")),
         ("5x5, C=33, K=5", _dgrad(1, 33, 6, 6, 5, 5, 1, 2, "none")),
         ("1x1, C=64", _dgrad(2, 64, 3, 5, 6, 1, 1, 0, "none"))),
        {lbl: "The layout passed the checks run on WADDR as arithmetic; but a C macro pastes its arguments "
              "as text (WADDR(W_R(i), W_CC(i))): is every use of R and cc in parentheses?"
         for lbl in ("3x3, C=40, K=9, odd plane", "5x5, C=33, K=5", "1x1, C=64")},
        before=_slab_layout, after=_slab_banks, other_answer=True, inline=("dgrad_slab_swizzle.h",)),
    # chapter 12: the zero padding of Winograd's input tiles
    "wino_tile_padding": Gap(
        "conv_forward", "wino_naive", "const float d = (h >= 0 && h < IH", "? GRAD_IN(x, xy,",
        "declare `const float d`: the tile's input value at (h, x_), or 0 where (h, x_) lies in the padding",
        (("3x3, padding 1", _fwd(1, 3, 7, 6, 4, 3, 1, 1)), ("3x3, no padding", _fwd(2, 2, 6, 9, 3, 3, 1, 0)),
         ("3x3, padding 2, odd sizes", _fwd(1, 5, 5, 7, 2, 3, 1, 2))),
        {"3x3, no padding": "Tiles at the right and bottom edges can stick out of the input too."},
        # stages 02-05 keep the test with one more term (live &&): chapter 12's diff of 01 and 02 shows it
        spellings=("h >= 0 && h < IH && x_ >= 0 && x_ < IW",)),
    # chapter 14: the variance of the naive batch-norm kernel
    "bn_variance": Gap(
        "batchnorm_forward", "naive", "float m2 = 0.0f;", "const float inv_std =",
        "compute m2 (the sum of squared deviations from the mean) and inv_std, the factor that section 1's "
        "formula multiplies x - mean by",
        # the first two also update the running statistics, at counts 50 and 2: running_update reads m2
        # after the gap (so m2 must stay the sum of squared deviations, whatever inv_std is)
        (("N=2, C=3, 5x5, data around 0", _bn(2, 3, 5, 5, momentum=0.1)),
         ("N=1, C=2, 1x2", _bn(1, 2, 1, 2, momentum=0.5)),
         ("N=3, C=2, 4x4, data around 1000", _bn(3, 2, 4, 4, offset=1000.0)),
         ("N=2, C=3, 3x5, a spread as small as eps", _bn(2, 3, 3, 5, scale=0.003))),
        {"N=3, C=2, 4x4, data around 1000": "Right near 0, wrong near 1000: is there a difference of "
         "two large, nearly equal numbers?",
         "N=2, C=3, 3x5, a spread as small as eps": "Right where the spread is large, wrong where the variance "
         "is as small as eps: where does eps enter the formula of section 1?",
         **{lbl: "This case also updates the running statistics (a momentum is given): running_update "
                 "(kernels/common/batchnorm.h) reads m2 after your lines. What must m2 hold then?"
            for lbl in ("N=2, C=3, 5x5, data around 0", "N=1, C=2, 1x2")}},
        diagnose=_bn_variance_mistake,
        # 05_fused's copy of the last line (its count is n_i), shown in chapter 14's diffs before the exercise
        spellings=("const float inv_std = 1.0f / sqrt(m2 / n_i + eps);",)),
    # chapter 16: groups and dilation in the any-shape input gradient's loops over the taps
    "groups_dilation": Gap(
        "conv_dgrad", "any_shape", "const int CG = C / G, KG = K / G, g = c / CG;",
        "const __global float* wc = w + c * KG * taps",
        "declare KG; open the loops over the taps q, t, r, s, skipping a tap whose output does not exist; "
        "declare o, the index in dy of that output in the first output channel of c's group, and wc, the "
        "address in w of c's weight of this tap for that channel",
        _ANY_SHAPE_CASES, _any_shape_hints(_ANY_SHAPE_CASES),
        # the header's inverted formula (the dilated tap's output, on the first axis)
        conceal=("oa = (a + PA - q*DA) / SA",), summary=_any_shape_summary(),
        # the same arithmetic in the listings of chapter 16 above the exercise: the depthwise rungs'
        # dilated taps (16_dw_tiles, 16_dw_regs) and the forward implicit GEMM's offsets of a group's
        # first input and output channel (conv_forward 16_igemm_nd)
        spellings=("h + PH - r * DH - t.oh0 * SH", "x + PW - s * DW - t.ow0 * SW", "i + PW - s * DW",
                   "(n * C + g * CG) * V", "(img * K + g * KG) * OV")),
}


@functools.lru_cache(maxsize=1)
def secret_lines() -> dict:
    """Every kernel exercise's hidden lines, course-wide: {key: gap name} (what the student
    edition hides in every listing: helpers/chapters/answers.py)."""
    out = {}
    for name, gap in GAPS.items():
        for k in gap.secrets():
            out.setdefault(k, name)
    return out


def kernel_gap(name: str) -> Gap:
    if name not in GAPS:
        raise ValueError(f"no kernel exercise {name!r}; there are: {', '.join(GAPS)}")
    return GAPS[name]
