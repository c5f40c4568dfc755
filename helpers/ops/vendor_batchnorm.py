"""PyTorch's batch norm on an NVIDIA GPU: the reference timings of chapter 14.

Timed exactly as helpers/ops/vendor.py times cuDNN (the device time of each call's kernels, warm-up
excluded, the L2 cache overwritten between repetitions, median and spread). Forward: one call of
torch.nn.functional.batch_norm in the same mode as the problem (training with the momentum
update of the running statistics, or inference). Backward: the gradients of x, gamma and beta
through autograd, which runs PyTorch's batch-norm backward kernel(s) and, with activation
'relu', the ReLU's own backward kernel first (PyTorch does not fuse it).
"""
from __future__ import annotations

from .vendor import fp32_torch, time_cuda


def torch_batchnorm_forward(problem, *, warmup=5, repeats=20, flush_bytes=256 * 2**20):
    torch = fp32_torch()
    if torch is None:
        return None
    a, d = problem.inputs, problem.dims
    F = torch.nn.functional
    x, g, b = (torch.from_numpy(a[k]).cuda() for k in ("x", "gamma", "beta"))
    if d["training"]:
        rm = torch.from_numpy(a["running_mean"].copy()).cuda() if d["update"] else None
        rv = torch.from_numpy(a["running_var"].copy()).cuda() if d["update"] else None
        fn = lambda: F.batch_norm(x, rm, rv, g, b, training=True, momentum=d["momentum"], eps=d["eps"])
    else:
        rm, rv = torch.from_numpy(a["running_mean"]).cuda(), torch.from_numpy(a["running_var"]).cuda()
        fn = lambda: F.batch_norm(x, rm, rv, g, b, training=False, eps=d["eps"])
    with torch.no_grad():
        out = time_cuda(fn, warmup, repeats, flush_bytes)
    out["name"] = "PyTorch"
    out["library"] = (f"torch {torch.__version__} torch.nn.functional.batch_norm fp32 "
                      f"({'training' if d['training'] else 'inference'})")
    return out


def torch_batchnorm_backward(problem, *, warmup=5, repeats=20, flush_bytes=256 * 2**20):
    torch = fp32_torch()
    if torch is None:
        return None
    a, d = problem.inputs, problem.dims
    x = torch.from_numpy(a["x"]).cuda().requires_grad_(True)
    g = torch.from_numpy(a["gamma"]).cuda().requires_grad_(True)
    b = torch.zeros_like(g).requires_grad_(True)
    dy = torch.from_numpy(a["grad_output"]).cuda()
    y = torch.nn.functional.batch_norm(x, None, None, g, b, training=True, eps=1e-5)
    if d["activation"] == "relu":
        y = torch.relu(y)
    fn = lambda: torch.autograd.grad(y, (x, g, b), dy, retain_graph=True)
    out = time_cuda(fn, warmup, repeats, flush_bytes)
    out["name"] = "PyTorch"
    out["library"] = (f"torch {torch.__version__} autograd of torch.nn.functional.batch_norm fp32"
                      + (" + relu" if d["activation"] == "relu" else ""))
    return out
