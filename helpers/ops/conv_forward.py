"""Op "conv_forward": the forward pass of a convolution layer (no bias, no activation).

run_stage("conv_forward", stage, input=(N,C,H,W), weight=(C,K,R,S) IOHW, stride=1, padding=0)
    -> output (N,K,OH,OW)

Single-kernel stages take ``(x, w, y, N, C, H, W, K, OH, OW, PAD)`` and are built with -DKH,
-DKW, -DSTRIDE. The Winograd stages (chapter 12) are several kernels each; their launches are
described in helpers/stages.py (steps=).
"""
from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..check import rtol_for_sum
from ..problem import Problem, positive_int, reject_unknown, tensor

OP = "conv_forward"
ARGS = ("input", "weight", "stride", "padding")

# Winograd's extra rounding, measured in chapter 12 (notebooks/12_winograd.ipynb, "How exact is
# it?") against the float64 reference, as a multiple of the direct kernel's error on the same
# tolerance scale: F(2x2,3x3) in float32 stays within about 2-3x of direct (its input transform
# adds up to 4 inputs with coefficients +-1, its filter transform scales by 1/2 and 1/4, its
# output transform adds up to 9 products), over channel counts from 1 to 512. The tolerance
# grants 4x on top of direct's, so a dropped or doubled term (an error of about 1/(C*9) of the
# magnitude) still fails for every C the tests use; F(4x4,3x3) would need far more (see chapter).
WINOGRAD_ERROR_FACTOR = 4.0


def prepare(**kwargs) -> Problem:
    reject_unknown(OP, kwargs, ARGS)
    x = tensor(OP, "input", kwargs.get("input"), 4)
    w = tensor(OP, "weight", kwargs.get("weight"), 4)
    stride = positive_int(OP, "stride", kwargs.get("stride", 1))
    pad = positive_int(OP, "padding", kwargs.get("padding", 0), minimum=0)
    n, c, h, wd = x.shape
    wc, k, kh, kw = w.shape
    if wc != c:
        raise ValueError(f"{OP}: weight is IOHW (C_in, C_out, R, S) = {w.shape}, so its first "
                         f"dimension must equal the input's channels C = {c}")
    if kh > h + 2 * pad or kw > wd + 2 * pad:
        raise ValueError(f"{OP}: a {kh}x{kw} kernel does not fit in the padded {h}x{wd} input "
                         f"(padding {pad})")
    oh, ow = ref.output_size(h, kh, stride, pad), ref.output_size(wd, kw, stride, pad)
    if n * k * oh * ow > 2**31 - 1:
        raise ValueError(f"{OP}: the output would have {n * k * oh * ow:,} elements; the kernels "
                         f"index with 32-bit integers")
    return Problem(
        op=OP,
        inputs={"input": x, "weight": w},
        outputs={"output": (n, k, oh, ow)},
        scalars={"N": n, "C": c, "H": h, "W": wd, "K": k, "OH": oh, "OW": ow, "PAD": pad},
        defines={"KH": kh, "KW": kw, "STRIDE": stride},
        dims={"N": n, "C": c, "H": h, "W": wd, "K": k, "OH": oh, "OW": ow, "KH": kh, "KW": kw,
              "stride": stride, "pad": pad},
        flops=2 * n * k * oh * ow * c * kh * kw,
        min_bytes=4 * (x.size + w.size + n * k * oh * ow),
        flops_formula="2·N·K·OH·OW·C·R·S (the direct convolution's multiply-adds, whatever the algorithm)",
        bytes_formula="4 bytes · (|input| + |weight| + |output|)",
        label=f"N{n} C{c} {h}x{wd} K{k} {kh}x{kw} s{stride} p{pad}",
    )


def reference(p: Problem):
    d = p.dims
    x, w = p.inputs["input"], p.inputs["weight"]
    expected = ref.conv2d_forward(x, w, d["stride"], d["pad"])
    magnitude = ref.conv2d_forward(np.abs(x), np.abs(w), d["stride"], d["pad"])
    return {"output": expected}, {"output": magnitude}


def rtol(p: Problem) -> float:
    """One tolerance for every stage of the op, so it must hold Winograd's error (see above)."""
    d = p.dims
    return WINOGRAD_ERROR_FACTOR * rtol_for_sum(d["C"] * d["KH"] * d["KW"])


def random_problem_args(n, c, h, w, k, kernel=3, stride=1, padding=1, seed=0):
    """Random, reproducible arguments for one layer (tests, notebooks, the benchmark)."""
    rng = np.random.default_rng(seed)
    return dict(input=rng.standard_normal((n, c, h, w), dtype=np.float32),
                weight=(rng.standard_normal((c, k, kernel, kernel), dtype=np.float32)
                        / np.float32(np.sqrt(c * kernel * kernel))).astype(np.float32),
                stride=stride, padding=padding)


def layer_args(layer: dict, activation: str = "none", seed: int = 0) -> dict:
    """Arguments for one layer of a set in helpers/layers.py (the forward pass has no activation)."""
    if activation != "none":
        raise ValueError(f"{OP} has no activation (got {activation!r}); benchmark it with --activation none")
    return random_problem_args(layer["n"], layer["c"], layer["h"], layer["w"], layer["k"], layer["kernel"],
                               layer["stride"], layer["padding"], seed)


def vendor_time(problem: Problem, warmup: int, repeats: int, flush_bytes: int):
    """cuDNN's fp32 forward convolution (TF32 off) through PyTorch on an NVIDIA GPU, or None."""
    from ..vendor import cudnn_conv_forward
    d = problem.dims
    return cudnn_conv_forward(problem.inputs["input"], problem.inputs["weight"], d["stride"], d["pad"],
                              warmup=warmup, repeats=repeats, flush_bytes=flush_bytes)
