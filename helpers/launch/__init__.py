"""Launchers, one module per kernel family: how a registered stage becomes kernel launches.

A registry entry (helpers/stages/) holds its ``family``: the module here that turns a stage, a
problem and the stage's JIT parameters into ``Step``s (kernel, grid, block, arguments) and
declares its workspaces. A family is a module of this package that provides (FAMILY):

    LAUNCHES                                            its launches by name (the registry's ``launch``)
    steps(stage, problem, defines) -> [Step, ...]       every launch of the stage, in order
    workspace(stage, problem, defines) -> {name: Workspace}   scratch buffers (may be empty)

and the functions registry entries hold: ``jit`` (extra defines derived from the problem),
``requires`` (None, or the unmet need), ``generate`` (generated kernel text). A new family is a
new module here, imported by the registry modules that use it (the registry's validator checks
each entry against its family when the registry loads).
"""
from __future__ import annotations

from types import ModuleType

from ..engine.plan import Step, TensorMap, Workspace  # noqa: F401 (what every family builds)

FAMILY = ("LAUNCHES", "steps", "workspace")     # what a launcher module provides


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


def is_family(module) -> bool:
    """Whether ``module`` is a launcher: a module of this package with LAUNCHES, steps and workspace."""
    return (isinstance(module, ModuleType) and module.__name__.startswith(__name__ + ".")
            and all(hasattr(module, a) for a in FAMILY))
