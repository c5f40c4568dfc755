"""What each timer says of a kernel that does nothing: the floor under every time the course records.

    python -m helpers.timer_floor --device nvidia  # records results/engine/timer_floor_<device>.json

The course times OpenCL stages with profiling events (first kernel's start to last kernel's end),
CUDA stages with CUDA events around the launches, and the vendor libraries with PyTorch's profiler
(CUPTI kernel records). On a kernel of a few microseconds the timers' own floors differ by as much
as the kernels do, so small layers are read against these numbers: an empty kernel of one work-group
(and of one per compute unit) under each timer, with the same warm-up, cache flush and repeats.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys

import numpy as np
import pyopencl as cl

from .analysis import names
from .engine.backends import cuda_missing
from .engine.devices import NoDeviceError, device_info, get_context
from .engine.timing import time_enqueue
from .ops.vendor import time_cuda, torch_cuda

EMPTY_CL = "__kernel void empty(__global float* a) { if (get_global_id(0) == 0x7fffffff) a[0] = 1.0f; }"
EMPTY_CU = 'extern "C" __global__ void empty(float* a) { if (blockIdx.x * blockDim.x + threadIdx.x == 0x7fffffff) a[0] = 1.0f; }'


def _summary(times) -> dict:
    t = np.asarray(times, dtype=float)
    return {"median_us": float(1e3 * np.median(t)), "q1_us": float(1e3 * np.percentile(t, 25)),
            "q3_us": float(1e3 * np.percentile(t, 75)), "min_us": float(1e3 * t.min()), "repeats": int(t.size)}


def opencl_floor(ctx, groups: int, repeats: int = 50) -> dict:
    """An empty OpenCL kernel of ``groups`` work-groups of 256, timed as every OpenCL stage is."""
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    k = cl.Program(ctx, EMPTY_CL).build().empty
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4)
    return _summary(time_enqueue(lambda: [k(queue, (256 * groups,), (256,), buf)], queue, repeats=repeats).times_ms)


def cuda_floor(groups: int, repeats: int = 50) -> dict:
    """An empty CUDA kernel of ``groups`` blocks of 256, timed as every CUDA stage is (CUDA events)."""
    import cupy
    from .engine.backends.cuda import time_launches
    k = cupy.RawKernel(EMPTY_CU, "empty")
    buf = cupy.zeros(1, dtype=cupy.float32)
    return _summary(time_launches([lambda: k((groups,), (256,), (buf,))], repeats=repeats))


def cupti_floor(repeats: int = 50) -> dict:
    """A one-element PyTorch operation (one kernel), timed as the vendor libraries are (CUPTI)."""
    x = torch_cuda().zeros(1, device="cuda")
    t = time_cuda(lambda: x.add_(1.0), warmup=5, repeats=repeats, flush_bytes=4)
    return _summary(t["times_ms"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.timer_floor", description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="nvidia", help="the OpenCL device ('nvidia', 'cpu', or part of a name)")
    a = ap.parse_args(argv)
    try:
        ctx = get_context(a.device)
    except NoDeviceError as err:
        print(f"error: {err} (the floor is measured on an NVIDIA GPU by default: --device cpu measures "
              f"this machine's OpenCL CPU instead)", file=sys.stderr)
        return 2
    info = device_info(ctx)
    units = ctx.devices[0].max_compute_units
    rows = [{"timer": "OpenCL profiling events", "kernel": "empty, 1 work-group", **opencl_floor(ctx, 1)},
            {"timer": "OpenCL profiling events", "kernel": f"empty, {units} work-groups", **opencl_floor(ctx, units)}]
    missing = cuda_missing()
    if missing:
        print(f"CUDA events skipped: {missing}")
    else:
        rows += [{"timer": "CUDA events", "kernel": "empty, 1 block", **cuda_floor(1)},
                 {"timer": "CUDA events", "kernel": f"empty, {units} blocks", **cuda_floor(units)}]
    if torch_cuda() is None:
        print("PyTorch's profiler skipped: PyTorch with CUDA is not installed here")
    else:
        rows.append({"timer": "PyTorch profiler (CUPTI)", "kernel": "x.add_(1) on one value", **cupti_floor()})
    path = names.path(names.timer_floor(info["name"]))
    path.write_text(json.dumps({"command": f"python -m helpers.timer_floor --device {a.device}",
                                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                                "device": info, "rows": rows}, indent=1) + "\n")
    for r in rows:
        print(f"{r['timer']:<26} {r['kernel']:<26} median {r['median_us']:6.2f} us (IQR {r['q1_us']:.2f}-{r['q3_us']:.2f}, "
              f"min {r['min_us']:.2f})")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
