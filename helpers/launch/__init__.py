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

from ..engine.plan import Step, TensorMap, Workspace  # noqa: F401 (what every family builds)

FAMILIES = ("direct", "local", "winograd", "batchnorm", "gemm", "wgrad")


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


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
