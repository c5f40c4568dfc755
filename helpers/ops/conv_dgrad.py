"""Op "conv_dgrad": the gradient of a convolution layer with respect to its input.

run_stage("conv_dgrad", stage, grad_output=(N,K,OH,OW), weight=(C,K,R,S) IOHW, input_shape=(N,C,H,W),
          stride=1, padding=0, activation="none", output=None) -> grad_input (N,C,H,W)

Any shape as conv_forward takes it (helpers/ops/shape.py): ``groups``, ``dilation``, ``stride``
per axis, ``padding`` per axis or per side, 1 to 4 spatial axes (input_shape (N,C,*size), weight
(C,K/groups,*kernel)); the any-shape stage runs them, the others refuse them by name.

``output`` is the layer's forward output after its activation; the activation's derivative is
computed from it and fused on the read of grad_output. Kernels of every stage take
``(dy, y, w, dx, N, C, H, W, K, OH, OW, PAD)`` and are built with -DKH, -DKW, -DSTRIDE, -DACT.
"""
from __future__ import annotations

from math import prod

import numpy as np

from . import reference as ref
from ..engine.check import rtol_for_sum, rtol_mma
from .problem import (ACT_CODES, Problem, activation_output, backward_conv_problem, reject_unknown, shape4,
                      shape_requires, tensor)
from .conv_forward import WINOGRAD_TILES, tile_magnitude   # one tile scale for both ops
from .shape import check_grad_output, conv_shape, rank_of, gradient_layer_args

OP = "conv_dgrad"
NAME = "input gradient"  # the name tables and prose give it (helpers/analysis/compare.py)
# the layer sets the benchmark takes (helpers/ops/layers.py: their kind, the small default set)
LAYERS = ("conv", "ci")
ARGS = ("grad_output", "weight", "input_shape", "stride", "padding", "dilation", "groups", "activation", "output")


def stage_requires(stage, p: Problem):
    """None, or why the stage cannot run this shape (problem.shape_requires), before fallbacks."""
    return shape_requires(stage, p)


def prepare(*, grad_output=None, weight=None, input_shape=None, stride=1, padding=0, dilation=1, groups=1,
            activation="none", output=None, **unknown) -> Problem:
    reject_unknown(OP, unknown, ARGS)
    dy = tensor(OP, "grad_output", grad_output)
    w = tensor(OP, "weight", weight)
    if input_shape is None:
        raise TypeError(f"{OP}: argument input_shape (N, C, H, W) is required")
    shape_in = shape4(OP, "input_shape", input_shape, length=None)
    rank = rank_of(OP, [("input_shape", shape_in, "input", "entries"), ("weight", w.shape, "weight", "dimensions"),
                        ("grad_output", dy.shape, "grad_output", "dimensions")], groups)
    dy, w = tensor(OP, "grad_output", dy, rank + 2), tensor(OP, "weight", w, rank + 2)
    shape = conv_shape(OP, shape_in, w.shape, stride=stride, padding=padding, dilation=dilation, groups=groups,
                       k=dy.shape[1])
    check_grad_output(OP, dy.shape, shape, w.shape[1], shape_in)
    act, y = activation_output(OP, activation, output, ACT_CODES, dy)
    if prod(shape_in) > 2**31 - 1:
        raise ValueError(f"{OP}: the input gradient would have {prod(shape_in):,} elements; the "
                         f"kernels index with 32-bit integers")

    return backward_conv_problem(
        OP, {"grad_output": dy, "output": y if y is not None else dy, "weight": w}, {"grad_input": shape_in},
        shape, act, ACT_CODES[act], y is not None,
        "4 bytes · (|grad_output| + |weight| + |grad_input| (+ |output| with an activation))")


def mma_operands(p: Problem) -> tuple:
    """The inputs a TF32 stage rounds before its mma (chapter 13): dy and w. With an activation
    it rounds the fused product dy * act'(y) instead of dy (the tolerance's fused-operand term),
    and y stays float32: only w is rounded in the reference."""
    return ("grad_output", "weight") if p.dims["activation"] == "none" else ("weight",)


def reference(p: Problem):
    d = p.dims
    shape, act = p.outputs["grad_input"], d["activation"]
    geometry = (d["strides"], d["pads"], d["dilation"], d["groups"])
    dy, w, y = p.inputs["grad_output"], p.inputs["weight"], p.inputs["output"]
    expected = ref.conv_dgrad_nd(dy, w, shape, *geometry, act, y)
    # the same sum over absolute values: what the rounding error scales with
    scale = np.abs(dy.astype(np.float64))
    if act != "none":
        scale = scale * np.abs(ref.activation_derivative(act, y))
    magnitude = ref.conv_dgrad_nd(scale, np.abs(w), shape, *geometry)
    if winograd_shaped(d):
        # where the Winograd stages run: dx is a 3x3 stride-1 forward convolution of dy' (padded by
        # 2 - pad) with the transposed, flipped weights, computed tile by tile, so its error scales
        # with the whole tile's magnitudes (helpers/engine/check.py: "Winograd"; conv_forward.py)
        wt = np.abs(w.astype(np.float64)).transpose(1, 0, 2, 3)
        for m in WINOGRAD_TILES:
            magnitude = np.maximum(magnitude, tile_magnitude(scale, wt, 2 - d["pad"], shape[2], shape[3], m))
    return {"grad_input": expected}, {"grad_input": magnitude}


def winograd_shaped(d: dict) -> bool:
    """A plain 2-D 3x3 stride-1 layer with padding 0-2 on every side: the shapes the Winograd
    stages of the input gradient run."""
    return bool(d["plain"] and (d["KH"], d["KW"], d["stride"]) == (3, 3, 1) and 0 <= d["pad"] <= 2)


def terms(p: Problem) -> int:
    """Each input gradient sums K/groups * the kernel's taps products (K*KH*KW in 2-D without
    groups; fewer at borders and strides)."""
    d = p.dims
    return d["K"] // d["groups"] * prod(d["kernel"])


def fused_operand(p: Problem) -> bool:
    """A tensor-core stage rounds dy times the activation's derivative to its operand format."""
    return p.dims["activation"] != "none"


def rtol(p: Problem, mma: str | None = None) -> float:
    """The float32 sum's tolerance; ``mma``: a tensor-core stage's precision (chapter 13)."""
    return rtol_for_sum(terms(p)) if mma is None else rtol_mma(terms(p), mma, fused=fused_operand(p))


def random_problem_args(n, c, h, w, k, kernel=3, stride=1, padding=1, activation="none", seed=0):
    """Random, reproducible arguments for one layer: what tests, notebooks and the benchmark use."""
    rng = np.random.default_rng(seed)
    oh, ow = ref.output_size(h, kernel, stride, padding), ref.output_size(w, kernel, stride, padding)
    args = dict(
        grad_output=rng.standard_normal((n, k, oh, ow), dtype=np.float32),
        weight=(rng.standard_normal((c, k, kernel, kernel), dtype=np.float32) / np.sqrt(c * kernel * kernel)).astype(np.float32),
        input_shape=(n, c, h, w), stride=stride, padding=padding, activation=activation)
    if activation != "none":
        pre = rng.standard_normal((n, k, oh, ow))
        args["output"] = ref.activation(activation, pre).astype(np.float32)
    return args


def layer_args(layer: dict, activation: str = "none", seed: int = 0) -> dict:
    """Arguments for one layer of a set in helpers/ops/layers.py."""
    return gradient_layer_args(OP, random_problem_args, layer, activation, seed)


def vendor_time(problem: Problem, warmup: int, repeats: int, flush_bytes: int, precision: str = "fp32"):
    """cuDNN's input gradient through PyTorch on an NVIDIA GPU, or None: fp32 with TF32 off, or
    the precision of a tensor-core stage (tf32, fp16, bf16)."""
    if not problem.dims["plain"]:       # groups, dilation, 1-D, 3-D, 4-D: PyTorch's own convolution
        from .vendor_nd import vendor_time as any_shape_time
        return any_shape_time(problem, OP, warmup, repeats, flush_bytes)
    from .vendor import cudnn_conv_dgrad
    d = problem.dims
    return cudnn_conv_dgrad(problem.inputs["grad_output"], problem.inputs["weight"],
                            (d["N"], d["C"], d["H"], d["W"]), d["stride"], d["pad"],
                            warmup=warmup, repeats=repeats, flush_bytes=flush_bytes, precision=precision)
