"""Backends: where a stage's kernels are built and run.

    opencl  pyopencl on any OpenCL device (helpers/engine/devices.py chooses it)
    cuda    CuPy's RawModule with NVRTC on an NVIDIA GPU (cuda.py)

nvrtc.py compiles CUDA kernels to PTX with no GPU at all (the NVRTC wheel), so the tests check
every CUDA kernel on any machine.
"""
from __future__ import annotations


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
