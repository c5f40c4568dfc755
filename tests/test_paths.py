"""Which path each problem takes (fast, general, fallback), decided on the host without a launch:
a fast path disabled by a changed threshold fails the grid's path count, a path off the grid is
taken when the limit that guards it is lowered, and a plan reports the path it took. (Every path
of every stage counted on its grid: tests/test_stages.py.)"""
import pytest

import helpers
from helpers.launch import direct, gemm
from helpers.ops.conv_dgrad import random_problem_args
from helpers.runner import path_of

from shapes import GRIDS, host_paths, require_paths


def grid_paths(name, ctx) -> dict:
    return host_paths(helpers.get_stage("conv_dgrad", name), ctx, GRIDS["conv_dgrad"]())


@pytest.mark.parametrize("stage", ["output_depth", "input_depth", "width"])
def test_a_fast_path_disabled_by_a_changed_threshold_is_caught(ctx, monkeypatch, stage):
    monkeypatch.setattr(direct, "BLOCK", 128)      # K % 128 == 0: no layer of the grid qualifies
    with pytest.raises(AssertionError, match="paths taken too rarely"):
        require_paths(helpers.get_stage("conv_dgrad", stage), grid_paths(stage, ctx))


def test_the_column_workspace_fallback_is_reported(ctx, monkeypatch):
    """gemm_col2im's fallback (columns past 32-bit indexing) is off the grid: with the index
    limit lowered to the grid's sizes, enough cases take it and the others stay on the stage."""
    monkeypatch.setattr(gemm, "INDEX_LIMIT", 20_000)
    require_paths(helpers.get_stage("conv_dgrad", "gemm_col2im"), grid_paths("gemm_col2im", ctx), off_grid=True)


def test_a_fallback_is_reported(ctx):
    args = random_problem_args(1, 8, 9, 9, 4, 3, 1, 1)      # K = 4 < the Winograd minimum
    assert path_of("conv_dgrad", "winograd", ctx=ctx, **args) == "fallback"
    assert helpers.check_stage("conv_dgrad", "winograd", ctx=ctx, **args).path == "fallback"
    args = random_problem_args(1, 8, 9, 9, 16, 3, 1, 1)
    assert helpers.check_stage("conv_dgrad", "output_depth", ctx=ctx, **args).path == "fast"
    assert helpers.check_stage("conv_dgrad", "naive", ctx=ctx, **args).path == "only"
