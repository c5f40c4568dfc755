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

The families:

    direct       conv_dgrad 02-08, conv_forward 00, conv_wgrad 01: one launch each
    unrolled     the generated 3x3 block of conv_dgrad 07-08
    local        conv_dgrad 09-10 and their CUDA twins: tiles in local memory
    gemm         the course GEMM and the GEMM-based convolutions of chapter 11 (im2col, implicit GEMM)
    winograd     F(2x2,3x3) and F(4x4,3x3) (chapters 12, 12a): transforms and products
    wgrad        the weight gradient's split launches (conv_wgrad 02-03)
    tensor_cores the CUDA stages on mma.sync, wgmma and TMA (chapter 13)
    batchnorm    batch normalization's forward and backward (chapter 14)
    direct_nd    the any-shape kernels (stage 16 of the three convolutions)
    depthwise    chapter 16's depthwise stages (dw_tiles, dw_regs)
    igemm_nd     chapter 16's implicit GEMM of any shape (16_igemm_nd of the three convolutions)
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
