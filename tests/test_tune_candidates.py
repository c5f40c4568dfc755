"""Every tune candidate of every stage (each value of each JIT parameter the benchmark's search
may pick) is checked with guards over a few awkward shapes: the search never times, and the
tuned file never records, a configuration that gives a wrong answer.

Candidates are taken from the registry's defaults, whatever the device's tuned file says, so the
same configurations are checked on every device. A candidate the device cannot launch (NVIDIA's
OpenCL allows 256 work-items for some kernels where PoCL allows 4096) is refused by name before
any launch (DeviceLimitError), as the search skips it; the defaults must run."""
import pytest

import helpers
from helpers.ops.batchnorm_backward import random_backward_args
from helpers.ops.batchnorm_forward import random_args as bn_args
from helpers.ops.conv_dgrad import random_problem_args as dgrad_args
from helpers.ops.conv_forward import random_problem_args as fwd_args
from helpers.ops.conv_wgrad import random_problem_args as wgrad_args
from helpers.ops.gemm import random_args as gemm_args
from helpers.stages import REGISTRY

SHAPES = {   # awkward: odd sizes, channel counts on and off the fast paths' multiples
    "conv_dgrad": [dgrad_args(2, 17, 7, 5, 16, 3, 1, 1, "relu", seed=1),
                   dgrad_args(1, 3, 9, 8, 5, 3, 2, 1, "tanh", seed=2)],
    "conv_wgrad": [wgrad_args(2, 17, 7, 5, 16, 3, 1, 1, "relu", seed=1),     # OH*OW = 35, 20: off and on float4
                   wgrad_args(1, 3, 9, 8, 5, 3, 2, 1, "tanh", seed=2)],
    "conv_forward": [fwd_args(1, 5, 7, 9, 6, seed=1), fwd_args(2, 3, 6, 5, 17, seed=2)],
    "batchnorm_forward": [bn_args(2, 3, 5, 7, seed=1), bn_args(1, 5, 4, 4, seed=2)],
    "batchnorm_backward": [random_backward_args(2, 3, 5, 7, seed=1), random_backward_args(1, 5, 4, 4, seed=2)],
    "gemm": [gemm_args(37, 29, 19, seed=1), gemm_args(20, 36, 44, seed=2)],   # off and on float4 rows
}


def candidates(stage):
    """The registry's defaults, then each tune candidate alone (the others at the registry's defaults)."""
    defaults = {name: stage.defines[name] for name in stage.tune}
    yield defaults
    for name, values in stage.tune.items():
        for v in values:
            if v != defaults[name]:
                yield {**defaults, name: v}


CASES = [(op, s.name) for op, stages in REGISTRY.items() for s in stages if s.backend == "opencl" and s.tune]


@pytest.mark.parametrize("op, stage", CASES, ids=[f"{op}-{s}" for op, s in CASES])
def test_every_tune_candidate_is_correct(ctx, op, stage):
    s = helpers.get_stage(op, stage)
    for i, defines in enumerate(candidates(s)):
        for args in SHAPES[op]:
            try:
                helpers.check_stage(op, stage, ctx=ctx, guard=True, defines=defines, **args)
            except helpers.DeviceLimitError:
                if i == 0:
                    raise      # the registry's defaults must run on every device
            except (AssertionError, helpers.GuardViolation) as err:
                raise AssertionError(f"{op} {s.key} with {defines}:\n{err}") from None
