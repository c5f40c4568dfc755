"""Compile a CUDA kernel to PTX with NVRTC, no GPU needed (the tests' compile check).

NVRTC comes from pip (nvidia-cuda-nvrtc) with its Python bindings (cuda-bindings); the
bindings find the library of the wheel by themselves.

    ptx = compile_ptx("conv_dgrad/02_naive.cu", {"KH": 3, "KW": 3, "STRIDE": 1}, arch="compute_90")
"""
from __future__ import annotations

from ..kernels import kernel_source, options as kernel_options


class CudaCompileError(RuntimeError):
    """NVRTC rejected a kernel; the message holds its log."""


def missing() -> str | None:
    """None when NVRTC can be used, else what to install."""
    try:
        from cuda.bindings import nvrtc
        err, *_ = nvrtc.nvrtcVersion()
    except Exception as e:  # ImportError, or the library not found
        return f"NVRTC is not usable ({e}); pip install cuda-bindings nvidia-cuda-nvrtc"
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        return f"NVRTC is not usable ({err})"
    return None


def options(defines: dict, arch: str) -> list[str]:
    return [f"--gpu-architecture={arch}", "-default-device", *kernel_options(defines)]


def compile_ptx(relpath: str, defines: dict, arch: str = "compute_80", source: str | None = None) -> str:
    """PTX of kernels/<relpath> built with ``-D`` defines for a virtual architecture."""
    from cuda.bindings import nvrtc
    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
    text = source if source is not None else kernel_source(relpath)
    err, prog = nvrtc.nvrtcCreateProgram(text.encode(), relpath.encode(), 0, [], [])
    if err != ok:
        raise CudaCompileError(f"kernels/{relpath}: nvrtcCreateProgram failed ({err})")
    try:
        opts = [o.encode() for o in options(defines, arch)]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != ok:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise CudaCompileError(f"kernels/{relpath} does not compile for {arch} with "
                                   f"{defines}:\n{log.decode(errors='replace').rstrip()}")
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        nvrtc.nvrtcGetPTX(prog, ptx)
        return ptx.decode().rstrip("\x00")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
