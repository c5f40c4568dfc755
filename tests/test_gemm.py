"""Op gemm: every registered stage against NumPy over awkward sizes with guard regions; bad input."""
import numpy as np
import pytest

import helpers
from helpers.ops.gemm import random_args, tile_requires

STAGES = helpers.stage_names("gemm")
# sizes of 1, primes, non-multiples of the tiles and of 4, multiples of 4 (the float4 path)
SIZES = [(1, 1, 1), (1, 7, 3), (5, 1, 9), (17, 33, 5), (64, 64, 64), (65, 63, 17), (70, 129, 36),
         (3, 200, 128), (130, 12, 1), (96, 100, 40)]


@pytest.mark.parametrize("stage", STAGES)
def test_stage_matches_reference_with_guards(ctx, stage):
    for i, (m, n, k) in enumerate(SIZES):
        try:
            helpers.check_stage("gemm", stage, ctx=ctx, guard=True, **random_args(m, n, k, seed=i))
        except (AssertionError, helpers.GuardViolation) as err:
            raise AssertionError(f"gemm stage {stage} failed on M={m} N={n} K={k}:\n{err}") from None


def test_register_blocked_other_tiles(ctx):
    for tiles in ({"TM": 32, "TN": 64, "TK": 8, "WM": 4, "WN": 4}, {"TM": 128, "TN": 128, "TK": 16, "WM": 8, "WN": 8}):
        helpers.check_stage("gemm", "register_blocked", ctx=ctx, guard=True, defines=tiles,
                            **random_args(67, 131, 44, seed=3))


def test_vector_path_is_taken_when_rows_allow(ctx):
    plan = helpers.plan_stage("gemm", "register_blocked", ctx=ctx, **random_args(8, 12, 16))
    assert plan.jit_defines["GEMM_VEC_A"] == 1 and plan.jit_defines["GEMM_VEC_B"] == 1
    plan = helpers.plan_stage("gemm", "register_blocked", ctx=ctx, **random_args(8, 13, 15))
    assert plan.jit_defines["GEMM_VEC_A"] == 0 and plan.jit_defines["GEMM_VEC_B"] == 0


def test_tile_constraints_are_checked_before_building(ctx):
    assert tile_requires({"TM": 64, "TN": 64, "TK": 16, "WM": 4, "WN": 4}) is None
    assert "multiple of WM" in tile_requires({"TM": 60, "TN": 64, "TK": 16, "WM": 8, "WN": 4})
    assert "multiple of TN" in tile_requires({"TM": 16, "TN": 128, "TK": 16, "WM": 4, "WN": 8}, fixed_column=True)
    with pytest.raises(ValueError, match="cannot run this problem"):
        helpers.run_stage("gemm", "register_blocked", ctx=ctx, defines={"TM": 48, "WM": 5},
                          **random_args(4, 4, 4))


@pytest.mark.parametrize("kwargs, match", [
    (dict(a=np.ones((3, 4), np.float32), b=np.ones((5, 2), np.float32)), "columns must equal"),
    (dict(a=np.ones((3, 4), np.float64), b=np.ones((4, 2), np.float32)), "float32"),
    (dict(a=np.ones((3, 4, 1), np.float32), b=np.ones((4, 2), np.float32)), "dimension"),
    (dict(a=np.ones((3, 4), np.float32)), "b"),
])
def test_bad_input(kwargs, match):
    with pytest.raises((TypeError, ValueError), match=match):
        helpers.prepare("gemm", **kwargs)
