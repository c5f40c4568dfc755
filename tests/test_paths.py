"""Which path each problem takes (fast, general, fallback), decided on the host without a launch:
every path of every conv_dgrad stage is taken by enough cases of the grid, and a fast path
disabled by a changed threshold fails that requirement. Needs no PyTorch and no kernel run
(the grid tests in test_conv_dgrad.py count the same paths on the cases they run)."""
import pytest

import helpers
from helpers.launch import direct
from helpers.ops.conv_dgrad import random_problem_args
from helpers.runner import path_of

from shapes import conv_grid, require_paths

GRID = conv_grid()


def grid_paths(stage, ctx) -> dict:
    counts = {}
    for i, c in enumerate(GRID):
        args = random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"],
                                   c["padding"], c["activation"], seed=i)
        p = path_of("conv_dgrad", stage, ctx=ctx, **args)
        counts[p] = counts.get(p, 0) + 1
    return counts


@pytest.mark.parametrize("stage", helpers.stage_names("conv_dgrad"))
def test_every_path_is_taken_on_the_grid(ctx, stage):
    require_paths(helpers.get_stage("conv_dgrad", stage), grid_paths(stage, ctx))


@pytest.mark.parametrize("stage", ["output_depth", "input_depth", "width"])
def test_a_fast_path_disabled_by_a_changed_threshold_is_caught(ctx, monkeypatch, stage):
    monkeypatch.setattr(direct, "BLOCK", 128)      # K % 128 == 0: no layer of the grid qualifies
    with pytest.raises(AssertionError, match="paths taken too rarely"):
        require_paths(helpers.get_stage("conv_dgrad", stage), grid_paths(stage, ctx))


def test_a_fallback_is_reported(ctx):
    args = random_problem_args(1, 8, 9, 9, 4, 3, 1, 1)      # K = 4 < the Winograd minimum
    assert path_of("conv_dgrad", "winograd", ctx=ctx, **args) == "fallback"
    assert helpers.check_stage("conv_dgrad", "winograd", ctx=ctx, **args).path == "fallback"
    args = random_problem_args(1, 8, 9, 9, 16, 3, 1, 1)
    assert helpers.check_stage("conv_dgrad", "output_depth", ctx=ctx, **args).path == "fast"
    assert helpers.check_stage("conv_dgrad", "naive", ctx=ctx, **args).path == "only"
