"""PyTorch's own convolutions of any shape: the vendor beside the any-shape stages (chapter 16).

1-D to 3-D: torch.nn.functional.conv1d/2d/3d with the layer's groups, dilation, stride and
padding, and PyTorch's backward of it for the gradients (torch.nn.grad.conv*_input and
conv*_weight, the convolution_backward autograd runs), whatever PyTorch dispatches it to: cuDNN,
or its own depthwise kernels. 4-D, which PyTorch has no convolution for: the recursion over
conv3d, a 4-D convolution as a sum over the first kernel axis of 3-D convolutions (the float64
reference computes it the same way: helpers/ops/reference.py), each tap's slices of the first axis
moved into the batch so that one conv3d call serves them all; the whole sum, the slicing and
copies included, is timed as one call.

Timed as vendor.py times cuDNN (fp32, TF32 off, cuDNN's autotuner on, CUPTI kernel records,
the L2 cache overwritten between calls). The computations take and return torch tensors on any
device, so the tests check them on the CPU against the references.
"""
from __future__ import annotations

import numpy as np

from .reference import first_axis_windows, into_batch
from .vendor import fp32_torch, time_cuda


def torch_weight(w):
    """Ours (C, K/G, *kernel) -> PyTorch's (K, C/G, *kernel), given the groups by the caller's
    reshape: ``w`` is (G, C/G, K/G, *kernel)."""
    g, cg, kg = w.shape[:3]
    return w.transpose(1, 2).reshape(g * kg, cg, *w.shape[3:])


def _conv(torch, rank: int):
    f = torch.nn.functional
    return (f.conv1d, f.conv2d, f.conv3d)[rank - 1]


def _grad(torch, rank: int, which: str):
    return getattr(torch.nn.grad, f"conv{rank}d_{which}")


def _pad_first(torch, t, pair):
    return torch.nn.functional.pad(t, (0, 0) * (t.dim() - 3) + tuple(pair)) if any(pair) else t


def forward(torch, x, w, stride, padding, dilation, groups, bias=None):
    """y = conv(x, w) (+ bias): x (N, C, *size), w PyTorch's (K, C/G, *kernel); ``padding`` one
    integer per axis (the same on both sides)."""
    rank = x.dim() - 2
    if rank <= 3:
        return _conv(torch, rank)(x, w, bias, stride, padding, dilation, groups)
    xp = _pad_first(torch, x, (padding[0], padding[0]))
    out = (xp.shape[2] - dilation[0] * (w.shape[2] - 1) - 1) // stride[0] + 1
    y = None
    for q, window in first_axis_windows(w.shape[2], out, stride[0], dilation[0]):
        yq = forward(torch, into_batch(xp[:, :, window]), w[:, :, q], stride[1:], padding[1:], dilation[1:], groups)
        y = yq if y is None else y.add_(yq)
    y = y.reshape(x.shape[0], out, *y.shape[1:]).transpose(1, 2)
    if bias is not None:
        y = y + bias.reshape(1, -1, *(1,) * rank)
    return y.contiguous()


def dgrad(torch, dy, w, input_shape, stride, padding, dilation, groups):
    """The input gradient (N, C, *size) of ``forward``, from dy (N, K, *out)."""
    rank = dy.dim() - 2
    if rank <= 3:
        return _grad(torch, rank, "input")(tuple(input_shape), w, dy, stride, padding, dilation, groups)
    n, c, a = input_shape[:3]
    p = padding[0]
    dyb = into_batch(dy)
    dxp = dy.new_zeros((n, a + 2 * p, c, *input_shape[3:]))
    batch = (n * dy.shape[2], c, *input_shape[3:])
    for q, window in first_axis_windows(w.shape[2], dy.shape[2], stride[0], dilation[0]):
        g = dgrad(torch, dyb, w[:, :, q], batch, stride[1:], padding[1:], dilation[1:], groups)
        dxp[:, window] += g.reshape(n, dy.shape[2], *g.shape[1:])
    return dxp[:, p:p + a].transpose(1, 2).contiguous()


def wgrad(torch, x, dy, weight_shape, stride, padding, dilation, groups):
    """The weight gradient, PyTorch's (K, C/G, *kernel), of ``forward``."""
    rank = x.dim() - 2
    if rank <= 3:
        return _grad(torch, rank, "weight")(x, tuple(weight_shape), dy, stride, padding, dilation, groups)
    xp, dyb = _pad_first(torch, x, (padding[0], padding[0])), into_batch(dy)
    inner = (*weight_shape[:2], *weight_shape[3:])
    return torch.stack([wgrad(torch, into_batch(xp[:, :, window]), dyb, inner, stride[1:], padding[1:],
                              dilation[1:], groups)
                        for _, window in first_axis_windows(weight_shape[2], dy.shape[2], stride[0], dilation[0])], dim=2)


def method(rank: int, op: str) -> str:
    """What the vendor row ran, in words."""
    call = {"conv_forward": "torch.nn.functional.conv{}d", "conv_dgrad": "torch.nn.grad.conv{}d_input",
            "conv_wgrad": "torch.nn.grad.conv{}d_weight"}[op]
    if rank == 4:
        return f"the recursion over conv3d: one {call.format(3)} call per tap of the first kernel axis, summed"
    return call.format(rank) + ("" if op == "conv_forward" else " (PyTorch's backward)")


def dispatched(kernel_names) -> str:
    """Whose kernels a call ran, from their names: cuDNN's, PyTorch's own depthwise ones, or both."""
    names = " ".join(kernel_names).lower()
    ours = "depthwise" in names and "cudnn" not in names
    cudnn = any(m in names for m in ("cudnn", "xmma", "implicit_convolve", "cutlass", "fft", "winograd", "sm80_",
                                     "sm90_", "gemm"))
    return "cuDNN" if cudnn and not ours else "PyTorch's own kernels" if ours and not cudnn else \
        "cuDNN and PyTorch's own kernels" if ours else "PyTorch (no cuDNN kernel named)"


def vendor_time(problem, op: str, warmup: int, repeats: int, flush_bytes: int):
    """PyTorch's time for the problem's convolution (fp32, TF32 off), or None without CUDA or
    where a padding differs between the two sides of an axis (PyTorch pads both alike)."""
    torch = fp32_torch()
    d = problem.dims
    if torch is None or any(b != e for b, e in d["pads"]):
        return None
    geometry = (d["strides"], tuple(b for b, _ in d["pads"]), d["dilation"], d["groups"])
    g = d["groups"]
    cuda = lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()
    rank, inputs = d["rank"], problem.inputs
    if op == "conv_dgrad":
        w = inputs["weight"]
        wt = torch_weight(cuda(w).reshape(g, w.shape[0] // g, *w.shape[1:]))
        dy = cuda(inputs["grad_output"])
        shape = problem.outputs["grad_input"]
        fn = lambda: dgrad(torch, dy, wt, shape, *geometry)
    elif op == "conv_wgrad":
        x, dy = cuda(inputs["input"]), cuda(inputs["grad_output"])
        c, kg, *kernel = problem.outputs["grad_weight"]
        shape = (kg * g, c // g, *kernel)
        fn = lambda: wgrad(torch, x, dy, shape, *geometry)
    else:
        w = inputs["weight"]
        wt = torch_weight(cuda(w).reshape(g, w.shape[0] // g, *w.shape[1:]))
        x = cuda(inputs["input"])
        b = cuda(inputs["bias"]) if d["bias"] else None
        act = {"none": lambda t: t, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}[d["activation"]]
        fn = lambda: act(forward(torch, x, wt, *geometry, bias=b))
    out = time_cuda(fn, warmup, repeats, flush_bytes)
    out["name"] = "PyTorch conv3d recursion" if rank == 4 else "PyTorch"
    out["precision"] = "fp32"
    out["dispatched"] = dispatched(out["kernel_names"])
    out["library"] = f"PyTorch fp32 (TF32 off), {method(rank, op)}: {out['dispatched']}"
    return out
