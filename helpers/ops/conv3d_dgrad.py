"""Op "conv3d_dgrad": the input gradient of a 3-D convolution (chapter 11's vol2col lowering).

run_stage("conv3d_dgrad", stage, grad_output=(N,K,OD,OH,OW), weight=(C,K,T,R,S), input_shape=(N,C,D,H,W),
          stride=1, padding=0) -> grad_input (N,C,D,H,W)

The same stride and padding on all three axes, no activation. Kernels take
``(dy, w, dx, N, C, D, H, W, K, OD, OH, OW, PAD)`` and are built with -DKT, -DKH, -DKW, -DSTRIDE.
"""
from __future__ import annotations

import numpy as np

from ..engine.check import rtol_for_sum
from .problem import Problem, positive_int, reject_unknown, tensor
from .reference import output_size

OP = "conv3d_dgrad"
NAME = "3-D input gradient"  # the name tables and prose give it (helpers/analysis/compare.py)
# no layer sets: the benchmark does not run this op (helpers/ops/layers.py)
LAYERS = None
ARGS = ("grad_output", "weight", "input_shape", "stride", "padding")


def prepare(**kwargs) -> Problem:
    reject_unknown(OP, kwargs, ARGS)
    dy = tensor(OP, "grad_output", kwargs.get("grad_output"), 5)
    w = tensor(OP, "weight", kwargs.get("weight"), 5)
    shape = kwargs.get("input_shape")
    if shape is None or len(tuple(shape)) != 5 or any(int(v) < 1 for v in shape):
        raise ValueError(f"{OP}: input_shape must be (N, C, D, H, W) of positive sizes, got {shape}")
    n, c, d, h, wd = (int(v) for v in shape)
    stride = positive_int(OP, "stride", kwargs.get("stride", 1))
    pad = positive_int(OP, "padding", kwargs.get("padding", 0), minimum=0)
    cw, k, kt, kh, kw = w.shape
    if cw != c:
        raise ValueError(f"{OP}: weight must be (C, K, T, R, S) with C = {c} input channels, got {w.shape}")
    if min(d + 2 * pad - kt, h + 2 * pad - kh, wd + 2 * pad - kw) < 0:
        raise ValueError(f"{OP}: a {kt}x{kh}x{kw} filter does not fit the padded input {(d, h, wd)} "
                         f"with padding {pad}")
    od, oh, ow = (output_size(v, kk, stride, pad) for v, kk in ((d, kt), (h, kh), (wd, kw)))
    if dy.shape != (n, k, od, oh, ow):
        raise ValueError(f"{OP}: grad_output must have shape (N, K, OD, OH, OW) = {(n, k, od, oh, ow)}, "
                         f"got {dy.shape}")
    return Problem(
        op=OP, inputs={"grad_output": dy, "weight": w}, outputs={"grad_input": (n, c, d, h, wd)},
        scalars={"N": n, "C": c, "D": d, "H": h, "W": wd, "K": k, "OD": od, "OH": oh, "OW": ow, "PAD": pad},
        defines={"KT": kt, "KH": kh, "KW": kw, "STRIDE": stride},
        dims={"N": n, "C": c, "D": d, "H": h, "W": wd, "K": k, "OD": od, "OH": oh, "OW": ow,
              "KT": kt, "KH": kh, "KW": kw, "stride": stride, "pad": pad},
        flops=2 * n * k * od * oh * ow * c * kt * kh * kw,
        min_bytes=4 * (dy.size + w.size + n * c * d * h * wd),
        flops_formula="2·N·K·OD·OH·OW·C·T·R·S", bytes_formula="4 bytes · (|grad_output| + |weight| + |grad_input|)",
        label=f"N{n} C{c} {d}x{h}x{wd} K{k} {kt}x{kh}x{kw} s{stride} p{pad}",
    )


def conv3d_dgrad(dy: np.ndarray, w: np.ndarray, shape, stride: int, pad: int) -> np.ndarray:
    """Readable reference: every tap (t, r, s) adds w[:, :, t, r, s]^T . dy at the inputs it read."""
    n, c, d, h, wd = shape
    _, k, od, oh, ow = dy.shape
    kt, kh, kw = w.shape[2:]
    dxp = np.zeros((n, c, d + 2 * pad + stride, h + 2 * pad + stride, wd + 2 * pad + stride))
    dy64, w64 = dy.astype(np.float64), w.astype(np.float64)
    for t in range(kt):
        for r in range(kh):
            for s in range(kw):
                dxp[:, :, t:t + stride * od:stride, r:r + stride * oh:stride, s:s + stride * ow:stride] += \
                    np.einsum("nkzyx,ck->nczyx", dy64, w64[:, :, t, r, s])
    return dxp[:, :, pad:pad + d, pad:pad + h, pad:pad + wd]


def reference(p: Problem):
    q = p.dims
    shape = (q["N"], q["C"], q["D"], q["H"], q["W"])
    dy, w = p.inputs["grad_output"], p.inputs["weight"]
    return ({"grad_input": conv3d_dgrad(dy, w, shape, q["stride"], q["pad"])},
            {"grad_input": conv3d_dgrad(np.abs(dy), np.abs(w), shape, q["stride"], q["pad"])})


def terms(p: Problem) -> int:
    """Each input gradient sums K*KT*KH*KW products."""
    q = p.dims
    return q["K"] * q["KT"] * q["KH"] * q["KW"]


def rtol(p: Problem) -> float:
    return rtol_for_sum(terms(p))


def random_problem_args(n, c, d, h, w, k, kernel=3, stride=1, padding=1, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    od, oh, ow = (output_size(v, kernel, stride, padding) for v in (d, h, w))
    return dict(grad_output=rng.standard_normal((n, k, od, oh, ow), dtype=np.float32),
                weight=rng.standard_normal((c, k, kernel, kernel, kernel), dtype=np.float32),
                input_shape=(n, c, d, h, w), stride=stride, padding=padding)


def layer_args(layer: dict, activation: str = "none", seed: int = 0) -> dict:
    return random_problem_args(layer["n"], layer["c"], layer["d"], layer["h"], layer["w"], layer["k"],
                               layer["kernel"], layer["stride"], layer["padding"], seed)
