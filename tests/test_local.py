"""Chapter 09's tiled stages: the fast path really runs on the grid, and the tile model's counts."""
import pytest

import helpers
from helpers.chapters import local
from helpers.ops.conv_dgrad import random_problem_args
from helpers.runner import prepare, resolve

from helpers.stages import REGISTRY

from shapes import case_id, conv_grid, require_paths

pytestmark = pytest.mark.debug_builds      # breadth: built without the optimiser on a CPU (tests/conftest.py)

TILED = [s.name for s in REGISTRY["conv_dgrad"] if s.family_name == "local" and s.backend == "opencl"]
# the tiled stages' switches (a define whose candidates are 0 and 1), each away from its default:
# test_conv_dgrad grids the defaults, this the other setting, over the same grid with guards
SWITCHES = [(s.name, {k: v}) for s in REGISTRY["conv_dgrad"] if s.family_name == "local" and s.backend == "opencl"
            for k, values in s.tune.items() if sorted(values) == [0, 1] for v in values if v != s.defines[k]]


def test_swizzle_has_its_row_copy_switch():
    assert ("swizzle", {"ROWCOPY": 1}) in SWITCHES


@pytest.mark.parametrize("stage, switch", SWITCHES, ids=[f"{s}-{d}" for s, d in SWITCHES])
def test_switch_matches_reference_with_guards_on_the_grid(ctx, stage, switch):
    paths = {}
    for i, c in enumerate(conv_grid()):
        args = random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"], c["padding"],
                                   c["activation"], seed=i)
        try:
            res = helpers.check_stage("conv_dgrad", stage, ctx=ctx, guard=True, defines=switch, **args)
        except (AssertionError, helpers.GuardViolation) as err:
            raise AssertionError(f"stage {stage} with {switch} failed on {case_id(c)}:\n{err}") from None
        paths[res.path] = paths.get(res.path, 0) + 1
    require_paths(helpers.get_stage("conv_dgrad", stage), paths)


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


def test_bank_model_of_the_stages():
    from helpers.chapters.banks import passes
    tile = {"TX": 32, "TY": 4, "CB": 32, "KC": 4, "XPW": 8, "CPW": 4}
    p = {lay: passes(local.warp_lanes(lay, "weight store", tile)) for lay in local.LAYOUTS}
    assert p == {"prefetch": 1, "transposed": 32, "padded": 4, "swizzle": 1}
    for lay in ("transposed", "padded", "swizzle"):           # float4 reads: 4 quarter-warp passes
        assert passes(local.warp_lanes(lay, "dy read", tile)) == 4
        assert passes(local.warp_lanes(lay, "weight read", tile)) == 4
    # every weight has its own word in each layout, inside a half of the slab
    s = local._shape(tile, 3, 3)
    for lay, row in (("transposed", 32), ("padded", 36), ("swizzle", 32)):
        words = {local.weight_word(lay, s, r, c) for r in range(s["ROWS"]) for c in range(32)}
        assert len(words) == 32 * s["ROWS"] and max(words) < row * s["ROWS"]


def ncu_rows():
    """Every row of the ncu records in results/local (python -m helpers.ncu_banks writes them),
    with the tile (and the ROWCOPY switch) the model needs."""
    import json
    from helpers.analysis.results import RESULTS
    paths = sorted((RESULTS / "local").glob("ncu_banks_*conv_dgrad_nvidia-h200.json"))
    assert len(paths) == 2, paths
    for path in paths:
        for r in json.loads(path.read_text())["rows"]:
            d = {k: r["defines"][k] for k in ("TX", "TY", "CB", "KC", "XPW", "CPW") + ("ROWCOPY",) * ("ROWCOPY" in r["defines"])}
            yield f"{path.name}: {r['twin']} {d}", r, d, dict(N=r["n"], C=64, H=56, W=56, K=64, OH=56, OW=56, KH=3, KW=3)


def test_simulator_reproduces_the_recorded_ncu_store_counts():
    """results/local holds ncu's counts for the CUDA twins; the model must stay within 1 %
    (ROWCOPY=1's 28,672 and 14,656 included)."""
    rows = list(ncu_rows())
    assert any(d.get("ROWCOPY") == 1 for _, _, d, _ in rows)
    for name, r, d, dims in rows:
        sim = local.launch_conflicts(r["twin"][3:], d, dims)["store"]
        assert abs(sim - r["shared_st_conflicts"]) <= max(0.01 * r["shared_st_conflicts"], 2500), name


def test_simulator_reproduces_the_recorded_ncu_load_counts():
    """The dy row's last float4, narrowed to 8 bytes by the compiler (LDS.64), conflicts 2-way per
    half-warp: 24 extra passes per warp and chunk, the load conflicts ncu counts within 3 %."""
    for name, r, d, dims in ncu_rows():
        if r["twin"].startswith("10"):
            sim = local.launch_conflicts(r["twin"][3:], d, dims)["load"]
            assert abs(sim - r["shared_ld_conflicts"]) <= 0.03 * r["shared_ld_conflicts"], name


def test_dy_read_is_as_wide_as_the_words_used():
    from helpers.chapters.banks import passes
    tile = {"TX": 32, "TY": 4, "CB": 32, "KC": 4, "XPW": 8, "CPW": 4}           # 10 words: 4 + 4 + 2
    widths = [len(local.warp_lanes("swizzle", "dy read", tile, u=u)[0]) for u in range(3)]
    assert widths == [4, 4, 2]
    assert passes(local.warp_lanes("swizzle", "dy read", tile, u=2)) == 4       # ideal 2 (half-warps)
    assert len(local.warp_lanes("swizzle", "dy read", {**tile, "XPW": 4}, u=1)[0]) == 2   # 6 words


def test_row_copy_removes_the_dy_store_conflicts():
    for ty in (4, 8):
        tile = {"TX": 32, "TY": ty, "CB": 32, "KC": 4, "XPW": 8, "CPW": 4}
        assert local.store_extra("swizzle", "dy store", tile) > 0
        assert local.store_extra("swizzle", "dy store", {**tile, "ROWCOPY": 1}) == 0
        dims = dict(N=8, C=64, H=56, W=56, K=64, OH=56, OW=56, KH=3, KW=3)
        before = local.launch_conflicts("transposed", tile, dims)["store"]
        after = local.launch_conflicts("swizzle", {**tile, "ROWCOPY": 1}, dims)["store"]
        assert after <= 0.05 * before
    with pytest.raises(ValueError, match="ROWCOPY is a switch"):
        local.check_params({"TX": 32, "TY": 4, "CB": 32, "KC": 4, "XPW": 8, "CPW": 4, "VEC4": 1, "ROWCOPY": 2})


def test_passes_ignores_idle_lanes():
    from helpers.chapters.banks import passes
    assert passes([[0]] + [None] * 31) == 1
    assert passes([[4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3] for i in range(8)] + [None] * 24) == 1


def test_profile_stage_runs_one_stage_once_on_a_layer(ctx, capsys):
    """The tool profilers wrap (results/local records ncu commands through it)."""
    from helpers.profile_stage import main, profile
    out = profile("conv_dgrad", "local_tile", "tiny16@12", device=ctx)
    assert out["stage"] == "09_local_tile" and out["path"] == "only" and len(out["steps"]) == 1
    assert out["defines"]["TX"] == 16 and out["max_error"] >= 0
    assert main(["conv_dgrad", "local_tile", "--layer", "res0@0"]) == 2
    assert "no layer 'res0@0'" in capsys.readouterr().err


def test_ncu_record_is_parsed_from_ncu_csv_and_the_launch_lines():
    """python -m helpers.ncu_banks pairs ncu's CSV rows (by kernel ID) with the profiled launches,
    and refuses output that lacks a launch (no silent short record)."""
    import json
    from helpers import ncu_banks
    runs, table = [], ['"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"']
    for i, (twin, d) in enumerate(ncu_banks.CONFIGS):
        runs.append(ncu_banks.MARK + json.dumps({"stage": f"{10 - (twin == 'prefetch'):02d}_{twin}_cuda", "layer": "res64@56",
                                                 "n": 8, "defines": d, "steps": [["conv_dgrad", [28672, 2], [128, 1]]],
                                                 "max_error": 1e-6}))
        table += [f'"{i}","conv_dgrad","{m}","","{1000 * i + j:,}"' for j, m in enumerate(ncu_banks.METRICS)]
    rows = ncu_banks.parse("\n".join(["==PROF== Connected", *runs, *table]))
    assert [r["twin"] for r in rows] == [f"{10 - (t == 'prefetch'):02d}_{t}" for t, _ in ncu_banks.CONFIGS]
    assert rows[4]["shared_st_conflicts"] == 4001 and rows[4]["defines"]["ROWCOPY"] == 1
    assert rows[0]["grid"] == [224, 2, 1] and rows[0]["block"] == [128, 1, 1]
    with pytest.raises(RuntimeError, match="expected 7 launches"):
        ncu_banks.parse("\n".join(runs[:-1] + table))


def test_ncu_limits_record_keeps_fractions_and_counts():
    """The limits set (python -m helpers.ncu_banks --set limits): ncu's ratios stay fractions,
    its counts integers, one row per configuration, the FFMA share computable."""
    import json
    from helpers import ncu_banks
    configs, metrics, n, _, _ = ncu_banks.SETS["limits"]
    assert [t for t, _ in configs] == ["prefetch", "transposed", "padded", "swizzle", "hoisted", "hoisted"] and n == 64
    runs, table = [], ['"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"']
    for i, (twin, d) in enumerate(configs):
        runs.append(ncu_banks.MARK + json.dumps({"stage": f"10_{twin}_cuda", "layer": "res64@56", "n": 64, "defines": d,
                                                 "steps": [["conv_dgrad", [28672, 2], [128, 1]]], "max_error": 1e-6}))
        table += [f'"{i}","conv_dgrad","{m}","","{"0.53" if "stalled" in m or "pct" in m else f"{1000 * i + 32:,}"}"'
                  for m in metrics]
    rows = ncu_banks.parse("\n".join([*runs, *table]), "limits")
    assert rows[2]["stall_short_scoreboard"] == 0.53 and rows[2]["issue_active_pct"] == 0.53
    assert rows[2]["instructions"] == 2032 and rows[2]["ffma_thread_instructions"] == 2032
    assert {f"stall_{r}" for r in ncu_banks.STALLS} <= set(rows[4])
    with pytest.raises(RuntimeError, match="expected 6 launches"):
        ncu_banks.parse("\n".join(runs[:-1] + table), "limits")


def test_recorded_ffma_counts_are_the_tile_models():
    """ncu's FFMA count on each recorded twin (results/local/ncu_limits_*) is the tile model's
    multiply-adds (idle positions of the last tile in a row included): chapter 10 quotes both."""
    import json
    from helpers.analysis.results import RESULTS
    from helpers.chapters.bank_evidence import RES64
    paths = sorted((RESULTS / "local").glob("ncu_limits_conv_dgrad_*.json"))
    assert paths, "chapter 10 reads an ncu limits record; none is in results/local/"
    for path in paths:
        for r in json.loads(path.read_text())["rows"]:
            assert r["max_abs_error"] < 1e-3
            assert r["ffma_thread_instructions"] == local.tile_fmas(dict(RES64, N=r["n"]), r["defines"]), r["twin"]
    rows = {(r["twin"], r["defines"]["TY"]): r for r in json.loads(paths[0].read_text())["rows"]}
    # the change of 10_hoisted, at 10_padded's tile: fewer instructions for the same multiply-adds
    assert rows[("10_hoisted", 8)]["instructions"] < rows[("10_padded", 8)]["instructions"]


def test_recorded_defaults_are_never_slower_than_the_naive_stage():
    """Issue 9's rule for a device nobody tuned for, on the recorded runs with the tuned values left
    out (COURSE_TUNED=none, tag untuned): the direct ladder's last stage and the chooser, with the
    registry's defaults, at least as fast as the naive stage on every layer (chapter 10 prints them)."""
    from helpers.analysis.results import find, untuned
    runs = [run for ls in ("resnet50", "edge") for run in find("conv_dgrad", ls, tag="untuned")]
    assert len(runs) >= 2, "results/ holds the H200's untuned runs over resnet50 and edge"
    for run in runs:
        assert untuned(run)
        for layer in {r["layer"] for r in run["rows"]}:
            t = {r["stage"]: r["median_ms"] for r in run["rows"] if r["layer"] == layer}
            for stage in ("hoisted", "auto"):
                assert t[stage] <= t["naive"], f"{run['file']}: {stage} slower than naive on {layer}"
