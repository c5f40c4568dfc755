"""Vendor-library reference timings through PyTorch, where PyTorch with CUDA is installed.

Measured as fairly as our kernels: fp32 with TF32 off, cuDNN's autotuner allowed to choose its
fastest algorithm during the (excluded) warm-up calls, each repetition's kernels timed on the
device (no launch overhead, as with our profiling events), the L2 cache overwritten between
repetitions, median and spread reported.
"""
from __future__ import annotations

import numpy as np


def torch_cuda():
    """The torch module if it can run on an NVIDIA GPU here, else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def fp32_torch():
    """torch set up for fair fp32 comparisons (TF32 off, cuDNN's autotuner on), or None."""
    torch = torch_cuda()
    if torch is not None:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    return torch


def time_cuda(fn, warmup: int, repeats: int, flush_bytes: int) -> dict:
    """Device time of ``fn``'s kernels per call, as our kernels are timed.

    Our kernels are timed from the start of their first kernel to the end of their last
    (OpenCL profiling events), with no launch overhead. The same is done here with PyTorch's
    profiler (CUPTI kernel records): per call, first kernel start to last kernel end. A cache
    flush (an elementwise negation) separates the calls and marks where one call's kernels begin.

    The two timers do not share a floor: an empty kernel measures 2.72 us by OpenCL profiling
    events and 0.83 us by CUPTI on the H200 (helpers/timer_floor.py). So each call is timed a second
    time with CUDA events recorded around it after the flush (``events_*``), the timer whose floor
    matches OpenCL's (2.72 us). The flush runs while the host enqueues the call, so the host's
    launch time is not in it unless the call's host work outlasts the flush, which it can on
    layers of a few microseconds (chapter 14: 33.5 us by events for a kernel CUPTI times at 8.5).

    Where a call is several kernels with host work between them (autograd's batch norm backward),
    both times above hold that host work; ``kernels_*`` is the sum of the call's kernel durations
    (CUPTI), its device work without the gaps.
    """
    torch = torch_cuda()
    from torch.profiler import ProfilerActivity, profile
    flush = torch.empty(max(flush_bytes, 4) // 4, dtype=torch.float32, device="cuda")
    for _ in range(warmup):             # cuDNN's first calls (algorithm search) are excluded here
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            flush.neg_()
            fn()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type.name == "CUDA"),
                     key=lambda e: e.time_range.start)
    calls, current = [], None
    for e in kernels:
        if "neg_kernel" in e.name:      # the flush: a kernel no convolution launches
            current = []
            calls.append(current)
        elif current is not None:
            current.append(e)
    calls = [c for c in calls if c]
    if len(calls) != repeats:
        raise RuntimeError(f"profiler grouping found {len(calls)} calls, expected {repeats}")
    times = [(c[-1].time_range.end - c[0].time_range.start) / 1e3 for c in calls]
    t = np.array(times)
    busy = np.array([sum(e.time_range.end - e.time_range.start for e in c) / 1e3 for c in calls])
    marks = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for start, end in marks:
        flush.neg_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    ev = np.array([start.elapsed_time(end) for start, end in marks])
    return {"median_ms": float(np.median(t)), "q1_ms": float(np.percentile(t, 25)),
            "q3_ms": float(np.percentile(t, 75)), "min_ms": float(t.min()), "max_ms": float(t.max()),
            "repeats": repeats, "times_ms": times, "kernels_per_call": len(calls[0]),
            "kernel_names": sorted({e.name[:120] for e in calls[0]}),
            "method": "PyTorch profiler (CUPTI): first kernel start to last kernel end, per call",
            "events_median_ms": float(np.median(ev)), "events_q1_ms": float(np.percentile(ev, 25)),
            "events_q3_ms": float(np.percentile(ev, 75)), "events_times_ms": ev.tolist(),
            "events_method": "CUDA events recorded around each call, after the flush",
            "kernels_median_ms": float(np.median(busy)), "kernels_q1_ms": float(np.percentile(busy, 25)),
            "kernels_q3_ms": float(np.percentile(busy, 75)),
            "kernels_method": "PyTorch profiler (CUPTI): the sum of the call's kernel durations, per call"}


def versions() -> dict:
    torch = torch_cuda()
    if torch is None:
        return {}
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": str(torch.backends.cudnn.version()), "gpu": torch.cuda.get_device_name(0)}


# cuDNN in the precision of the stage it is compared with (chapter 13): TF32 allowed for tf32,
# fp16 or bf16 tensors for the 16-bit stages (fp32 accumulation is cuDNN's choice there).
CUDNN_PRECISIONS = {"fp32": "fp32 (TF32 off)", "tf32": "TF32 (fp32 tensors, allow_tf32 on)",
                    "fp16": "fp16 tensors", "bf16": "bf16 tensors"}


def cudnn_conv_dgrad(grad_output, weight_iohw, input_shape, stride, padding, *, warmup=5, repeats=20,
                     flush_bytes=256 * 2**20, precision: str = "fp32"):
    """Median time of cuDNN's input gradient for this layer in ``precision``, or None without CUDA."""
    if precision not in CUDNN_PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; cuDNN is timed in {', '.join(CUDNN_PRECISIONS)}")
    torch = fp32_torch()
    if torch is None:
        return None
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
    dy = torch.from_numpy(grad_output).cuda().to(dtype)
    w = torch.from_numpy(np.ascontiguousarray(weight_iohw.transpose(1, 0, 2, 3))).cuda().to(dtype)  # IOHW -> OIHW
    try:
        out = time_cuda(lambda: torch.nn.grad.conv2d_input(input_shape, w, dy, stride=stride, padding=padding),
                        warmup, repeats, flush_bytes)
    finally:
        torch.backends.cudnn.allow_tf32 = False
    out["name"] = "cuDNN"
    out["precision"] = precision
    out["library"] = f"cuDNN {CUDNN_PRECISIONS[precision]} via torch.nn.grad.conv2d_input"
    return out


def cudnn_conv_forward(x, weight_iohw, stride, padding, *, warmup=5, repeats=20, flush_bytes=256 * 2**20,
                       precision: str = "fp32", bias=None, activation: str = "none"):
    """Median time of cuDNN's forward convolution for this layer in ``precision`` (with the bias
    and activation, as PyTorch runs them: every kernel of the call is timed), or None without CUDA."""
    if precision not in CUDNN_PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; cuDNN is timed in {', '.join(CUDNN_PRECISIONS)}")
    torch = fp32_torch()
    if torch is None:
        return None
    acts = {"none": lambda t: t, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
    xt = torch.from_numpy(x).cuda().to(dtype)
    w = torch.from_numpy(np.ascontiguousarray(weight_iohw.transpose(1, 0, 2, 3))).cuda().to(dtype)  # IOHW -> OIHW
    b = None if bias is None else torch.from_numpy(bias).cuda().to(dtype)
    act = acts[activation]
    try:
        out = time_cuda(lambda: act(torch.nn.functional.conv2d(xt, w, b, stride=stride, padding=padding)),
                        warmup, repeats, flush_bytes)
    finally:
        torch.backends.cudnn.allow_tf32 = False
    epilogue = " + bias" * (bias is not None) + (f", then {activation}" if activation != "none" else "")
    out["name"] = "cuDNN"
    out["precision"] = precision
    out["library"] = f"cuDNN {CUDNN_PRECISIONS[precision]} via torch.nn.functional.conv2d{epilogue}"
    return out


def cudnn_conv_wgrad(x, grad_output, weight_shape_iohw, stride, padding, *, warmup=5, repeats=20,
                     flush_bytes=256 * 2**20):
    """Median time of cuDNN's fp32 weight gradient for this layer, or None without CUDA."""
    torch = fp32_torch()
    if torch is None:
        return None
    xt = torch.from_numpy(x).cuda()
    dy = torch.from_numpy(grad_output).cuda()
    c, k, kh, kw = weight_shape_iohw
    out = time_cuda(lambda: torch.nn.grad.conv2d_weight(xt, (k, c, kh, kw), dy, stride=stride, padding=padding),
                    warmup, repeats, flush_bytes)       # PyTorch's weights are OIHW: (K, C, R, S)
    out["name"] = "cuDNN"
    out["library"] = "cuDNN fp32 (TF32 off) via torch.nn.grad.conv2d_weight"
    return out
