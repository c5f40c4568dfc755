"""A stage's kernel as the GPU gets it, read on the host (no GPU needed; chapter 13): the PTX NVRTC
makes of it, the key instructions counted and quoted, and the lines a build switch compiles.

    stage_ptx("tc_fp16")            # PTX text; ptx_counts, ptx_excerpt read it
    switch_blocks("WGMMA")          # [(first line number, lines), ...] of 13_tc_nhwc.cu
"""
from __future__ import annotations

from ..ops import conv_dgrad
from ..stages import get_stage

KEY_INSTRUCTIONS = ("mma.sync", "ldmatrix", "cp.async", "cvt.rna.tf32", "ld.shared", "st.shared")


def stage_ptx(stage: str, arch: str = "compute_80", layer: dict | None = None, defines: dict | None = None) -> str:
    """The PTX NVRTC makes of a stage's kernel (its defaults and ``defines``, for a 3x3 stride-1 layer)."""
    from ..engine.backends import nvrtc
    from ..runner import jit_defines, prepare, stage_source
    s = get_stage("conv_dgrad", stage)
    lay = layer or {"n": 1, "c": 64, "h": 8, "w": 8, "k": 64, "kernel": 3, "stride": 1, "padding": 1}
    problem = prepare("conv_dgrad", **conv_dgrad.layer_args(dict(lay, name="ptx")))
    jit = jit_defines(s, problem, {**s.defines, **(defines or {})})
    return nvrtc.compile_ptx(s.kernel, jit, arch, source=stage_source(s, jit))


def ptx_counts(ptx: str) -> dict:
    """How many PTX lines hold each key instruction (in the unrolled kernel body)."""
    return {k: sum(1 for line in ptx.splitlines() if line.strip().startswith(k)) for k in KEY_INSTRUCTIONS}


def ptx_excerpt(ptx: str, instruction: str, lines: int = 2) -> list[str]:
    """The first ``lines`` PTX lines starting with ``instruction``."""
    return [line.strip() for line in ptx.splitlines() if line.strip().startswith(instruction)][:lines]


def forward_blocks(kernel: str = "conv_dgrad/13_tc_nhwc.cu") -> list[tuple[int, list[str]]]:
    """The kernel's lines that only the forward pass compiles (switch_blocks of FWD)."""
    return switch_blocks("FWD", kernel)


def switch_blocks(switch: str, kernel: str = "conv_dgrad/13_tc_nhwc.cu") -> list[tuple[int, list[str]]]:
    """The kernel's lines that only a build with ``switch`` = 1 compiles: each ``#if <switch>``
    block up to its ``#else``, ``#elif`` or ``#endif``, as (first line number, lines)."""
    from ..engine.kernels import kernel_source
    lines = kernel_source(kernel).splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == f"#if {switch}":
            depth, j = 0, i + 1
            while depth or not lines[j].strip().startswith(("#else", "#elif", "#endif")):
                depth += lines[j].strip().startswith("#if")
                depth -= depth and lines[j].strip().startswith("#endif")
                j += 1
            out.append((i + 2, lines[i + 1:j]))
            i = j
        i += 1
    return out
