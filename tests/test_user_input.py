"""What a new user types, tried as they would type it: each mistake gets one line that names it
and says what to do (exit status 2 on a command line), before any launch; nothing confusing is
accepted silently."""
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyopencl as cl
import pytest

import helpers
from helpers import chooser
from helpers.engine import devices
from helpers.ops.conv_dgrad import random_problem_args

ROOT = Path(__file__).resolve().parent.parent


def command(*args, env=None):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def one_line(result, says):
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("selector, says", [
    ("0:0:0", "'0:0:0' is not a device index: write 'P:D'"),
    ("no-such-device", "No OpenCL device matches 'no-such-device'"),
])
def test_the_device_listing_names_a_bad_course_device_in_one_line(selector, says):
    """`python -m helpers` (README's own listing) with a COURSE_DEVICE that names nothing."""
    one_line(command("-m", "helpers", env={"COURSE_DEVICE": selector}), says)


def test_the_device_listing_says_what_it_chose_and_why():
    """The chosen line names the first CPU of the listing (0:0 where PoCL is the only platform; on a
    GPU machine the CPU may come after the GPU's platform) and why."""
    r = command("-m", "helpers", env={"COURSE_DEVICE": "cpu"})
    assert r.returncode == 0, r.stderr
    cpus = [ln.split()[0] for ln in r.stdout.splitlines() if "(CPU," in ln]
    assert cpus and f"chosen: {cpus[0]} " in r.stdout and "by COURSE_DEVICE='cpu'" in r.stdout


@pytest.mark.parametrize("args, says", [
    (["--device", "0:0:0", "--list"], "'0:0:0' is not a device index"),
    (["--device", "cpu", "--budget", "0"], "--budget 0: the minutes to spend on tasks, more than 0"),
    (["--device", "cpu", "--budget", "-3"], "--budget -3: the minutes to spend on tasks, more than 0"),
])
def test_the_recorder_refuses_in_one_line(args, says):
    one_line(command("-m", "helpers.record", *args), says)


def fake_device(name, vendor, platform_vendor, kind):
    return SimpleNamespace(name=name, vendor=vendor, type=kind,
                           platform=SimpleNamespace(name=f"{platform_vendor} OpenCL", vendor=platform_vendor))


CPU, GPU = cl.device_type.CPU, cl.device_type.GPU
EPYC = fake_device("pthread-AMD EPYC 7763", "AuthenticAMD", "The pocl project", CPU)
XEON = fake_device("pthread-Intel(R) Xeon(R)", "GenuineIntel", "The pocl project", CPU)
RADEON = fake_device("gfx1100", "Advanced Micro Devices, Inc.", "Advanced Micro Devices, Inc.", GPU)
H200 = fake_device("NVIDIA H200", "NVIDIA Corporation", "NVIDIA Corporation", GPU)
ARC = fake_device("Intel(R) Arc(TM) A770 Graphics", "Intel(R) Corporation", "Intel(R) Corporation", GPU)


@pytest.mark.parametrize("machine, selector, want", [
    ([EPYC, RADEON], "amd", RADEON),           # the AMD GPU, not the AMD processor listed first
    ([EPYC, H200], "nvidia", H200),
    ([XEON, ARC], "intel", ARC),
    ([EPYC, H200], "AMD", None),               # vendor words match GPUs by vendor: none here
    ([XEON, ARC], "amd", None),
    ([EPYC, RADEON], "cpu", EPYC),
    ([EPYC, RADEON], "gpu", RADEON),
    ([EPYC, RADEON], "EPYC", EPYC),            # part of a name still works
    ([EPYC, RADEON], "0:1", RADEON),
    ([EPYC, RADEON], "1", None),
])
def test_vendor_words_match_the_driver_vendor_and_gpus_only(monkeypatch, machine, selector, want):
    monkeypatch.setattr(devices, "list_devices", lambda: [(f"{i}:0" if False else f"0:{i}", d)
                                                          for i, d in enumerate(machine)])
    if want is None:
        with pytest.raises(devices.NoDeviceError) as err:
            devices.find_device(selector)
        assert "\n" not in str(err.value) and "Available: 0:0 = " in str(err.value)
    else:
        assert devices.find_device(selector) is want


ARGS = random_problem_args(1, 3, 6, 6, 4, 3, 1, 1, "none", 0)


def test_a_nan_in_the_input_is_named_and_its_outputs_match():
    """NaN in the input reaches some outputs; the reference has NaN there too: those count as
    matching, and the verdict names the input's NaN (it used to say 'got nan, expected nan')."""
    args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in ARGS.items()}
    args["grad_output"][0, 1, 2, 2] = np.nan
    verdict = helpers.check_stage("conv_dgrad", "naive", **args).verdict
    assert "27 of them NaN or infinite, as in the reference: grad_output holds 1 NaN" in verdict


def test_a_nan_in_the_input_is_said_by_run_stage():
    """run_stage computes with a NaN input (as PyTorch does) and names it in a warning; a clean
    input warns of nothing."""
    args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in ARGS.items()}
    args["grad_output"][0, 1, 2, 2] = np.nan
    args["grad_output"][0, 0, 0, 0] = np.inf
    with pytest.warns(RuntimeWarning, match=r"conv_dgrad: grad_output holds 1 NaN and 1 inf; every output that "
                                            r"reads them is NaN or infinite too"):
        dx = helpers.run_stage("conv_dgrad", "naive", **args)
    assert np.isnan(dx).any()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        helpers.run_stage("conv_dgrad", "naive", **ARGS)


def test_a_nan_where_the_reference_has_none_still_fails():
    from helpers.engine.check import MismatchError, check_close
    with pytest.raises(MismatchError, match="got nan"):
        check_close(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
    with pytest.raises(MismatchError):
        check_close(np.array([np.inf]), np.array([-np.inf]))
    assert check_close(np.array([np.nan, np.inf]), np.array([np.nan, np.inf])).nonfinite == 2


def test_fp16_inputs_beyond_its_range_are_refused_before_the_launch(monkeypatch):
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lambda *a, **k: pytest.fail("a kernel was launched"))
    args = dict(ARGS, grad_output=np.full_like(ARGS["grad_output"], 7e4))
    with pytest.raises(ValueError, match="beyond float16's largest finite value 65504"):
        helpers.run_stage("conv_dgrad", "naive_fp16", **args)


@pytest.mark.parametrize("value, error, says", [
    ([1.0, 2.0], TypeError, "must be a NumPy array of float32 (or float16), got list"),
    (np.zeros(3), TypeError, "must be float32 (or float16), got float64"),
    (np.zeros(3, np.int32), TypeError, "must be float32 (or float16), got int32"),
])
def test_from_array_follows_run_stages_rule(value, error, says):
    with pytest.raises(error, match=f"DeviceTensor.from_array: array {says}".replace("(", r"\(").replace(")", r"\)")):
        helpers.DeviceTensor.from_array(helpers.get_context(), value)
    with pytest.raises(error, match=says.replace("(", r"\(").replace(")", r"\)")):
        helpers.run_stage("conv_dgrad", "naive", **dict(ARGS, weight=value))


@pytest.mark.parametrize("name", ["KH", "ACT", "STRIDE"])
def test_defines_the_problem_fixes_are_refused_with_the_reason(name):
    with pytest.raises(ValueError, match=f"{name}=.* set by the problem itself"):
        helpers.run_stage("conv_dgrad", "naive", defines={name: 1}, **ARGS)


def test_an_unknown_course_size_names_the_sizes(monkeypatch):
    from helpers.chapters.notebook import start
    monkeypatch.setenv("COURSE_SIZE", "huge")
    with pytest.raises(ValueError, match="COURSE_SIZE='huge': the sizes are 'small' .* and 'full'"):
        start()


def test_auto_keeps_its_search_in_proportion_to_the_problem(monkeypatch):
    """COURSE_AUTO=exhaustive: the clock moves 0.4 s between looks here and the best runs in 1 µs:
    once the search has spent more than a million runs of the best (1 s), the rest is left untried
    and the record says so. (The default, the model's search, times at most chooser.TIMED and stops
    after chooser.BUDGET_S seconds: tests/test_conv_dgrad.py.)"""
    monkeypatch.setenv("COURSE_AUTO", "exhaustive")
    monkeypatch.setattr(chooser, "rank", lambda op, stages, p, device: [(s, None) for s in stages])  # course order
    clock = iter(np.arange(100) * 0.4)
    monkeypatch.setattr(chooser.time, "perf_counter", lambda: float(next(clock)))
    p = helpers.prepare("conv_dgrad", **ARGS)
    names, _ = chooser.candidates(p, None)
    record = chooser.find(p, None, lambda name: 0.001, progress=False)
    assert list(record["times_ms"]) == names[:2] and set(record["untried"]) == set(names[2:])
    assert "not tried: the search had taken" in record["untried"][names[2]]
    # a problem whose best stage takes a millisecond is searched whole
    clock = iter(np.arange(100) * 0.4)
    assert "untried" not in chooser.find(p, None, lambda name: 1.0, progress=False)


def test_course_help_lists_every_command_and_itself():
    r = subprocess.run([str(ROOT / "course"), "help"], capture_output=True, text=True)
    commands = {line.split()[1] for line in r.stdout.splitlines() if line.strip().startswith("./course ")}
    assert r.returncode == 0 and {"open", "test", "bench", "record", "execute", "student", "site", "setup",
                                  "help"} <= commands
    r = subprocess.run([str(ROOT / "course"), "nope"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("unknown command 'nope'") and not r.stdout


@pytest.mark.skipif(Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
                    reason="checks the environment ./course set up (.venv)")
def test_jupyterlab_starts_without_nbgrader_pages():
    """nbgrader is installed for `./course student` only: every server extension it registers is
    switched off in .venv, so `./course open` logs none of its warnings ('No nbgrader_config.py')."""
    import json
    conf = Path(sys.prefix) / "etc" / "jupyter" / "jupyter_server_config.d"
    theirs = json.loads((conf / "nbgrader.json").read_text())["ServerApp"]["jpserver_extensions"]
    ours = json.loads((conf / "zz_course_no_nbgrader.json").read_text())["ServerApp"]["jpserver_extensions"]
    assert set(theirs) <= set(ours) and not any(ours.values())
    assert sorted(p.name for p in conf.iterdir())[-1] == "zz_course_no_nbgrader.json"   # read last: it wins
