"""Chapter 09's tiled stages: the fast path really runs on the grid, and the tile model's counts."""
import pytest

import helpers
from helpers import local
from helpers.ops.conv_dgrad import random_problem_args
from helpers.runner import prepare, resolve

from shapes import conv_grid

TILED = ("local_tile", "register_block", "prefetch", "transposed", "padded", "swizzle")


@pytest.mark.parametrize("stage", TILED)
def test_tiled_path_runs_on_the_stride_one_grid(ctx, stage):
    """A tiled stage that silently fell back everywhere would still pass the grid test: count."""
    ran, strided = 0, 0
    for i, c in enumerate(conv_grid()):
        p = prepare("conv_dgrad", **random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"],
                                                        c["stride"], c["padding"], c["activation"], seed=i))
        s, _ = resolve("conv_dgrad", stage, p, ctx, None)
        ran += s.name == stage
        strided += c["stride"] != 1 and s.name == stage
    assert strided == 0
    # 69 stride-1 cases; with their default tiles the blocked stages leave the 30 5x5 ones to stage 08
    minimum = {"local_tile": 69}.get(stage, 39)
    assert ran >= minimum, f"{stage} ran on {ran} grid cases, expected >= {minimum}"


def test_bad_tile_parameters_are_errors_not_fallbacks(ctx):
    args = random_problem_args(1, 8, 8, 8, 8, 3, 1, 1, "none", seed=0)
    with pytest.raises(ValueError, match="XPW=3 must divide TX=32"):
        helpers.run_stage("conv_dgrad", "register_block", ctx=ctx, defines={"XPW": 3}, **args)
    with pytest.raises(ValueError, match="local memory"):
        helpers.run_stage("conv_dgrad", "prefetch", ctx=ctx, defines={"KC": 32, "CB": 64, "CPW": 8}, **args)


def test_tile_facts_count_by_hand():
    f = local.tile_facts({"TX": 32, "TY": 4, "CB": 32, "KC": 8, "XPW": 4, "CPW": 4})
    assert f["LS"] == 8 * 4 * 8
    assert f["patch"] == 8 * 6 * 34 and f["weights"] == 32 * 8 * 9
    assert f["local_bytes"] == 4 * (8 * 6 * 34 + 32 * 8 * 9)
    assert local.tile_facts({"TX": 16, "TY": 4, "CB": 4, "KC": 8})["LS"] == 256   # XPW = CPW = 1


def test_reuse_model():
    dims = dict(N=1, C=64, H=56, W=56, K=64, OH=56, OW=56, KH=3, KW=3)
    naive = local.reuse(dims)
    assert naive["dy"] == pytest.approx(64 * 9 * 56 * 56 / (56 * 56 - 0) / 1, rel=0)  # C*9 per dy value
    tiled = local.reuse(dims, {"TX": 32, "TY": 4, "CB": 32, "KC": 8})
    # each dy value: once per channel block (2), times the halo overhead (6*34)/(4*32)
    assert tiled["dy"] == pytest.approx(2 * (6 * 34) / (4 * 32) * (2 * 14 * 4 * 32) / (56 * 56))
    # each weight: once per tile of positions (2 x 14)
    assert tiled["w"] == pytest.approx(2 * 14)
    assert tiled["flops_per_byte"] > 10 * naive["flops_per_byte"]


def test_fitted_tile_keeps_small_planes_busy():
    p = prepare("conv_dgrad", **random_problem_args(1, 8, 7, 7, 8, 3, 1, 1, "none", seed=0))
    f = local.fitted(p, {"TX": 32, "TY": 4, "CB": 32, "KC": 4, "XPW": 8, "CPW": 4})
    assert (f["TX"], f["TY"]) == (8, 8)
    p = prepare("conv_dgrad", **random_problem_args(1, 8, 14, 14, 8, 3, 1, 1, "none", seed=0))
    assert local.jit_tile(p, {"TX": 32, "TY": 4, "CB": 32, "KC": 4, "XPW": 4, "CPW": 4}) == {"TX": 16, "TY": 8}
