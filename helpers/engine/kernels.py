"""The kernel files under kernels/ and the options every backend builds them with.

    kernel_source("conv_dgrad/02_naive.cl")          # the text a notebook shows
    options({"KH": 3, "STRIDE": 1})                  # ['-I.../kernels/common', '-DKH=3', '-DSTRIDE=1']

``options`` is the one place JIT parameters become compiler options: OpenCL's build
(engine/build.py), CuPy's NVRTC build (backends/cuda.py) and the PTX compile check
(backends/nvrtc.py) all take them from here, so a define means the same on both backends.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"
COMMON = KERNELS / "common"


def kernel_path(relpath: str) -> Path:
    path = KERNELS / relpath
    if not path.is_file():
        raise FileNotFoundError(f"No kernel file kernels/{relpath}")
    return path


def kernel_source(relpath: str) -> str:
    """The text of a kernel file (what notebooks show)."""
    return kernel_path(relpath).read_text()


def options(defines: dict | None) -> list[str]:
    """Compiler options: the include path for kernels/common (``#include "course.h"``), then one
    -DNAME=VALUE per define, sorted by name (a bool as 0 or 1)."""
    return [f"-I{COMMON}"] + [f"-D{name}={int(value) if isinstance(value, bool) else value}"
                              for name, value in sorted((defines or {}).items())]
