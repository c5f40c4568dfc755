"""Stage auto (helpers/chooser.py): candidates from the registry, the workspace limit, the
on-disk cache per device and shape, and that what it runs is correct."""
import json

import numpy as np
import pytest

import helpers
from helpers import chooser, runner
from helpers.ops.conv_dgrad import random_problem_args
from helpers.ops.conv_forward import random_problem_args as fwd_args
from helpers.ops.conv_wgrad import random_problem_args as wgrad_args
from helpers.runner import workspace_bytes

ARGS = random_problem_args(2, 8, 9, 7, 12, 3, 2, 1, "relu", seed=5)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "choices.json"
    monkeypatch.setenv("COURSE_CHOICES", str(path))
    return path


def test_candidates_are_the_registry_minus_auto():
    p = helpers.prepare("conv_dgrad", **ARGS)
    names, excluded = chooser.candidates(p, 2**40)
    assert "auto" not in names and "auto" not in excluded
    assert set(names) | set(excluded) == set(helpers.stage_names("conv_dgrad")) - {"auto"}
    assert "winograd" in excluded and "stride 2" in excluded["winograd"]


def test_auto_never_chooses_a_half_precision_stage():
    """auto answers an fp32 problem in fp32: a reduced-precision stage that happened to be fastest
    would hand back a rounded gradient."""
    from helpers.stages import get_stage
    names, excluded = chooser.candidates(helpers.prepare("conv_dgrad", **ARGS), None)
    assert all(get_stage("conv_dgrad", n).precision == "fp32" for n in names)
    assert "naive_fp16" in excluded and "fp16" in excluded["naive_fp16"]


def test_winograd4_is_a_candidate_where_it_runs_itself():
    from helpers.ops.conv_dgrad import random_problem_args as args
    names, _ = chooser.candidates(helpers.prepare("conv_dgrad", **args(1, 8, 9, 7, 16, 3, 1, 1)), None)
    assert {"winograd", "winograd4"} <= set(names)
    names, excluded = chooser.candidates(helpers.prepare("conv_dgrad", **args(1, 8, 9, 7, 12, 3, 1, 1)), None)
    assert "winograd" in names and "K >= 16" in excluded["winograd4"]


def test_the_weight_gradient_s_phase_split_is_a_candidate_on_strided_layers_only():
    from helpers.ops.conv_wgrad import random_problem_args as args
    names, excluded = chooser.candidates(helpers.prepare("conv_wgrad", **args(2, 8, 9, 7, 12, 3, 2, 1)), None)
    assert {"igemm", "igemm_phases"} <= set(names) and "stride 2" in excluded["winograd"]
    names, excluded = chooser.candidates(helpers.prepare("conv_wgrad", **args(2, 8, 9, 7, 12, 3, 1, 1)), None)
    assert "igemm_phases" not in names and "runs igemm instead" in excluded["igemm_phases"]


def test_limit_excludes_stages_with_a_workspace():
    p = helpers.prepare("conv_dgrad", **ARGS)
    names, excluded = chooser.candidates(p, 0)
    assert "gemm_col2im" not in names and "igemm_delta" not in names
    assert "workspace" in excluded["gemm_col2im"] and "igemm_analytic" in names


def test_auto_is_correct_and_cached_per_device_and_shape(ctx, cache, monkeypatch):
    helpers.check_stage("conv_dgrad", "auto", ctx=ctx, guard=True, **ARGS)
    data = json.loads(cache.read_text())
    device = ctx.devices[0].name.strip()
    (key, rec), = data[device].items()
    assert "s2 p1 relu" in key and rec["stage"] == min(rec["times_ms"], key=rec["times_ms"].get)

    def no_timing(*a, **k):
        raise AssertionError("a cached shape was timed again")
    monkeypatch.setattr(chooser, "find", no_timing)                        # a cache hit times nothing
    plan = helpers.plan_stage("conv_dgrad", "auto", ctx=ctx, **ARGS)
    assert plan.stage.name == rec["stage"] and plan.requested.name == "auto"
    with pytest.raises(AssertionError, match="timed again"):               # another shape is timed
        helpers.plan_stage("conv_dgrad", "auto", ctx=ctx, **random_problem_args(1, 8, 9, 7, 12, 3, 1, 1))


def test_limit_of_zero_runs_a_stage_without_workspace(ctx, cache):
    plan = helpers.plan_stage("conv_dgrad", "auto", ctx=ctx, workspace_limit=0, **ARGS)
    assert workspace_bytes("conv_dgrad", plan.stage.name, ctx=ctx, **ARGS) == 0 and not plan.workspace
    rec = next(iter(chooser.cached(ctx.devices[0].name).values()))
    assert "gemm_col2im" in rec["excluded"]


def test_the_budget_is_the_engines_workspace_limit(ctx, cache):
    """One notion of a workspace limit: auto's candidates are those whose runner.workspace_bytes
    fit the plan's workspace_limit, and the cache keeps one entry per budget."""
    p = helpers.prepare("conv_dgrad", **ARGS)
    limit = workspace_bytes("conv_dgrad", "igemm_delta", ctx=ctx, **ARGS)
    names, excluded = chooser.candidates(p, limit)
    assert "igemm_delta" in names and "gemm_col2im" in excluded
    assert workspace_bytes("conv_dgrad", "gemm_col2im", ctx=ctx, **ARGS) > limit
    assert chooser.shape_key(p, limit) != chooser.shape_key(p, None)


def test_negative_limit_is_refused(ctx, cache):
    with pytest.raises(ValueError, match="workspace_limit must be >= 0"):
        helpers.plan_stage("conv_dgrad", "auto", ctx=ctx, workspace_limit=-1, **ARGS)


def test_chooser_rows_compare_auto_with_the_best_stage_and_leave_untuned_runs_out(monkeypatch):
    """results.chooser_rows: each auto row beside the fastest other float32 stage recorded up to its
    run's date, and beside its own run's; a run with the tuned values left out is not compared."""
    from helpers.analysis import results

    def run(file, date, rows, tuned="results/tuned.json where it has the device"):
        return {"file": file, "kind": "bench", "op": "conv_dgrad", "layer_set": "s", "date": date,
                "device": {"name": "GPU X"}, "settings": {"tuned_parameters": tuned},
                "rows": [{"layer": "a", "stage": s, "key": k, "median_ms": ms, "ran": ran} for s, k, ms, ran in rows]}
    recorded = [run("early.json", "1", [("winograd4", "12_winograd4", 1.0, "12_winograd4")]),
                run("auto.json", "2", [("auto", "11_auto", 1.02, "12_winograd4"),
                                       ("winograd4", "12_winograd4", 1.01, "12_winograd4")]),
                run("later.json", "3", [("winograd4", "12_winograd4", 0.5, "12_winograd4")]),
                run("untuned.json", "4", [("auto", "11_auto", 3.0, "12_winograd4")], tuned="none: the defaults")]
    monkeypatch.setattr(results, "load", lambda pattern="*.json": recorded)
    rows = results.chooser_rows("s", "GPU X")
    assert [(r["file"], r["best_file"]) for r in rows] == [("auto.json", "early.json")]
    assert rows[0]["ratio"] == pytest.approx(1.02) and rows[0]["run_ratio"] == pytest.approx(1.02 / 1.01)


def test_two_modes_splits_a_bimodal_timing_and_leaves_a_single_one_alone():
    from helpers.analysis.summary import two_modes
    assert two_modes([0.196, 0.195, 0.219, 0.197, 0.221, 0.196]) == ((4, 0.195, 0.197), (2, 0.219, 0.221))
    assert two_modes([0.1755, 0.1783, 0.1790, 0.1821]) is None      # a spread, no gap
    assert two_modes([0.2]) is None


def test_the_recorded_repetitions_of_res512_7_fall_in_two_modes():
    """Chapter 11 reads this record to explain its worst chooser row: on the H200, winograd4 on
    res512@7 runs at one of two speeds from launch to launch; the other stride-1 layers do not."""
    from helpers.analysis.results import load
    from helpers.analysis.summary import two_modes
    runs = [r for r in load("conv_dgrad_resnet50_wino4_repeats_*.json")]
    assert runs, "results/conv_dgrad_resnet50_wino4_repeats_nvidia-h200.json is missing"
    rows = {r["layer"]: r["times_ms"] for r in runs[0]["rows"]}
    assert all(len(t) == 120 for t in rows.values())
    fast, slow = two_modes(rows["res512@7"])
    assert fast[0] + slow[0] == 120 and slow[1] > 1.05 * fast[2]
    assert all(two_modes(rows[l]) is None for l in ("res64@56", "res128@28", "res256@14"))


def test_the_best_ranked_are_built_side_by_side_and_checked_against_one_reference(ctx, cache, monkeypatch):
    """A first call on a shape: the kernels of the TIMED best-ranked candidates are compiled in
    threads while the reference is computed, once for all of them; each is then checked against it
    and timed (per candidate, the reference cost as much again as a build on a large layer)."""
    import threading
    import pyopencl as cl
    from helpers.ops import op_module
    from helpers.engine import build as build_module
    mod, real_reference, real_compile = op_module("conv_dgrad"), op_module("conv_dgrad").reference, cl.Program.build
    monkeypatch.setattr(build_module, "_programs", {})       # no program an earlier test built
    references, compiles = [], []
    monkeypatch.setattr(mod, "reference", lambda *a, **k: references.append(1) or real_reference(*a, **k))
    monkeypatch.setattr(cl.Program, "build", lambda self, *a, **k: (
        compiles.append(threading.current_thread() is threading.main_thread()), real_compile(self, *a, **k))[1])
    monkeypatch.setattr(chooser, "BUDGET_S", 1e9)            # the TIMED all timed, however slow the machine
    args = random_problem_args(2, 8, 11, 9, 12, 3, 1, 1, "none", seed=7)
    plan = helpers.plan_stage("conv_dgrad", "auto", ctx=ctx, **args)
    rec = next(iter(chooser.cached(ctx.devices[0].name).values()))
    assert len(rec["times_ms"]) == chooser.TIMED and plan.stage.name in rec["times_ms"]
    assert len(references) == 1, "each candidate computed the reference again"
    assert len(compiles) == chooser.TIMED, "a timed candidate was compiled again, or one was not"
    assert not any(compiles), "a candidate was compiled on the main thread, not side by side"
    assert 0 < rec["warm_seconds"] <= rec["seconds"]
    sides = rec["warm_sides"]          # where the first call's time went: the reference beside the builds
    assert set(sides) == {"reference", "builds"} and 0 < max(sides.values()) <= rec["warm_seconds"] + 1e-3


def test_an_op_no_device_of_its_kind_has_recorded_takes_another_kinds_order_of_the_stages():
    """A CPU recorded for the input gradient alone: its forward pass is ranked by the GPU's runs
    (else every forward stage would be unranked, and the first timed the last registered)."""
    from helpers.chooser_model import recorded, source_device
    runs = recorded()
    cpu = source_device("pthread-Some CPU", "CPU", "GenuineIntel", "conv_dgrad")
    assert cpu is not None and "conv_dgrad" in runs[cpu] and "conv_forward" not in runs[cpu]
    gpu = source_device("pthread-Some CPU", "CPU", "GenuineIntel", "conv_forward")
    assert gpu is not None and gpu != cpu and "conv_forward" in runs[gpu]
    assert source_device("pthread-Some CPU", "CPU", "GenuineIntel") == cpu      # without an op: as before


def test_candidates_are_judged_at_the_parameters_they_would_build_with():
    """A budget that stage 06's registry slices fit and its tuned fill (SPLIT_TARGET: more, shorter
    slices, more partial sums) does not: with the device's values passed in, the stage is excluded up
    front, its workspace named, instead of being timed and failing its plan."""
    from helpers.ops.conv_wgrad import random_problem_args
    from helpers.stages import get_stage
    p = helpers.prepare("conv_wgrad", **random_problem_args(8, 64, 14, 14, 64, 1, 1, 0, "none"))
    stage = get_stage("conv_wgrad", "igemm_blocked")
    plain = chooser.stage_workspace(stage, p, dict(stage.defines))
    tuned = {stage.key: {"SPLIT_TARGET": 4096, "TK": 16, "SLICE": 1024}}
    filled = chooser.stage_workspace(stage, p, {**stage.defines, **tuned[stage.key]})
    assert filled > plain
    names, _ = chooser.candidates(p, plain)
    assert "igemm_blocked" in names
    names, excluded = chooser.candidates(p, plain, tuned)
    assert "igemm_blocked" not in names and "MiB > budget" in excluded["igemm_blocked"]


def test_the_benchmark_row_of_auto_says_where_its_first_call_went(ctx, cache):
    """bench's auto row carries the choice's record: the reference and builds side by side, then
    the candidates timed, within the first call's seconds (what the zoo's slow first calls are
    taken apart by)."""
    from helpers import bench
    out = bench.run("conv_dgrad", ["auto"], "ci", ctx=ctx, repeats=3, warmup=0, vendor=False, peak=False,
                    progress=False)
    row = out["rows"][0]
    choice = row["choice"]
    assert helpers.get_stage("conv_dgrad", choice["stage"]).key == row["ran"] and choice["times_ms"]
    assert set(choice["warm_sides"]) == {"reference", "builds"}
    assert choice["warm_seconds"] <= choice["seconds"] <= row["first_call_s"]
    assert set(choice["candidate_seconds"]) == set(choice["times_ms"])
    assert choice["warm_seconds"] + sum(choice["candidate_seconds"].values()) <= choice["seconds"] + 1e-2


SPOT_CASES = {   # op: (arguments of a layer with 4 images and 5 filters, the spot's output axis)
    "conv_forward": (lambda: fwd_args(4, 6, 9, 8, 5, 3, 1, 1, seed=3, activation="relu"), 0),
    "conv_dgrad": (lambda: random_problem_args(4, 6, 9, 8, 5, 3, 2, 1, "sigmoid", seed=3), 0),
    "conv_wgrad": (lambda: wgrad_args(4, 6, 9, 8, 5, 3, 1, 1, "relu", seed=3), 1),
}


@pytest.mark.parametrize("op", SPOT_CASES)
def test_auto_checks_its_candidates_on_the_first_and_last_image_or_filter(ctx, op):
    """auto's reference (runner.spot_reference) is the whole reference at the spot's outputs (the
    first and last image; the weight gradient's first and last filter), from a sub-problem; the check
    with it fails where a spot output is wrong, and does not look elsewhere (its blind spot, which
    the grid tests and the benchmark's full checks cover)."""
    make, axis = SPOT_CASES[op]
    args = make()
    problem = runner.prepare(op, **args)
    full, full_mag = runner.reference_of(op, problem, "fp32")
    expected, magnitude, select = runner.spot_reference(op, problem)
    (name, sel), = select.items()
    assert sel[axis].tolist() == [0, problem.outputs[name][axis] - 1]
    np.testing.assert_allclose(expected[name], full[name][sel], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(magnitude[name], full_mag[name][sel], rtol=1e-12, atol=1e-12)
    plan = helpers.plan_stage(op, helpers.stage_names(op)[0], ctx=ctx, **args)
    plan.enqueue()
    good = plan.outputs()
    runner.check_plan(plan, (expected, magnitude, select))

    def corrupt(index):
        bad = {k: v.copy() for k, v in good.items()}
        bad[name][(slice(None),) * axis + (index,)] += 1.0
        plan.outputs = lambda: bad
    corrupt(-1)
    with pytest.raises(helpers.MismatchError):
        runner.check_plan(plan, (expected, magnitude, select))
    corrupt(1)                                # not in the spot
    runner.check_plan(plan, (expected, magnitude, select))


def test_no_spot_where_the_axis_is_short_or_the_weight_gradient_grouped():
    """A layer of 2 images (2 filters) is checked whole; so is a grouped weight gradient, whose
    filters belong to groups."""
    assert runner.spot_problem("conv_dgrad", runner.prepare("conv_dgrad", **random_problem_args(2, 4, 6, 6, 4))) is None
    grouped = wgrad_args(3, 8, 6, 6, 8, 3, 1, 1, seed=0)
    grouped["weight_shape"] = (8, 2, 3, 3)
    assert runner.spot_problem("conv_wgrad", runner.prepare("conv_wgrad", groups=4, **grouped)) is None
    assert runner.spot_problem("batchnorm_forward", None) is None
