"""Operations: each module validates run_stage's arguments into a Problem and knows its reference.

An operation module defines:
- ``prepare(**kwargs) -> Problem``: validation; errors name the problem, before any launch;
- ``reference(problem) -> (expected, magnitude)``: dicts of float64 arrays keyed by output name;
  ``magnitude`` is what the tolerance scales with (see helpers/engine/check.py);
- ``rtol(problem) -> float``: the relative tolerance against that magnitude.

The operations are those the registry lists stages for (helpers/stages/: OPS); its validator
checks, when it loads, that each has its module here. The other modules (problem, reference,
layers, vendor*) are what the operations share.
"""
from importlib import import_module
from importlib.util import find_spec


def op_module(op: str):
    """The module of operation ``op``: helpers/ops/<op>.py."""
    if not isinstance(op, str) or not op.isidentifier() or find_spec(f"{__name__}.{op}") is None:
        raise ValueError(f"unknown op {op!r}: there is no helpers/ops/{op}.py")
    return import_module(f"{__name__}.{op}")
