"""CLBlast, the portable tuned OpenCL BLAS, as the OpenCL yardstick for the course GEMM.

Calls CLBlast's C function ``CLBlastSgemm`` through ctypes on the same OpenCL queue, device and
matrices as the course's stages, timed with the same profiling-event helper, and checked by the
one checker first. Only the shared library is needed (Debian/Ubuntu ``libclblast1``, conda-forge
``clblast``); no Python binding is built. Where the library is not found, returns None: CLBlast
is optional and nothing depends on it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

import numpy as np
import pyopencl as cl

# clblast_c.h: CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastSuccess
ROW_MAJOR, NO_TRANSPOSE, SUCCESS = 101, 111, 0


@functools.lru_cache(maxsize=1)
def _library():
    """libclblast as a ctypes library, or None. Searched by the dynamic loader's own rules
    (LD_LIBRARY_PATH, the system's directories), then in this Python's prefix (a conda env)."""
    names = ["libclblast.so.1", "libclblast.so", ctypes.util.find_library("clblast"),
             os.path.join(sys.prefix, "lib", "libclblast.so")]
    for name in filter(None, names):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        size, ptr, f32 = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_float
        lib.CLBlastSgemm.restype = ctypes.c_int
        lib.CLBlastSgemm.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, size, size, size, f32,
                                     ptr, size, size, ptr, size, size, f32, ptr, size, size,
                                     ctypes.POINTER(ptr), ctypes.POINTER(ptr)]
        return lib
    return None


def available() -> bool:
    return _library() is not None


def sgemm(queue, m: int, n: int, k: int, a, b, c):
    """c (m x n) = a (m x k) . b (k x n), row-major float32 pyopencl buffers, enqueued on queue.
    Returns the pyopencl Event of the call; raises RuntimeError with CLBlast's status code."""
    lib = _library()
    q, event = ctypes.c_void_p(queue.int_ptr), ctypes.c_void_p()
    status = lib.CLBlastSgemm(ROW_MAJOR, NO_TRANSPOSE, NO_TRANSPOSE, m, n, k, 1.0,
                              a.int_ptr, 0, k, b.int_ptr, 0, n, 0.0, c.int_ptr, 0, n,
                              ctypes.byref(q), ctypes.byref(event))
    if status != SUCCESS:
        raise RuntimeError(f"CLBlastSgemm returned status {status} (clblast_c.h: CLBlastStatusCode) "
                           f"for m={m} n={n} k={k}")
    return cl.Event.from_int_ptr(event.value, retain=False)


def clblast_gemm(problem, ctx, reference, rtol: float, *, warmup: int = 3, repeats: int = 20,
                 flush_bytes: int | None = None):
    """Median time of CLBlast's SGEMM for an op-gemm problem on ctx's device, or None; its product
    checked first against ``reference`` (expected, magnitude) to ``rtol`` (the op's)."""
    if not available():
        return None
    import pyopencl.array as cla

    from ..engine.check import check_close
    from ..engine.devices import get_queue
    from ..engine.timing import time_enqueue
    queue = get_queue(ctx)
    a, b = problem.inputs["a"], problem.inputs["b"]
    m, n, k = (problem.dims[x] for x in ("M", "N", "K"))
    da, db = cla.to_device(queue, a), cla.to_device(queue, b)
    dc = cla.zeros(queue, (m, n), np.float32)

    def enqueue():
        """[marker, CLBlast's event]: the event CLBlast returns is its last kernel's, and a large
        or odd-sized product runs several (pads and transposes around the product), so the run is
        timed from a marker enqueued just before the call to the end of that event. As for the
        course's multi-kernel stages, a gap the host leaves between the kernels counts."""
        return [cl.enqueue_marker(queue), sgemm(queue, m, n, k, da.data, db.data, dc.data)]

    enqueue()
    queue.finish()
    expected, magnitude = reference
    check_close(dc.get(), expected["c"], magnitude=magnitude["c"], rtol=rtol, name="CLBlast c")
    timing = time_enqueue(enqueue, queue, warmup=warmup, repeats=repeats, flush_bytes=flush_bytes)
    return {"name": "CLBlast", "library": "CLBlast SGEMM (libclblast, C API)", **timing.summary()}
