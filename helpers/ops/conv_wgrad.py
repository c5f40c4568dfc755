"""Op "conv_wgrad": the gradient of a convolution layer with respect to its weights.

run_stage("conv_wgrad", stage, input=(N,C,H,W), grad_output=(N,K,OH,OW), weight_shape=(C,K,R,S),
          stride=1, padding=0, activation="none", output=None) -> grad_weight (C,K,R,S) IOHW

``output`` is the layer's forward output after its activation; the activation's derivative is
computed from it and fused on the read of grad_output (as in conv_dgrad). Every weight is a sum
over the N*OH*OW output positions:

    dw[c][k][r][s] = sum over (n, oh, ow) of x[n][c][oh*STRIDE + r - PAD][ow*STRIDE + s - PAD] * dy'[n][k][oh][ow]

Any shape as conv_forward takes it (helpers/ops/shape.py): weight_shape (C,K/groups,*kernel),
``groups``, ``dilation``, ``stride`` per axis, ``padding`` per axis or per side, 1 to 4 spatial
axes; the any-shape stage runs them, the others refuse them by name.

Kernels of every stage take ``(x, dy, y, dw, N, C, H, W, K, OH, OW, PAD)`` and are built with
-DKH, -DKW, -DSTRIDE, -DACT.
"""
from __future__ import annotations

from math import prod

import numpy as np

from . import reference as ref
from ..engine.check import rtol_for_sum
from .problem import (ACT_CODES, INT32_MAX, Problem, activation_output, backward_conv_problem, reject_unknown,
                      shape4, shape_requires, tensor)
from .shape import check_grad_output, conv_shape, rank_of, gradient_layer_args

OP = "conv_wgrad"
NAME = "weight gradient"  # the name tables and prose give it (helpers/analysis/compare.py)
# the layer sets the benchmark takes (helpers/ops/layers.py: their kind, the small default set)
LAYERS = ("conv", "ci")
ARGS = ("input", "grad_output", "weight_shape", "stride", "padding", "dilation", "groups", "activation", "output")


def prepare(*, input=None, grad_output=None, weight_shape=None, stride=1, padding=0, dilation=1, groups=1,
            activation="none", output=None, **unknown) -> Problem:
    reject_unknown(OP, unknown, ARGS)
    x = tensor(OP, "input", input)
    dy = tensor(OP, "grad_output", grad_output)
    if weight_shape is None:
        raise TypeError(f"{OP}: argument weight_shape (C, K, R, S) is required")
    weight_shape = shape4(OP, "weight_shape", weight_shape, "(C, K, R, S)", length=None)
    rank = rank_of(OP, [("input", x.shape, "input", "dimensions"), ("weight_shape", weight_shape, "weight", "entries"),
                        ("grad_output", dy.shape, "grad_output", "dimensions")], groups)
    x, dy = tensor(OP, "input", x, rank + 2), tensor(OP, "grad_output", dy, rank + 2)
    shape = conv_shape(OP, x.shape, weight_shape, stride=stride, padding=padding, dilation=dilation, groups=groups,
                       k=dy.shape[1], weight_name="weight_shape")
    check_grad_output(OP, dy.shape, shape, weight_shape[1], x.shape, name_channels=True)
    act, y = activation_output(OP, activation, output, ACT_CODES, dy)
    if prod(weight_shape) > INT32_MAX:
        raise ValueError(f"{OP}: the weight gradient would have {prod(weight_shape):,} elements; the "
                         f"kernels index with 32-bit integers")

    return backward_conv_problem(
        OP, {"input": x, "grad_output": dy, "output": y if y is not None else dy}, {"grad_weight": weight_shape},
        shape, act, ACT_CODES[act], y is not None,
        "4 bytes · (|input| + |grad_output| + |grad_weight| (+ |output| with an activation))")


def stage_requires(stage, p: Problem):
    """None, or why the stage cannot run this shape (problem.shape_requires), before fallbacks."""
    return shape_requires(stage, p)


# The tolerance of 3x3 stride-1 layers, where stage 04 (Winograd F(3x3,4x4)) runs. Its result for
# a weight comes from whole tiles: per tile, a 6x6 patch of x and a 4x4 tile of dy' transformed,
# multiplied and transformed back, so its rounding error scales with the magnitudes of the whole
# patch and tile, not with the nine windows of the taps. A tap whose window lies mostly in the
# padding (a 1-pixel-high image with padding 1: two of three rows of taps see only zeros) has a
# tiny magnitude of its own and yet the error of the tiles that hold it. As in conv_forward
# (helpers/ops/conv_forward.py), the magnitude is the tile's where it is larger:
#     sum over tiles of (sum of |x| over the tile's 6x6 patch) * (max |dy'| over the 4x4 tile),
# which bounds every tap's own sum of |x||dy'| (its 4x4 window of x lies inside the patch).
def tile_magnitude(x: np.ndarray, scale: np.ndarray, pad: int) -> np.ndarray:
    """(C, K): for each channel pair, the sum above; ``scale`` is |dy'| (N, K, OH, OW)."""
    n, c, h, w = x.shape
    oh, ow = scale.shape[2:]
    th, tw = -(-oh // 4), -(-ow // 4)
    xp = np.zeros((n, c, 4 * th + 2, 4 * tw + 2))
    rows, cols = min(h, 4 * th + 2 - pad), min(w, 4 * tw + 2 - pad)
    xp[:, :, pad:pad + rows, pad:pad + cols] = np.abs(x[:, :, :rows, :cols])
    patch = sum(xp[:, :, a:a + 4 * th:4, b:b + 4 * tw:4] for a in range(6) for b in range(6))
    dp = np.zeros((n, scale.shape[1], 4 * th, 4 * tw))
    dp[:, :, :oh, :ow] = scale
    peak = dp.reshape(n, -1, th, 4, tw, 4).max(axis=(3, 5))
    return np.einsum("ncij,nkij->ck", patch, peak)


def reference(p: Problem):
    d = p.dims
    x, dy, y = p.inputs["input"], p.inputs["grad_output"], p.inputs["output"]
    shape = p.outputs["grad_weight"]
    geometry = (d["strides"], d["pads"], d["dilation"], d["groups"])
    expected = ref.conv_wgrad_nd(x, dy, shape, *geometry, d["activation"], y)
    # the same sum over absolute values: what the rounding error scales with
    scale = np.abs(dy.astype(np.float64))
    if d["activation"] != "none":
        scale = scale * np.abs(ref.activation_derivative(d["activation"], y))
    magnitude = ref.conv_wgrad_nd(np.abs(x), scale, shape, *geometry)
    if d["plain"] and (d["KH"], d["KW"], d["stride"]) == (3, 3, 1):    # where stage 04 runs: see above
        magnitude = np.maximum(magnitude, tile_magnitude(x, scale, d["pad"])[:, :, None, None])
    return {"grad_weight": expected}, {"grad_weight": magnitude}


def terms(p: Problem) -> int:
    """Each weight sums N * the output positions products (N*OH*OW in 2-D)."""
    d = p.dims
    return d["N"] * prod(d["out"])


def rtol(p: Problem) -> float:
    return rtol_for_sum(terms(p))


def random_problem_args(n, c, h, w, k, kernel=3, stride=1, padding=1, activation="none", seed=0):
    """Random, reproducible arguments for one layer: what tests, notebooks and the benchmark use."""
    rng = np.random.default_rng(seed)
    oh, ow = ref.output_size(h, kernel, stride, padding), ref.output_size(w, kernel, stride, padding)
    args = dict(input=rng.standard_normal((n, c, h, w), dtype=np.float32),
                grad_output=rng.standard_normal((n, k, oh, ow), dtype=np.float32),
                weight_shape=(c, k, kernel, kernel), stride=stride, padding=padding, activation=activation)
    if activation != "none":
        pre = rng.standard_normal((n, k, oh, ow))
        args["output"] = ref.activation(activation, pre).astype(np.float32)
    return args


def layer_args(layer: dict, activation: str = "none", seed: int = 0) -> dict:
    """Arguments for one layer of a set in helpers/ops/layers.py."""
    return gradient_layer_args(OP, random_problem_args, layer, activation, seed)


def vendor_time(problem: Problem, warmup: int, repeats: int, flush_bytes: int):
    """cuDNN's fp32 weight gradient (TF32 off) through PyTorch on an NVIDIA GPU, or None."""
    if not problem.dims["plain"]:       # groups, dilation, 1-D, 3-D, 4-D: PyTorch's own convolution
        from .vendor_nd import vendor_time as any_shape_time
        return any_shape_time(problem, OP, warmup, repeats, flush_bytes)
    from .vendor import cudnn_conv_wgrad
    d = problem.dims
    return cudnn_conv_wgrad(problem.inputs["input"], problem.inputs["grad_output"],
                            (d["C"], d["K"], d["KH"], d["KW"]), d["stride"], d["pad"],
                            warmup=warmup, repeats=repeats, flush_bytes=flush_bytes)
