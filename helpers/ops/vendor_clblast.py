"""CLBlast, the portable tuned OpenCL BLAS, as the OpenCL yardstick for the course GEMM.

Runs CLBlast's SGEMM through the ``pyclblast`` binding on the same OpenCL queue, device and
matrices as the course's stages, timed with the same profiling-event helper, and checked by the
one checker first. Where pyclblast (or the libclblast it links) is not installed, returns None:
CLBlast is optional and nothing depends on it.
"""
from __future__ import annotations

import numpy as np


def available() -> bool:
    try:
        import pyclblast  # noqa: F401
    except ImportError:
        return False
    return True


def clblast_gemm(problem, ctx, *, warmup: int = 3, repeats: int = 20, flush_bytes: int | None = None):
    """Median time of CLBlast's SGEMM for an op-gemm problem on ctx's device, or None."""
    if not available():
        return None
    import pyclblast
    import pyopencl.array as cla

    from ..engine.check import check_close
    from ..engine.devices import get_queue
    from .gemm import reference, rtol
    from ..engine.timing import time_enqueue
    queue = get_queue(ctx)
    a, b = problem.inputs["a"], problem.inputs["b"]
    m, n, k = (problem.dims[x] for x in ("M", "N", "K"))
    da, db = cla.to_device(queue, a), cla.to_device(queue, b)
    dc = cla.zeros(queue, (m, n), np.float32)

    def enqueue():
        return [pyclblast.gemm(queue, m, n, k, da, db, dc, a_ld=k, b_ld=n, c_ld=n)]

    enqueue()
    queue.finish()
    expected, magnitude = reference(problem)
    check_close(dc.get(), expected["c"], magnitude=magnitude["c"], rtol=rtol(problem), name="CLBlast c")
    timing = time_enqueue(enqueue, queue, warmup=warmup, repeats=repeats, flush_bytes=flush_bytes)
    return {"name": "CLBlast", "library": f"CLBlast SGEMM via pyclblast {getattr(pyclblast, '__version__', '')}".strip(),
            **timing.summary()}
