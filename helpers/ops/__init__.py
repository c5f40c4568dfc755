"""Operations: each module validates run_stage's arguments into a Problem and knows its reference.

An operation module defines:
- ``prepare(**kwargs) -> Problem``: validation; errors name the problem, before any launch;
- ``reference(problem) -> (expected, magnitude)``: dicts of float64 arrays keyed by output name;
  ``magnitude`` is what the tolerance scales with (see helpers/engine/check.py);
- ``rtol(problem) -> float``: the relative tolerance against that magnitude.
"""
from importlib import import_module

_MODULES = {
    "conv_dgrad": "helpers.ops.conv_dgrad",
    "conv_wgrad": "helpers.ops.conv_wgrad",
    "batchnorm_forward": "helpers.ops.batchnorm_forward",
    "batchnorm_backward": "helpers.ops.batchnorm_backward",
    "conv_forward": "helpers.ops.conv_forward",
    "gemm": "helpers.ops.gemm",
    "conv3d_dgrad": "helpers.ops.conv3d_dgrad",
}


def op_module(op: str):
    if op not in _MODULES:
        raise ValueError(f"unknown op {op!r}; the course has {', '.join(sorted(_MODULES))}")
    return import_module(_MODULES[op])
