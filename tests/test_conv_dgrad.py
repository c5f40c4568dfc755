"""conv_dgrad: the grid's reach, stage auto on grid cases, the stages on a realistic layer. (Every
stage over the grid with guard regions, its paths counted: tests/test_stages.py.)"""
import numpy as np
import pytest

import helpers
from helpers import chooser
from helpers.ops.conv_dgrad import random_problem_args
from helpers.runner import path_of

from shapes import case_id, conv_grid

GRID = conv_grid()
STAGES = helpers.stage_names("conv_dgrad")
# stage auto times every candidate per shape: it runs on a subset of the grid (below), not all of it
GRID_STAGES = [s for s in STAGES if not helpers.get_stage("conv_dgrad", s).choose]   # what auto chooses among


def test_grid_is_large_and_awkward():
    assert len(GRID) >= 200
    assert {c["kernel"] for c in GRID} == {1, 2, 3, 5}
    assert {c["stride"] for c in GRID} == {1, 2, 3}
    assert {c["activation"] for c in GRID} == {"none", "relu", "sigmoid", "tanh"}
    assert any(c["h"] != c["w"] for c in GRID) and any(c["h"] == 1 for c in GRID)


def _args(c, seed):
    return random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"],
                               c["padding"], c["activation"], seed=seed)


def auto_subset() -> list:
    """(grid case, stage) pairs: for each stage auto can choose, the first grid cases where it
    is a candidate, taking stride 1 and a stride > 1 where both exist."""
    chosen = []
    for name in GRID_STAGES:
        for strided in (False, True):
            for i, c in enumerate(GRID):
                if (c["stride"] > 1) == strided and name in chooser.candidates(
                        helpers.prepare("conv_dgrad", **_args(c, seed=i)), None)[0]:
                    chosen.append((i, name))
                    break
    return chosen


def test_auto_runs_each_of_its_choices_correctly_on_grid_cases(ctx, tmp_path, monkeypatch):
    """Every stage auto can choose, chosen (the timing replaced by that choice), run through
    auto with guards on grid cases; what auto reports is the chosen stage and its path."""
    pairs = auto_subset()
    fp32 = {s for s in GRID_STAGES if helpers.get_stage("conv_dgrad", s).precision == "fp32"}    # auto answers in fp32
    assert {name for _, name in pairs} == fp32
    for i, name in pairs:
        monkeypatch.setenv("COURSE_CHOICES", str(tmp_path / f"{i}_{name}.json"))   # no cache hit
        monkeypatch.setattr(chooser, "find", lambda p, limit, time_stage, name=name, **kw: {"stage": name})
        args = _args(GRID[i], seed=i)
        res = helpers.check_stage("conv_dgrad", "auto", ctx=ctx, guard=True, **args)
        assert res.name.startswith(helpers.get_stage("conv_dgrad", name).key), (name, case_id(GRID[i]))
        assert res.path == path_of("conv_dgrad", name, ctx=ctx, **args)


def _auto_picks():
    return [next(i for i, c in enumerate(GRID) if c["kernel"] == kernel and c["stride"] == stride
                 and c["k"] >= 8 and c["c"] >= 8) for kernel, stride in ((3, 1), (3, 2), (1, 1))]


@pytest.mark.parametrize("mode", ["model", "exhaustive"])
def test_auto_accounts_for_every_candidate_on_a_few_grid_cases(ctx, tmp_path, monkeypatch, mode):
    """On a stride-1 3x3 case, a strided case and a 1x1 case: every candidate is timed or named with
    why it was not (untried, failed); the fastest timed one runs, its result correct. The model's
    search (the default) ranks every candidate and times at most chooser.TIMED of them;
    COURSE_AUTO=exhaustive times them all (or stops, saying so, once the search costs too much)."""
    monkeypatch.setenv("COURSE_CHOICES", str(tmp_path / "choices.json"))
    monkeypatch.setenv("COURSE_AUTO", mode)
    for i in _auto_picks():
        args = _args(GRID[i], seed=i)
        res = helpers.check_stage("conv_dgrad", "auto", ctx=ctx, guard=True, **args)
        problem = helpers.prepare("conv_dgrad", **args)
        rec = chooser.cached(ctx.devices[0].name)[chooser.shape_key(problem, None)]
        names, _ = chooser.candidates(problem, None)
        assert rec["mode"] == mode and sorted(n for n, _ in rec["ranked"]) == sorted(names)
        assert set(rec["times_ms"]) | set(rec.get("untried", {})) | set(rec.get("failed", {})) == set(names)
        assert rec["stage"] == min(rec["times_ms"], key=rec["times_ms"].get)
        assert res.name.startswith(helpers.get_stage("conv_dgrad", rec["stage"]).key)
        if mode == "model":
            assert 1 <= len(rec["times_ms"]) <= chooser.TIMED
            assert all(why.startswith("not timed") for why in rec.get("untried", {}).values())


def test_a_candidate_that_fails_is_left_out_and_named(ctx, tmp_path, monkeypatch, capsys):
    """A candidate whose result fails its check (here: the model's first, made to) is left out,
    named in the cache and in a printed line; auto runs another, correct stage, and raises nothing."""
    from helpers import runner
    from helpers.engine.check import MismatchError
    monkeypatch.setenv("COURSE_CHOICES", str(tmp_path / "choices.json"))
    monkeypatch.delenv("COURSE_AUTO", raising=False)
    args = _args(GRID[_auto_picks()[0]], seed=1)
    problem = helpers.prepare("conv_dgrad", **args)
    first = chooser.rank("conv_dgrad", [helpers.get_stage("conv_dgrad", n) for n in chooser.candidates(problem, None)[0]],
                         problem, chooser.source_device(ctx.devices[0].name))[0][0].name
    real = runner.time_plan

    def wrong(plan, **kw):
        if plan.stage.name == first:
            raise MismatchError("grad_input: 3 of 120 values differ from the reference (planted)")
        return real(plan, **kw)
    monkeypatch.setattr(runner, "time_plan", wrong)
    res = helpers.check_stage("conv_dgrad", "auto", ctx=ctx, guard=True, **args)
    rec = chooser.cached(ctx.devices[0].name)[chooser.shape_key(problem, None)]
    assert rec["failed"] == {first: "MismatchError: grad_input: 3 of 120 values differ from the reference (planted)"}
    assert rec["stage"] != first and not res.name.startswith(helpers.get_stage("conv_dgrad", first).key)
    assert f"candidate {first} failed and is left out (MismatchError" in capsys.readouterr().out


def test_stages_agree_on_a_realistic_layer(ctx):
    args = random_problem_args(2, 32, 14, 14, 48, 3, 1, 1, "relu", seed=7)
    results = [helpers.run_stage("conv_dgrad", s, ctx=ctx, **args) for s in STAGES]
    for s, r in zip(STAGES, results):
        helpers.check_stage("conv_dgrad", s, ctx=ctx, **args)
        assert r.shape == (2, 32, 14, 14) and r.dtype == np.float32
