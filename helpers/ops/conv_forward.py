"""Op "conv_forward": the forward pass of a convolution layer, optionally with its bias and activation.

run_stage("conv_forward", stage, input=(N,C,H,W), weight=(C,K,R,S) IOHW, stride=1, padding=0,
          bias=None, activation="none") -> output (N,K,OH,OW) = act(convolution + bias)

Any shape (helpers/ops/shape.py): input (N,C,*size) with 1 to 4 spatial axes, weight
(C,K/groups,*kernel), ``groups``, ``dilation``, ``stride`` per axis and ``padding`` per axis or
per side; the stages of chapters 00-15 run the plain 2-D shape and refuse the others by name
(stage_requires), the any-shape stage runs them all.

Single-kernel stages take ``(x, w, bias, y, N, C, H, W, K, OH, OW, PAD)`` and are built with
-DKH, -DKW, -DSTRIDE, -DBIAS, -DACT; without a bias the ``bias`` argument shares the weight's
buffer and is not read (BIAS = 0). Only stages with a fused epilogue (``epilogue=True`` in
helpers/stages/conv_forward.py: the direct baseline and chapter 13's tensor-core stages) add a
bias or apply an activation; the others refuse such a problem before any launch. The Winograd
stages (chapter 12) are several kernels each; their launches are helpers/launch/winograd.py's.
"""
from __future__ import annotations

from math import prod

import numpy as np

from . import reference as ref
from ..engine.check import rtol_for_sum, rtol_mma
from .problem import (ACT_CODES, FLOPS_2D, FLOPS_ANY, Problem, conv_problem_parts, reject_unknown, shape_requires,
                      tensor)
from .shape import conv_shape, rank_of, layer_args as any_shape_layer_args

OP = "conv_forward"
NAME = "forward convolution"  # the name tables and prose give it (helpers/analysis/compare.py)
# the layer sets the benchmark takes (helpers/ops/layers.py: their kind, the small default set)
LAYERS = ("conv", "ci")
ARGS = ("input", "weight", "stride", "padding", "dilation", "groups", "bias", "activation")

# The tolerance, and why Winograd needs its own scale. The direct kernel's rounding error at an
# output is bounded by eps * sqrt(terms) times the sum of |x|*|w| over that output's own window
# (helpers/engine/check.py). A Winograd output is computed from its whole 4x4 input tile: the transforms
# add and subtract inputs that cancel exactly in exact arithmetic but not in float32, so its error
# scales with the magnitudes of the *tile*, not with the output's own window. Chapter 12 shows
# it: with one input channel and padding 2, a corner output sees one input, yet its Winograd error
# is set by the other inputs of its tile, hundreds of times that one input's share of rounding.
# So for 3x3 stride-1 problems (where the Winograd stages run) the magnitude is the tile's:
#     sum over c of (sum of |x| over the output's 4x4 input tile) * max |w[c, k]|,
# which also bounds the direct kernel's magnitude (its 3x3 window lies inside the tile).
# Measured in chapter 12 against that scale (1 to 32 channels, paddings 0-2, random data), the
# worst error is about 0.03 of the tolerance below for F(2x2,3x3) and 0.02 for the direct kernel,
# while against each output's own terms the Winograd error reaches over 10x eps*sqrt(9C) (with
# one channel): the tile scale is what makes the tolerance honest for Winograd, not a larger
# rtol. The rtol is the usual float32 one (check.rtol_for_sum, 8x safety). A dropped or doubled
# term, an error of roughly 1/(16C) of the tile scale, still fails that per-element bound for C up
# to several hundred (the tests use C <= 48); a dropped channel fails the bound on the output as a
# whole at any realistic C (helpers/engine/check.py; tests/test_checker_at_size.py at C = 512).
# F(4x4,3x3) (stage 06, chapter 12a) computes each 4x4 output tile from a 6x6 input tile, so its
# scale is that tile's: the magnitude is the larger of the two tile sums (the 6x6 tile of an
# output holds its 4x4 F(2x2) tile, so for F(2x2) and direct nothing is loosened by more than
# that ratio). Against it, with the NumPy model of helpers/chapters/winograd.py (1 to 128
# channels, paddings 0-2, 4 seeds), F(4x4)'s worst error is 0.12 of the tolerance (one channel;
# 0.03 with 8), F(2x2)'s 0.027; chapter 12a measures the real kernels on the channel counts of
# the resnet50, vgg16 and winograd6 sets (all far below 1). A dropped term, about 1/(36C) of
# the scale, still fails per element for C up to a few hundred, and as a whole beyond.
WINOGRAD_TILES = (2, 4)   # output tile sides m of the Winograd stages: F(2x2,3x3), F(4x4,3x3)


def tile_magnitude(x: np.ndarray, w: np.ndarray, padding: int, oh: int, ow: int, m: int = 2) -> np.ndarray:
    """For each output: sum_c (sum of |x| over its m x m tile's (m+2) x (m+2) input window) * max_rs |w[c,k]|."""
    n, c, h, wd = x.shape
    a = m + 2
    th, tw = -(-oh // m), -(-ow // m)
    xp = np.zeros((n, c, m * th + 2, m * tw + 2))
    # a NaN or infinity in the input reaches its outputs in the reference too (counted as matching
    # there, helpers/engine/check.py); it must not spread into the bounds of the tile's other outputs
    src = np.nan_to_num(np.abs(x.astype(np.float64)), nan=0.0, posinf=0.0)[:, :, :m * th + 2 - padding,
                                                                             :m * tw + 2 - padding]
    xp[:, :, padding:padding + src.shape[2], padding:padding + src.shape[3]] = src
    win = np.lib.stride_tricks.sliding_window_view(xp, (a, a), axis=(2, 3))[:, :, ::m, ::m]
    sums = win.sum(axis=(-1, -2))                                     # (N, C, TH, TW)
    wmax = np.abs(w.astype(np.float64)).max(axis=(2, 3))              # (C, K)
    t = np.einsum("ncij,ck->nkij", sums, wmax)
    return np.repeat(np.repeat(t, m, axis=2), m, axis=3)[:, :, :oh, :ow]


def prepare(*, input=None, weight=None, stride=1, padding=0, dilation=1, groups=1, bias=None, activation="none",
            **unknown) -> Problem:
    reject_unknown(OP, unknown, ARGS)
    x = tensor(OP, "input", input)
    w = tensor(OP, "weight", weight)
    rank = rank_of(OP, [("input", x.shape, "input", "dimensions"), ("weight", w.shape, "weight", "dimensions")])
    x, w = tensor(OP, "input", x, rank + 2), tensor(OP, "weight", w, rank + 2)     # a 4-D device tensor's layout
    shape = conv_shape(OP, x.shape, w.shape, stride=stride, padding=padding, dilation=dilation, groups=groups)
    n, k = shape.n, shape.k
    if bias is not None:
        bias = tensor(OP, "bias", bias, 1)
        if bias.shape != (k,):
            raise ValueError(f"{OP}: bias must have shape (K,) = ({k},), one value per output channel; "
                             f"got {bias.shape}")
    act = activation
    if act not in ACT_CODES:
        raise ValueError(f"{OP}: activation must be one of {', '.join(ACT_CODES)}, got {act!r}")
    size = n * k * prod(shape.out)
    if size > 2**31 - 1:
        raise ValueError(f"{OP}: the output would have {size:,} elements; the kernels "
                         f"index with 32-bit integers")
    epilogue = " + bias" * (bias is not None) + (f" {act}" if act != "none" else "")
    scalars, defines = conv_problem_parts(shape)
    return Problem(
        op=OP,
        inputs={"input": x, "weight": w, "bias": w if bias is None else bias},
        outputs={"output": (n, k, *shape.out)},
        scalars=scalars,
        defines={**defines, "BIAS": int(bias is not None), "ACT": ACT_CODES[act]},
        dims={**shape.dims(), "bias": bias is not None, "activation": act},
        aliases={} if bias is not None else {"bias": "weight"},
        flops=shape.flops(),
        min_bytes=4 * (x.size + w.size + size + (k if bias is not None else 0)),
        flops_formula=f"{FLOPS_2D if shape.plain else FLOPS_ANY} (the direct convolution's multiply-adds, "
                      f"whatever the algorithm)",
        bytes_formula="4 bytes · (|input| + |weight| + |output| (+ |bias| with a bias))",
        label=f"N{n} C{shape.c} {shape.text()}{epilogue}",
    )


def has_epilogue(p: Problem) -> bool:
    """Whether the problem asks for more than the convolution: a bias or an activation."""
    return p.dims["bias"] or p.dims["activation"] != "none"


def stage_requires(stage, p: Problem):
    """None, or why the stage cannot run this problem whatever its parameters (checked before
    fallbacks are followed): a shape other than a plain 2-D one needs an any-shape stage
    (problem.shape_requires), a bias or an activation a stage with a fused epilogue."""
    need = shape_requires(stage, p)
    if need is None and has_epilogue(p) and not stage.epilogue:
        need = "it computes the convolution alone, without a bias or an activation"
    return need


def mma_operands(p: Problem) -> tuple:
    """The inputs a TF32 stage rounds before its mma (chapter 13): x and w; the bias is added in
    float32 in the epilogue."""
    return ("input", "weight")


def reference(p: Problem):
    d = p.dims
    x, w = p.inputs["input"], p.inputs["weight"]
    geometry = (d["strides"], d["pads"], d["dilation"], d["groups"])
    pre = ref.conv_forward_nd(x, w, *geometry)
    magnitude = ref.conv_forward_nd(np.abs(x), np.abs(w), *geometry)
    if d["plain"] and (d["KH"], d["KW"], d["stride"]) == (3, 3, 1):   # where the Winograd stages run: see above
        for m in WINOGRAD_TILES:
            magnitude = np.maximum(magnitude, tile_magnitude(x, w, d["pad"], d["OH"], d["OW"], m))
    if d["bias"]:
        b = p.inputs["bias"].astype(np.float64).reshape(1, -1, *(1,) * d["rank"])
        pre, magnitude = pre + b, magnitude + np.abs(b)
    expected = ref.activation(d["activation"], pre)
    # relu, sigmoid and tanh move an error by at most its size (slopes <= 1), so the sum's magnitude
    # still bounds it; an output stored in 16 bits is also rounded relative to its own size (a
    # sigmoid's 0.5 from a small sum)
    if d["activation"] != "none":
        magnitude = np.maximum(magnitude, np.abs(expected))
    return {"output": expected}, {"output": magnitude}


def terms(p: Problem) -> int:
    """Each output sums C/groups * the kernel's taps products (C*KH*KW in 2-D without groups)."""
    d = p.dims
    return d["C"] // d["groups"] * prod(d["kernel"])


def rtol(p: Problem, mma: str | None = None) -> float:
    """One tolerance for every float32 stage of the op (Winograd's larger error is in the magnitude,
    above); ``mma``: a tensor-core stage's precision (chapter 13)."""
    return rtol_for_sum(terms(p)) if mma is None else rtol_mma(terms(p), mma, fused=False)


def random_problem_args(n, c, h, w, k, kernel=3, stride=1, padding=1, seed=0, activation="none", bias=False):
    """Random, reproducible arguments for one layer (tests, notebooks, the benchmark)."""
    rng = np.random.default_rng(seed)
    args = dict(input=rng.standard_normal((n, c, h, w), dtype=np.float32),
                weight=(rng.standard_normal((c, k, kernel, kernel), dtype=np.float32)
                        / np.float32(np.sqrt(c * kernel * kernel))).astype(np.float32),
                stride=stride, padding=padding)
    if bias:
        args["bias"] = rng.standard_normal(k, dtype=np.float32)
    if activation != "none":
        args["activation"] = activation
    return args


def layer_args(layer: dict, activation: str = "none", seed: int = 0) -> dict:
    """Arguments for one layer of a set in helpers/ops/layers.py. With an activation the layer is
    a network's whole forward step, act(convolution + bias), so a bias comes with it (the fused
    epilogue of chapter 13's forward stages); without one, the bare convolution."""
    if "size" in layer:                 # a layer of any shape (helpers/ops/layers.py: nd_layer)
        return any_shape_layer_args(OP, layer, activation, seed)
    return random_problem_args(layer["n"], layer["c"], layer["h"], layer["w"], layer["k"], layer["kernel"],
                               layer["stride"], layer["padding"], seed, activation, bias=activation != "none")


def vendor_time(problem: Problem, warmup: int, repeats: int, flush_bytes: int, precision: str = "fp32"):
    """cuDNN's forward convolution through PyTorch on an NVIDIA GPU, or None: fp32 with TF32 off,
    or the precision of a tensor-core stage; with the problem's bias and activation (PyTorch's
    own kernels, all timed)."""
    if not problem.dims["plain"]:       # groups, dilation, 1-D, 3-D, 4-D: PyTorch's own convolution
        from .vendor_nd import vendor_time as any_shape_time
        return any_shape_time(problem, OP, warmup, repeats, flush_bytes)
    from .vendor import cudnn_conv_forward
    d = problem.dims
    return cudnn_conv_forward(problem.inputs["input"], problem.inputs["weight"], d["stride"], d["pad"],
                              warmup=warmup, repeats=repeats, flush_bytes=flush_bytes, precision=precision,
                              bias=problem.inputs["bias"] if d["bias"] else None, activation=d["activation"])
