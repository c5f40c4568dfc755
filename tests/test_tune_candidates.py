"""Every tune candidate of every OpenCL stage (each value of each JIT parameter the benchmark's
search may pick) is checked with guards over its op's small layer set (odd sizes, channel counts on
and off the fast paths' multiples): the search never times, and the tuned file never records, a
configuration that gives a wrong answer.

Candidates are taken from the registry's defaults, whatever the device's tuned file says, so the
same configurations are checked on every device. A candidate the device cannot launch (NVIDIA's
OpenCL allows 256 work-items for some kernels where PoCL allows 4096) is refused by name before
any launch (DeviceLimitError), as the search skips it; the defaults must run."""
import functools

import pytest

import helpers
from helpers.ops import op_module
from helpers.ops.layers import layer_set, op_layers
from helpers.runner import CannotRun
from helpers.stages import REGISTRY

pytestmark = pytest.mark.debug_builds      # breadth: built without the optimiser on a CPU (tests/conftest.py)


@functools.cache
def shapes(op: str) -> list:
    """The problems an op's candidates are checked on: its module's small default layer set (LAYERS:
    tiny layers for CI, channels, planes and products on and off the fast paths' multiples of 4),
    built as the search builds its problems from a layer set (helpers/tune.py: tune_op), so a new
    op needs no entry here. An op without layer sets is refused, naming it."""
    mod = op_module(op)
    return [mod.layer_args(lay, seed=i) for i, lay in enumerate(layer_set(op_layers(mod)[1]))]


def candidates(stage):
    """The registry's defaults, then each tune candidate alone (the others at the registry's defaults)."""
    defaults = {name: stage.defines[name] for name in stage.tune}
    yield defaults
    for name, values in stage.tune.items():
        for v in values:
            if v != defaults[name]:
                yield {**defaults, name: v}


CASES = [(op, s.name) for op, stages in REGISTRY.items() for s in stages if s.backend == "opencl" and s.tune]


def test_every_op_with_tune_candidates_has_shapes_for_them():
    """Every op with a stage that has tune candidates (either backend) has its layer sets."""
    tuned = {s.op for stages in REGISTRY.values() for s in stages if s.tune}
    assert all(shapes(op) for op in tuned)


@pytest.mark.parametrize("op, stage", CASES, ids=[f"{op}-{s}" for op, s in CASES])
def test_every_tune_candidate_is_correct(ctx, op, stage):
    s = helpers.get_stage(op, stage)
    ran = 0
    for i, defines in enumerate(candidates(s)):
        for args in shapes(op):
            try:
                helpers.check_stage(op, stage, ctx=ctx, guard=True, defines=defines, **args)
                ran += 1
            except CannotRun:
                pass           # refused by name before any launch (Winograd off stride 1), as on the grid
            except helpers.DeviceLimitError:
                if i == 0:
                    raise      # the registry's defaults must run on every device
            except (AssertionError, helpers.GuardViolation) as err:
                raise AssertionError(f"{op} {s.key} with {defines}:\n{err}") from None
    assert ran, f"{op} {s.key} ran none of its op's layer set"
