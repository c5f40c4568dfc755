"""Operations: each module validates run_stage's arguments into a Problem and knows its reference.

An operation module defines:
- ``OP``, its key in the registry, and ``NAME``, what tables and prose call it ("input gradient");
- ``prepare(**kwargs) -> Problem``: validation; errors name the problem, before any launch;
- ``reference(problem) -> (expected, magnitude)``: dicts of float64 arrays keyed by output name;
  ``magnitude`` is what the tolerance scales with (see helpers/engine/check.py);
- ``terms(problem) -> int``: how many terms each output's sums add (what rounding grows with);
- ``rtol(problem) -> float``: the relative tolerance per element against that magnitude
  (``rtol(problem, mma=precision)`` for an op with tensor-core stages);
- optionally ``fused_operand(problem) -> bool`` (a tensor-core stage rounds a fused operand) and
  ``CONDITIONED``: the outputs computed from statistics, checked as a whole against their
  magnitude (helpers/engine/check.py).
``tolerance(op, problem, stage)`` puts these together: the one place they are composed.

OPERATIONS holds the operation modules themselves, by name (the registry's operations,
helpers/stages/: OPS; its validator checks, when it loads, that each has its module here). The
other modules (problem, reference, shape, grid_any_shape, layers, vendor*) are what the operations share.

    conv_dgrad.py, conv_forward.py, conv_wgrad.py, conv3d_dgrad.py, gemm.py, batchnorm_forward.py,
    batchnorm_backward.py   the operations, one module each
    problem         a validated Problem: its inputs, outputs and dimensions
    reference       the plain NumPy references, the ground truth of every test
    shape           a convolution of any shape (1-4 axes, groups, dilation, per-axis stride, padding)
    grid_any_shape  the awkward shapes of any rank every any-shape stage is checked on (the tests'
                    grid and chapter 16's kernel exercise read the one list)
    layers          the named layer sets; user_layers: a learner's own, from JSON or one line
    vendor          cuDNN through PyTorch; vendor_nd: PyTorch's own convolutions of any shape;
                    vendor_batchnorm: PyTorch's batch norm; vendor_clblast: CLBlast's SGEMM
"""
from __future__ import annotations

from ..engine import check
from . import batchnorm_backward, batchnorm_forward, conv3d_dgrad, conv_dgrad, conv_forward, conv_wgrad, gemm

OPERATIONS = {m.OP: m for m in (conv_dgrad, conv_wgrad, conv_forward, batchnorm_forward, batchnorm_backward,
                                gemm, conv3d_dgrad)}


def op_module(op: str):
    """The module of operation ``op`` (helpers/ops/<op>.py), from OPERATIONS."""
    if not isinstance(op, str) or op not in OPERATIONS:
        raise ValueError(f"unknown op {op!r}: there is no helpers/ops/{op}.py among the operations "
                         f"({', '.join(OPERATIONS)})")
    return OPERATIONS[op]


def tolerance(op: str, problem, stage=None) -> dict:
    """Each output's Tolerance (helpers/engine/check.py) for ``stage`` (a registry Stage: its
    precision, and whether it sums on tensor cores; None: a float32 stage): the op's rtol per
    element and its terms, composed with the stage's storage and tensor cores."""
    mod = op_module(op)
    precision = stage.precision if stage is not None else "fp32"
    mma = stage is not None and stage.tensor_cores
    rtol = mod.rtol(problem, mma=precision) if mma else mod.rtol(problem)
    fused = mma and getattr(mod, "fused_operand", lambda p: False)(problem)
    conditioned = getattr(mod, "CONDITIONED", ())
    return {name: check.tolerance(rtol, mod.terms(problem), precision, mma, fused, name in conditioned)
            for name in problem.outputs}
