"""Measured copy bandwidth and FMA rate of a device: the roofline every chart uses.

Vendor peak numbers are promises; these are what an OpenCL kernel actually reaches here.
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from .engine.build import build, kernel
from .engine.devices import get_context, get_queue, is_gpu
from .engine.timing import time_enqueue
from .launch import round_up

PEAK_KERNELS = "peak/peak.cl"


def measure_copy(ctx=None, nbytes: int | None = None, repeats: int = 10) -> dict:
    """GB/s of a device-to-device copy kernel, counting bytes read plus bytes written."""
    ctx = get_context(ctx)
    q = get_queue(ctx)
    dev = ctx.devices[0]
    if nbytes is None:
        nbytes = 256 * 2**20 if is_gpu(dev) else 32 * 2**20
    nbytes = min(nbytes, dev.max_mem_alloc_size) // 16 * 16
    n4 = nbytes // 16
    src = cl.Buffer(ctx, cl.mem_flags.READ_ONLY, nbytes)
    dst = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, nbytes)
    cl.enqueue_fill_buffer(q, src, np.float32(1), 0, nbytes)
    k = kernel(build(ctx, PEAK_KERNELS), "copy")
    k.set_args(src, dst, np.int32(n4))
    wg = 256 if is_gpu(dev) else 64
    t = time_enqueue(lambda: [cl.enqueue_nd_range_kernel(q, k, (round_up(n4, wg),), (wg,))], q,
                     warmup=2, repeats=repeats, flush_bytes=0)
    return {"gbps": 2 * nbytes / (t.median_ms * 1e-3) / 1e9, "bytes": nbytes, **t.summary(),
            "formula": "GB/s = 2 x bytes copied / median time"}


def measure_fma(ctx=None, iters: int = 256, chains: int = 8, repeats: int = 10) -> dict:
    """GFLOP/s of independent float4 multiply-add chains (2 FLOPs per lane per fma)."""
    ctx = get_context(ctx)
    q = get_queue(ctx)
    dev = ctx.devices[0]
    gpu = is_gpu(dev)
    wg = 256 if gpu else 64
    items = dev.max_compute_units * wg * 64
    out = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 4 * items)
    k = kernel(build(ctx, PEAK_KERNELS, {"ITERS": iters, "CHAINS": chains}), "fma_rate")
    k.set_args(out, np.float32(0.999), np.float32(0.001))
    t = time_enqueue(lambda: [cl.enqueue_nd_range_kernel(q, k, (items,), (wg,))], q,
                     warmup=2, repeats=repeats, flush_bytes=0)
    flops = 2 * 4 * chains * iters * items
    return {"gflops": flops / (t.median_ms * 1e-3) / 1e9, "flops": flops, **t.summary(),
            "formula": "GFLOP/s = 2 x 4 lanes x chains x iterations x work-items / median time"}


def roofline(ctx=None) -> dict:
    """Both measurements; the ridge point is where a kernel stops being bandwidth-bound."""
    copy, fma = measure_copy(ctx), measure_fma(ctx)
    return {"copy_gbps": copy["gbps"], "fma_gflops": fma["gflops"],
            "ridge_flop_per_byte": fma["gflops"] / copy["gbps"], "copy": copy, "fma": fma}
