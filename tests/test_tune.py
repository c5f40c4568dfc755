"""Tuned values that follow the device (helpers/tuned_values.py) and `./course tune` (helpers/tune.py):
inheritance by vendor and architecture from made-up device descriptions, the cache's location,
the chooser searching again when the values under it change, a search that resumes after an
interruption, and one-line errors for bad input."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import helpers
from helpers import chooser, tune, tuned_values
from helpers.tuning_trials import Trial
from helpers.ops.conv_dgrad import random_problem_args

ROOT = Path(__file__).resolve().parent.parent


def device(name, vendor="nvidia", arch="sm_90", kind="GPU"):
    return {"name": name, "vendor": vendor, "arch": arch, "type": kind}


H200, H100 = device("NVIDIA H200"), device("NVIDIA H100 80GB HBM3")
A100, RADEON = device("NVIDIA A100-SXM4-80GB", arch="sm_80"), device("gfx1100", vendor="amd", arch="gfx1100")


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A recorded file with the H200 and an A100, and an empty cache of the learner's."""
    recorded, cache = tmp_path / "tuned.json", tmp_path / "cache" / "tuned.json"
    recorded.write_text(json.dumps({"devices": {
        "NVIDIA H200": {"describe": H200, "conv_dgrad": {"08_width": {"defines": {"WG": 64, "XPW": 7}},
                                                         "12_winograd4": {"defines": {"TM": 128}}}},
        "NVIDIA A100-SXM4-80GB": {"describe": A100, "conv_dgrad": {"08_width": {"defines": {"WG": 128, "XPW": 8}}}},
    }}))
    monkeypatch.setattr(tuned_values, "TUNED", recorded)
    monkeypatch.setenv("COURSE_TUNE_CACHE", str(cache))
    monkeypatch.delenv("COURSE_TUNED", raising=False)
    tuned_values.reload()
    yield recorded, cache
    tuned_values.reload()


def test_exact_matches_win(files):
    t = tuned_values.tuned_for("conv_dgrad", "08_width", H200)
    assert t.defines == {"WG": 64, "XPW": 7} and t.source == "results/tuned.json for this device"


def test_the_same_architecture_comes_before_the_same_vendor(files):
    """An H100 (sm_90) takes the H200's values, not the A100's; an A100-like sm_80 GPU the A100's."""
    t = tuned_values.tuned_for("conv_dgrad", "08_width", H100)
    assert t.defines == {"WG": 64, "XPW": 7} and t.inherited
    assert "inherited from NVIDIA H200" in t.source and "same vendor and architecture, sm_90" in t.source
    t = tuned_values.tuned_for("conv_dgrad", "08_width", device("NVIDIA A30", arch="sm_80"))
    assert t.defines == {"WG": 128, "XPW": 8} and "A100" in t.source


def test_the_same_vendor_when_no_architecture_matches(files):
    t = tuned_values.tuned_for("conv_dgrad", "12_winograd4", device("NVIDIA GeForce RTX 4090", arch="sm_89"))
    assert t.defines == {"TM": 128} and "same vendor (nvidia), another architecture" in t.source


def test_another_vendor_or_a_cpu_gets_the_defaults(files):
    for d in (RADEON, device("pthread-AMD EPYC", vendor="authenticamd", arch="cpu:pthread-AMD EPYC", kind="CPU"),
              device("NVIDIA H200 look-alike CPU", kind="CPU")):
        t = tuned_values.tuned_for("conv_dgrad", "08_width", d)
        assert t.defines == {} and t.source.startswith("the registry's defaults")


def test_the_learners_cache_wins_and_fresh_leaves_the_recorded_entry_out(files, monkeypatch):
    recorded, cache = files
    tuned_values.record(cache, H200, {"conv_dgrad": {"08_width": {"defines": {"WG": 32}}}})
    assert tuned_values.tuned_for("conv_dgrad", "08_width", H200).defines == {"WG": 32}
    assert tuned_values.tuned_for("conv_dgrad", "12_winograd4", H200).source == "results/tuned.json for this device"
    monkeypatch.setenv("COURSE_TUNED", "fresh")
    tuned_values.reload()
    assert tuned_values.tuned_for("conv_dgrad", "12_winograd4", H200).defines == {}    # the recorded entry is left out
    assert tuned_values.tuned_for("conv_dgrad", "08_width", H200).defines == {"WG": 32}
    monkeypatch.setenv("COURSE_TUNED", "none")
    tuned_values.reload()
    assert (tuned_values.tuned_for("conv_dgrad", "08_width", H200).source
            == "the registry's defaults (COURSE_TUNED=none)")
    monkeypatch.setenv("COURSE_TUNED", "sometimes")
    with pytest.raises(ValueError, match="COURSE_TUNED='sometimes'"):
        tuned_values.mode()


@pytest.mark.parametrize("platform, env, want", [
    ("linux", {"XDG_CACHE_HOME": "/x/cache"}, "/x/cache/convbackprop-course/tuned.json"),
    ("linux", {}, "{home}/.cache/convbackprop-course/tuned.json"),
    ("darwin", {}, "{home}/Library/Caches/convbackprop-course/tuned.json"),
    ("win32", {"LOCALAPPDATA": "D:/cache"}, "D:/cache/convbackprop-course/tuned.json"),
    ("linux", {"COURSE_TUNE_CACHE": "/elsewhere/t.json"}, "/elsewhere/t.json"),
])
def test_the_cache_lives_in_the_platforms_cache_folder(monkeypatch, platform, env, want):
    for var in ("XDG_CACHE_HOME", "LOCALAPPDATA", "COURSE_TUNE_CACHE"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr(tuned_values.sys, "platform", platform)
    assert tuned_values.user_cache() == Path(want.format(home=Path.home()))
    assert ROOT not in tuned_values.user_cache().parents


ARGS = random_problem_args(1, 8, 7, 7, 16, 3, 1, 1, "none", 0)


def test_the_chooser_searches_again_when_the_values_under_it_change(files, monkeypatch):
    p = helpers.prepare("conv_dgrad", **ARGS)
    calls = []
    timing = lambda name: calls.append(name) or 1.0
    chooser.choose(p, "dev", None, timing, {"08_width": {"WG": 64}})
    n = len(calls)
    chooser.choose(p, "dev", None, timing, {"08_width": {"WG": 64}})
    assert len(calls) == n                                   # cached
    chooser.choose(p, "dev", None, timing, {"08_width": {"WG": 128}})
    assert len(calls) == 2 * n                               # a tune since: timed again


def fake_attempt(counter, stop_at=None):
    """Every candidate 'runs'; its time depends on its values (smaller WG, larger XPW faster)."""
    def attempt(self, defines):
        counter.append((self.stage.key, tuple(sorted(defines.items()))))
        if stop_at is not None and len(counter) == stop_at:
            raise KeyboardInterrupt
        ms = 1.0 + defines.get("WG", 64) / 64 + 1.0 / defines.get("XPW", 1) + defines.get("CPW", 4) / 100
        return {"defines": defines, "geomean_ms": ms, "times_ms": [ms]}
    return attempt


def test_a_search_converges_one_parameter_at_a_time(files, monkeypatch):
    counter = []
    monkeypatch.setattr(Trial, "attempt", fake_attempt(counter))
    run = tune.tune(helpers.get_context(), 600, ("conv_dgrad",), {"width"}, progress=False, say=lambda s: None)
    assert run["stopped"].startswith("done")
    cache = tuned_values.read(tuned_values.user_cache())
    entry = next(iter(cache.values()))["conv_dgrad"]["08_width"]
    assert entry["done"] and entry["defines"]["WG"] == 64 and entry["defines"]["XPW"] == 8
    assert len(counter) == len(set(counter))                # no candidate timed twice
    assert tuned_values.tuned_for("conv_dgrad", "08_width", helpers.engine.devices.describe(
        helpers.get_context().devices[0])).source == "your tuning for this device"


def test_an_interrupted_search_resumes_without_timing_anything_twice(files, monkeypatch, capsys):
    counter = []
    monkeypatch.setattr(Trial, "attempt", fake_attempt(counter, stop_at=4))
    assert tune.main(["--ops", "conv_dgrad", "--stages", "naive,width", "--budget", "5"]) == 130
    assert "resumes with the rest of the budget" in capsys.readouterr().out
    first = list(counter)
    monkeypatch.setattr(Trial, "attempt", fake_attempt(counter))
    assert tune.main(["--ops", "conv_dgrad", "--stages", "naive,width"]) == 0
    out = capsys.readouterr().out
    assert "resuming the search interrupted after" in out and "stopped: done" in out
    # the candidate the interruption stopped is timed again (it never finished); nothing else is
    assert counter[:len(first)] == first and counter[len(first)] == first[-1]
    assert len(counter) - 1 == len(set(counter))
    runs = json.loads(tuned_values.user_cache().read_text())["runs"]
    assert [h["stopped"] for h in next(iter(runs.values()))["history"]] == ["interrupted", "done: every stage's search converged"]


def test_a_budget_stops_the_search_before_a_candidate_would_overrun(files, monkeypatch):
    """Each candidate takes 7 s of a 20 s budget: the second ends at 14 s, a third would end past 20."""
    counter, clock = [], [0.0]
    timed = fake_attempt(counter)

    def slow(self, defines):
        clock[0] += 7.0
        return timed(self, defines)
    monkeypatch.setattr(Trial, "attempt", slow)
    monkeypatch.setattr(tune.time, "perf_counter", lambda: clock[0])
    run = tune.tune(helpers.get_context(), 20, ("conv_dgrad",), {"width"}, progress=False, say=lambda s: None)
    assert run["stopped"].startswith("budget") and run["spent_s"] == 14 and len(counter) == 2


def test_commit_writes_the_values_into_the_recorded_file(files, monkeypatch):
    recorded, cache = files
    tuned_values.record(cache, RADEON,
                        {"conv_dgrad": {"08_width": {"defines": {"WG": 256}, "tried": {}, "layer_set": "s"}}})
    assert tune.commit(RADEON, cache) == 1
    entry = json.loads(recorded.read_text())["devices"]["gfx1100"]
    assert entry["describe"] == RADEON and entry["conv_dgrad"]["08_width"] == {"defines": {"WG": 256}, "layer_set": "s"}


@pytest.mark.parametrize("argv, says", [
    (["--stages", "nope"], "--stages nope: no stage of"),
    (["--budget", "0"], "--budget 0: the minutes to search, more than 0"),
    (["--device", "no-such-device"], "No OpenCL device matches 'no-such-device'"),
    (["--ops", "conv3d_dgrad"], "--ops conv3d_dgrad: the operations tuned are"),
    (["--layers", "bn"], "layer set 'bn' holds batchnorm layers"),
])
def test_bad_input_gets_one_line(files, capsys, monkeypatch, argv, says):
    monkeypatch.setattr(Trial, "attempt", lambda *a: pytest.fail("a candidate was timed"))
    assert tune.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], err


def test_the_plan_says_where_its_parameters_come_from(files):
    """A device with nothing recorded, and nothing to inherit from (the recorded file emptied, so
    that the test means the same on the recorded H200 as elsewhere), builds with the defaults."""
    recorded, _ = files
    recorded.write_text(json.dumps({"devices": {}}))
    tuned_values.reload()
    plan = helpers.plan_stage("conv_dgrad", "width", **ARGS)
    assert plan.tuned_source.startswith("the registry's defaults")
    plan = helpers.plan_stage("conv_dgrad", "width", defines={"WG": 64}, **ARGS)
    assert plan.tuned_source.startswith("given: WG; the rest the registry's defaults")


def test_show_lists_every_tunable_stage_with_its_source(files):
    text = tune.show(helpers.get_context(), ("conv_dgrad",))
    assert "08_width" in text and "the registry's defaults" in text


def test_the_recorded_fresh_tune_and_what_auto_made_of_it():
    """results/: `./course tune --budget 10` on the H200 from nothing recorded for it (COURSE_TUNED=
    fresh), in two sittings (interrupted, then resumed), then auto over ResNet-50 and VGG-16 beside
    cuDNN fp32 in the same runs: every layer at x1.0 or more."""
    from helpers.analysis.results import tune_record, tuning_effect
    t = tune_record("nvidia-h200")
    assert t["sittings"] == 2 and t["minutes"] <= t["budget_minutes"] == 10 and t["candidates"] > 100
    for layer_set in ("resnet50", "vgg16"):
        rows = tuning_effect(layer_set, "NVIDIA H200")
        assert rows and all(r["fresh"]["x_vendor"] >= 1.0 for r in rows), rows
