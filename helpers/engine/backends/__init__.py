"""Backends: where a stage's kernels are built and run, each in its module here.

    opencl  pyopencl on any OpenCL device (opencl.py: DeviceTensor, ClPlan; helpers/engine/devices.py
            chooses the device)
    cuda    CuPy's RawModule with NVRTC on an NVIDIA GPU (cuda.py: CudaTensor, CudaPlan)

``plan_class`` is the one place a stage's backend becomes the class that plans it (PLANS: a
function per backend that imports its class); a backend's module is imported only when one of
its stages is planned, so pyopencl is never needed on the CUDA path, nor CuPy on the OpenCL one. nvrtc.py compiles CUDA kernels to PTX with no GPU at all
(the NVRTC wheel), so the tests check every CUDA kernel on any machine.
emulated.py builds a CUDA kernel as C++ with g++ against a stand-in for the device and runs it
on the CPU, so the tests check what the CUDA stages compute on any machine too.
"""
from __future__ import annotations


def opencl_plan() -> type:
    from .opencl import ClPlan      # imports pyopencl: only when an OpenCL stage is planned
    return ClPlan


def cuda_plan() -> type:
    from .cuda import CudaPlan
    return CudaPlan


# backend -> the function that imports its plan class (both derive from engine/plan.py: Plan),
# and the extension of its kernel files (kernels/<op>/NN_name.cl or .cu; the registry checks it)
PLANS = {"opencl": opencl_plan, "cuda": cuda_plan}
KERNEL_FILES = {"opencl": ".cl", "cuda": ".cu"}
BACKENDS = tuple(PLANS)


def plan_class(backend: str) -> type:
    """The plan class of a backend (``context(ctx, inputs)`` and ``describe(ctx)`` are its
    static methods: what the running layer asks of a backend before it plans)."""
    if backend not in PLANS:
        raise ValueError(f"unknown backend {backend!r}; the backends are {', '.join(BACKENDS)}")
    return PLANS[backend]()


class BackendUnavailable(RuntimeError):
    """A stage's backend cannot run here (what is missing is in the message)."""


def cuda_missing() -> str | None:
    """None when CUDA stages can run here, else what is missing, in one sentence."""
    try:
        import cupy
    except ImportError:
        return ("CUDA stages need CuPy (pip install cupy-cuda12x or cupy-cuda13x) and an NVIDIA GPU; "
                "CuPy is not installed here (the recorded GPU results are in results/)")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDA driver missing or unusable
        return f"CUDA stages need an NVIDIA GPU; CuPy finds no usable CUDA driver here ({e})"
    if count == 0:
        return "CUDA stages need an NVIDIA GPU; CuPy sees none here (the recorded GPU results are in results/)"
    return None


def require(backend: str, what: str) -> None:
    """Raise BackendUnavailable, naming what is missing, when ``backend`` cannot run here."""
    if backend == "cuda":
        missing = cuda_missing()
        if missing:
            raise BackendUnavailable(f"{what}: {missing}")
