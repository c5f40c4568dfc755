"""gemm_core.h's GEMM_LDS4 = 1 (each work-item's block of C in runs of 4 rows and 4 columns, read
from the tiles as float4s): every stage on the tile loop, over its op's grid with guard regions,
with 4x4 and 8x8 blocks, alone and with GEMM_PREFETCH; block sizes it cannot read in float4s are
refused; planted bugs in the new row and column mapping are caught.

GEMM_LDS4 = 0 (every registered default) is the tile loop the other tests check."""
import pytest

import helpers
from helpers.ops import gemm

from test_gemm_prefetch import BIG, STAGES, check_spread, planted

pytestmark = pytest.mark.debug_builds      # breadth: built without the optimiser on a CPU (tests/conftest.py)

LDS4 = {"GEMM_LDS4": 1}
SETTINGS = {"default": LDS4, "big": {**BIG, **LDS4}, "big+prefetch": {**BIG, **LDS4, "GEMM_PREFETCH": 1},
            "tall": {"TM": 128, "TN": 32, "TK": 8, "WM": 8, "WN": 4, **LDS4}}


def test_every_gemm_core_stage_declares_the_switch():
    for op, name in STAGES:
        assert helpers.get_stage(op, name).defines["GEMM_LDS4"] == 0, (op, name)   # the recorded runs


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("op, stage", STAGES, ids=[f"{op}-{s}" for op, s in STAGES])
def test_lds4_matches_reference_with_guards(ctx, op, stage, setting):
    """The grid's cases the stage runs itself, spread over the grid: about 5 with the default
    tiles, 2 with each other setting."""
    check_spread(ctx, op, stage, SETTINGS[setting], want=5 if setting == "default" else 2,
                 offset=int(setting != "default"))


def test_blocks_that_are_not_float4_runs_are_refused(ctx):
    with pytest.raises(ValueError, match="WM=2 and WN=4 must be multiples of 4"):
        helpers.run_stage("gemm", "register_blocked", ctx=ctx, defines={"TM": 64, "TN": 64, "WM": 2, "WN": 4, **LDS4},
                          **gemm.random_args(16, 16, 16))


# which element of C a work-item holds, planted wrong: the epilogue writes acc[i][j] where the
# loads did not put it
BUGS = {
    "row_runs_swapped": ("#define GEMM_ROW(i) (4 * get_local_id(1) + ((i) / 4) * (4 * GEMM_RM) + (i) % 4)",
                         "#define GEMM_ROW(i) (4 * get_local_id(1) + ((i) % 4) * (4 * GEMM_RM) + (i) / 4)"),
    "column_stride_of_rows": ("#define GEMM_COL(j) (4 * get_local_id(0) + ((j) / 4) * (4 * GEMM_RN) + (j) % 4)",
                              "#define GEMM_COL(j) (4 * get_local_id(0) + ((j) / 4) * (4 * GEMM_RM) + (j) % 4)"),
}


@pytest.mark.parametrize("bug", list(BUGS))
def test_planted_mapping_bugs_are_caught(ctx, monkeypatch, bug):
    name = planted(monkeypatch, "gemm", "register_blocked", *BUGS[bug])
    with pytest.raises((helpers.MismatchError, helpers.GuardViolation)):
        helpers.check_stage("gemm", name, ctx=ctx, guard=True, defines={"TM": 128, "TN": 64, "WM": 8, "WN": 8, **LDS4},
                            **gemm.random_args(130, 70, 36, seed=2))
