"""Building OpenCL programs from kernels/ with -D JIT parameters; each built once per context.

    prg = build(ctx, "conv_dgrad/02_naive.cl", {"KH": 3, "KW": 3, "STRIDE": 1, "ACT": "ACT_RELU"})
    k = kernel(prg, "conv_dgrad")

``#include "course.h"`` resolves to kernels/common/ (the kernel files and their options:
engine/kernels.py). A failed build raises KernelBuildError with the compiler's log and the
source lines it points at.
"""
from __future__ import annotations

import re
import warnings

import pyopencl as cl

from .kernels import kernel_source, options


class KernelBuildError(RuntimeError):
    """The OpenCL compiler rejected a kernel; the message holds the log and the offending lines."""


def _offending_lines(log: str, source: str, context: int = 1) -> str:
    lines = source.splitlines()
    shown = []
    for m in re.finditer(r"<source>:(\d+):(\d+)|\.cl:(\d+):(\d+)|^(?:.*?):(\d+):(\d+): (?:error|warning)",
                         log, re.M):
        n = int(next(g for g in m.groups() if g is not None))
        if n in shown or not 1 <= n <= len(lines):
            continue
        shown.append(n)
    out = []
    for n in shown[:5]:
        for i in range(max(1, n - context), min(len(lines), n + context) + 1):
            out.append(f"{'>' if i == n else ' '} {i:4d} | {lines[i - 1]}")
        out.append("")
    return "\n".join(out)


def _clean_log(message: str, relpath: str) -> str:
    """The compiler's log without pyopencl's preamble, object addresses or temporary file paths."""
    log = message.split("\n\n", 1)[1] if message.startswith("clBuildProgram failed") and "\n\n" in message else message
    log = re.sub(r"<pyopencl\.Device '([^']*)' on '[^']*' at 0x[0-9a-f]+>", r"\1", log)
    log = "\n".join(line for line in log.splitlines() if not line.startswith("(options:"))
    return re.sub(r"(?:[A-Za-z]:)?[^\s:'\"]*[/\\][^\s:'\"]*\.cl\b", f"kernels/{relpath}", log).strip()


_programs: dict = {}

# Set by the test suite's breadth tests for their duration (the grids, every tune candidate: some
# thousands of builds; the marker debug_builds, tests/conftest.py): builds for a CPU device then add
# -cl-opt-disable, as a C++ project runs its unit tests on a debug build. PoCL builds about three
# times faster so, and no answer may depend on it; the notebooks, both editions' runs, a test of
# every stage at the driver's optimisation and every GPU build keep the driver's default.
UNOPTIMISED_ON_CPU = False


def _build_options(ctx: cl.Context, defines: dict | None) -> list[str]:
    opts = options(defines)
    if UNOPTIMISED_ON_CPU and ctx.devices[0].type & cl.device_type.CPU:
        opts.append("-cl-opt-disable")
    return opts


def build(ctx: cl.Context, relpath: str, defines: dict | None = None, source: str | None = None) -> cl.Program:
    """Build kernels/``relpath`` (or ``source``, named ``relpath``) with ``defines``; cached."""
    text = source if source is not None else kernel_source(relpath)
    opts = _build_options(ctx, defines)
    key = (ctx.int_ptr, text, tuple(opts))
    prg = _programs.get(key)
    if prg is None:
        try:
            with warnings.catch_warnings():
                # A non-empty but successful build log is not news to a learner.
                warnings.simplefilter("ignore", cl.CompilerWarning)
                prg = cl.Program(ctx, text).build(options=opts)
        except cl.RuntimeError as err:
            from .devices import FAULT_HINT, faulted
            log = _clean_log(str(err), relpath)
            why = f" A kernel faulted on this context earlier. {FAULT_HINT}" if faulted(ctx) else ""
            raise KernelBuildError(
                f"Building kernels/{relpath} with {' '.join(opts[1:]) or 'no defines'} failed on "
                f"{ctx.devices[0].name.strip()}.{why}\n{_offending_lines(log, text)}\nCompiler log:\n{log}") from None
        _programs[key] = prg
    return prg


_kernels: dict = {}


def kernel(prg: cl.Program, name: str) -> cl.Kernel:
    """Retrieve a kernel object once per program (``prg.name`` would make a new one each time)."""
    key = (prg.int_ptr, name)
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = cl.Kernel(prg, name)
    return k


def build_log(ctx: cl.Context, relpath: str, defines: dict | None = None, extra_options=(),
              source: str | None = None) -> str:
    """Build kernels/``relpath`` (or ``source``) again with ``extra_options`` added and return the
    compiler's log for the context's first device ('' when the driver says nothing).

    For reading what a compiler reports, e.g. NVIDIA's register and spill counts:
    ``build_log(ctx, path, defines, ["-cl-nv-verbose"])`` (an option only NVIDIA's driver knows).
    Not cached and not used for running kernels.
    """
    text = source if source is not None else kernel_source(relpath)
    opts = options(defines) + list(extra_options)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)
            prg = cl.Program(ctx, text).build(options=opts)
    except cl.RuntimeError as err:
        raise KernelBuildError(f"Building kernels/{relpath} with {' '.join(opts[1:])} failed.\n{err}") from None
    return prg.get_build_info(ctx.devices[0], cl.program_build_info.LOG).strip()
