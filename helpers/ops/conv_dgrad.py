"""Op "conv_dgrad": the gradient of a convolution layer with respect to its input.

run_stage("conv_dgrad", stage, grad_output=(N,K,OH,OW), weight=(C,K,R,S) IOHW, input_shape=(N,C,H,W),
          stride=1, padding=0, activation="none", output=None) -> grad_input (N,C,H,W)

``output`` is the layer's forward output after its activation; the activation's derivative is
computed from it and fused on the read of grad_output. Kernels of every stage take
``(dy, y, w, dx, N, C, H, W, K, OH, OW, PAD)`` and are built with -DKH, -DKW, -DSTRIDE, -DACT.
"""
from __future__ import annotations

import numpy as np

from . import reference as ref
from ..engine.check import rtol_for_sum, rtol_mma
from .problem import (ACT_CODES, Problem, activation_output, backward_conv_problem, conv_geometry, positive_int,
                      reject_unknown, shape4, tensor)

OP = "conv_dgrad"
# the layer sets the benchmark takes (helpers/ops/layers.py: their kind, the small default set)
LAYERS = ("conv", "ci")
ARGS = ("grad_output", "weight", "input_shape", "stride", "padding", "activation", "output")


def prepare(**kwargs) -> Problem:
    reject_unknown(OP, kwargs, ARGS)
    dy = tensor(OP, "grad_output", kwargs.get("grad_output"), 4)
    w = tensor(OP, "weight", kwargs.get("weight"), 4)
    if kwargs.get("input_shape") is None:
        raise TypeError(f"{OP}: argument input_shape (N, C, H, W) is required")
    n, c, h, wd = shape4(OP, "input_shape", kwargs["input_shape"])
    stride = positive_int(OP, "stride", kwargs.get("stride", 1))
    pad = positive_int(OP, "padding", kwargs.get("padding", 0), minimum=0)

    k, kh, kw, oh, ow = conv_geometry(OP, w, c, h, wd, stride, pad)
    if dy.shape != (n, k, oh, ow):
        raise ValueError(f"{OP}: grad_output must have shape (N, K, OH, OW) = {(n, k, oh, ow)} for "
                         f"input {(n, c, h, wd)}, a {kh}x{kw} kernel, stride {stride}, padding {pad}; "
                         f"got {dy.shape}")
    act, y = activation_output(OP, kwargs, ACT_CODES, dy)
    if n * c * h * wd > 2**31 - 1:
        raise ValueError(f"{OP}: the input gradient would have {n * c * h * wd:,} elements; the "
                         f"kernels index with 32-bit integers")

    return backward_conv_problem(
        OP, {"grad_output": dy, "output": y if y is not None else dy, "weight": w}, {"grad_input": (n, c, h, wd)},
        (n, c, h, wd, k, kh, kw, oh, ow, stride, pad), act, ACT_CODES[act], y is not None,
        "4 bytes · (|grad_output| + |weight| + |grad_input| (+ |output| with an activation))")


def mma_operands(p: Problem) -> tuple:
    """The inputs a TF32 stage rounds before its mma (chapter 13): dy and w. With an activation
    it rounds the fused product dy * act'(y) instead of dy (the tolerance's fused-operand term),
    and y stays float32: only w is rounded in the reference."""
    return ("grad_output", "weight") if p.dims["activation"] == "none" else ("weight",)


def _dims(p: Problem):
    d = p.dims
    return (d["N"], d["C"], d["H"], d["W"]), d["stride"], d["pad"], d["activation"]


def reference(p: Problem):
    shape, stride, pad, act = _dims(p)
    dy, w, y = p.inputs["grad_output"], p.inputs["weight"], p.inputs["output"]
    expected = ref.conv2d_dgrad(dy, w, shape, stride, pad, act, y)
    # the same sum over absolute values: what the rounding error scales with
    scale = np.abs(dy.astype(np.float64))
    if act != "none":
        scale = scale * np.abs(ref.activation_derivative(act, y))
    magnitude = ref.conv2d_dgrad(scale, np.abs(w), shape, stride, pad)
    return {"grad_input": expected}, {"grad_input": magnitude}


def rtol(p: Problem, mma: str | None = None) -> float:
    """The float32 sum's tolerance; ``mma``: a tensor-core stage's precision (chapter 13)."""
    d = p.dims
    n = d["K"] * d["KH"] * d["KW"]
    return rtol_for_sum(n) if mma is None else rtol_mma(n, mma, fused=d["activation"] != "none")


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
    return random_problem_args(layer["n"], layer["c"], layer["h"], layer["w"], layer["k"], layer["kernel"],
                               layer["stride"], layer["padding"], activation, seed)


def vendor_time(problem: Problem, warmup: int, repeats: int, flush_bytes: int, precision: str = "fp32"):
    """cuDNN's input gradient through PyTorch on an NVIDIA GPU, or None: fp32 with TF32 off, or
    the precision of a tensor-core stage (tf32, fp16, bf16)."""
    from .vendor import cudnn_conv_dgrad
    d = problem.dims
    return cudnn_conv_dgrad(problem.inputs["grad_output"], problem.inputs["weight"],
                            (d["N"], d["C"], d["H"], d["W"]), d["stride"], d["pad"],
                            warmup=warmup, repeats=repeats, flush_bytes=flush_bytes, precision=precision)
