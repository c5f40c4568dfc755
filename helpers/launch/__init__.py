"""Launchers, one module per kernel family: how a registered stage becomes kernel launches.

The registry (helpers/stages.py) names a stage's ``family``; the family's module turns a stage,
a problem and the stage's JIT parameters into ``Step``s (kernel, grid, block, arguments) and
declares its workspaces. A family module provides:

    steps(stage, problem, defines) -> [Step, ...]       every launch of the stage, in order
    workspace(stage, problem, defines) -> {name: Workspace}   scratch buffers (may be empty)

and any functions the registry names by string: ``jit`` (extra defines derived from the
problem), ``requires`` (None, or the unmet need), ``source`` (generated kernel text).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np

FAMILIES = ("direct", "local", "winograd", "batchnorm", "gemm", "wgrad")


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


@dataclass(frozen=True)
class Step:
    """One kernel launch: kernel name, grid of work-items (global size), block (work-group) and
    the arguments: tensor or scalar names of the problem, workspace names, or typed NumPy scalars."""
    kernel: str
    global_size: tuple
    local_size: tuple | None
    args: tuple
    shared: int = 0        # CUDA: bytes of dynamic shared memory per block (0: none)


@dataclass(frozen=True)
class TensorMap:
    """A kernel argument of a CUDA stage that copies by Hopper's Tensor Memory Accelerator: the
    address of a tensor map made on the host for ``tensor`` (a tensor or workspace name) viewed
    as a contiguous array of extents ``dims`` (innermost first), read in boxes of ``box``
    elements, a box written to shared memory with the 128-byte swizzle, or without it (``swizzle``
    False: the box lies densely, as a TMA store reads it) (helpers/engine/backends/cuda.py:
    tensor_map)."""
    tensor: str
    dims: tuple
    box: tuple
    swizzle: bool = True


@dataclass(frozen=True)
class Workspace:
    """A scratch buffer of a stage: element type and number of elements."""
    dtype: str
    count: int

    @property
    def nbytes(self) -> int:
        return np.dtype(self.dtype).itemsize * int(self.count)


def family(name: str):
    """The launcher module of a kernel family."""
    if name not in FAMILIES:
        raise ValueError(f"unknown kernel family {name!r}; the families are {', '.join(FAMILIES)}")
    return importlib.import_module(f"{__name__}.{name}")


def hook(stage, kind: str):
    """The family function a registry entry names for ``jit``, ``requires`` or ``source``."""
    name = getattr(stage, kind)
    if not name:
        return None
    fn = getattr(family(stage.family), name, None)
    if fn is None:
        raise RuntimeError(f"registry bug: stage {stage.key} of {stage.op} names {kind}={name!r}, "
                           f"which helpers/launch/{stage.family}.py does not define")
    return fn
