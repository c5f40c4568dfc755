"""Every registered conv_dgrad stage against the NumPy reference, with guard regions, on the grid."""
import numpy as np
import pytest

import helpers
from helpers.ops.conv_dgrad import random_problem_args

from shapes import case_id, conv_grid, require_paths

GRID = conv_grid()
STAGES = helpers.stage_names("conv_dgrad")


def test_grid_is_large_and_awkward():
    assert len(GRID) >= 200
    assert {c["kernel"] for c in GRID} == {1, 2, 3, 5}
    assert {c["stride"] for c in GRID} == {1, 2, 3}
    assert {c["activation"] for c in GRID} == {"none", "relu", "sigmoid", "tanh"}
    assert any(c["h"] != c["w"] for c in GRID) and any(c["h"] == 1 for c in GRID)


def _args(c, seed):
    return random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"],
                               c["padding"], c["activation"], seed=seed)


@pytest.mark.parametrize("stage", STAGES)
def test_stage_matches_reference_with_guards(ctx, stage):
    """One test per stage covering the whole grid (keeps pytest's overhead out of the loop);
    every path of the stage (fast, general, fallback) must have run on enough cases."""
    paths = {}
    for i, c in enumerate(GRID):
        try:
            res = helpers.check_stage("conv_dgrad", stage, ctx=ctx, guard=True, **_args(c, seed=i))
        except (AssertionError, helpers.GuardViolation) as err:
            raise AssertionError(f"stage {stage} failed on {case_id(c)}:\n{err}") from None
        paths[res.path] = paths.get(res.path, 0) + 1
    require_paths(helpers.get_stage("conv_dgrad", stage), paths)


def test_stages_agree_on_a_realistic_layer(ctx):
    args = random_problem_args(2, 32, 14, 14, 48, 3, 1, 1, "relu", seed=7)
    results = [helpers.run_stage("conv_dgrad", s, ctx=ctx, **args) for s in STAGES]
    for s, r in zip(STAGES, results):
        helpers.check_stage("conv_dgrad", s, ctx=ctx, **args)
        assert r.shape == (2, 32, 14, 14) and r.dtype == np.float32
