"""Launchers, one module per kernel family: how a registered stage becomes kernel launches.

The registry (helpers/stages/) names a stage's ``family``; the family's module turns a stage,
a problem and the stage's JIT parameters into ``Step``s (kernel, grid, block, arguments) and
declares its workspaces. A family is a module of this package that provides:

    LAUNCHES                                            its launches by name (the registry's ``launch``)
    steps(stage, problem, defines) -> [Step, ...]       every launch of the stage, in order
    workspace(stage, problem, defines) -> {name: Workspace}   scratch buffers (may be empty)

and any functions the registry names by string: ``jit`` (extra defines derived from the
problem), ``requires`` (None, or the unmet need), ``source`` (generated kernel text). The
families are found, not listed: a new one is a new module here (the registry's validator checks
each entry against its family when the registry loads).
"""
from __future__ import annotations

import functools
import importlib
import pkgutil

from ..engine.plan import Step, TensorMap, Workspace  # noqa: F401 (what every family builds)


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def dispatch(one_kernel: dict, several: dict):
    """A family's LAUNCHES, steps and workspace from two tables: ``one_kernel`` maps a launch to
    its (grid, block) function (one kernel, the stage's entry, over all the problem's arguments,
    no workspace); ``several`` maps a launch to its (steps, workspace) functions."""
    def steps(stage, p, d: dict) -> list:
        if stage.launch in one_kernel:
            g, l = one_kernel[stage.launch](p, d)
            return [Step(stage.entry or stage.op, g, l, tuple(p.inputs) + tuple(p.outputs) + tuple(p.scalars))]
        return several[stage.launch][0](p, d)

    def workspace(stage, p, d: dict) -> dict:
        return several[stage.launch][1](p, d) if stage.launch in several else {}

    return {**one_kernel, **several}, steps, workspace


def families() -> list[str]:
    """The kernel families: the modules of this package with LAUNCHES, steps and workspace."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if _is_family(m.name))


@functools.lru_cache(maxsize=None)
def _is_family(name: str) -> bool:
    if name not in {m.name for m in pkgutil.iter_modules(__path__)}:
        return False
    module = importlib.import_module(f"{__name__}.{name}")
    return all(hasattr(module, a) for a in ("LAUNCHES", "steps", "workspace"))


def family(name: str):
    """The launcher module of a kernel family."""
    if not _is_family(name):
        raise ValueError(f"unknown kernel family {name!r}; the families are {', '.join(families())}")
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
