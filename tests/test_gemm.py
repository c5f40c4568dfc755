"""Op gemm: other tiles, the float4 path, tile constraints, bad input (every registered stage over
the awkward sizes of tests/shapes.py with guard regions: tests/test_stages.py)."""
import numpy as np
import pytest

import helpers
from helpers.ops.gemm import random_args, tile_requires

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
