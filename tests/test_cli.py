"""The benchmark's command line: every mistake a newcomer makes gets one line that says what
is wrong and what is accepted (exit status 2), before any launch; --help lists what exists."""
import json

import pytest

from helpers import bench


@pytest.mark.parametrize("argv, says", [
    (["--layers", "nope"], "unknown layer set 'nope'; choose from"),
    (["--op", "nope"], "unknown op 'nope'"),
    (["--stages", "nope"], "has no stage 'nope'; its stages are"),
    (["--device", "no-such-device"], "No OpenCL device matches"),
    (["--stages", "naive", "--defines", "WG=abc"], "JIT parameters are integers"),
    (["--stages", "naive", "--defines", "WG=0"], "WG must be >= 1"),
    (["--stages", "naive", "--defines", "WG=-64"], "WG must be >= 1"),
    (["--stages", "naive", "--defines", "WG"], "NAME=INTEGER"),
    (["--stages", "naive", "--defines", "SPLIT_SUMS=0"], "SPLIT_SUMS: no selected stage of conv_dgrad declares it"),
    (["--stages", "naive,winograd4", "--tune-only", "GEMM_LDS4"], "stage(s) naive tune none of them"),
    (["--stages", "winograd4", "--tune-only", "GEMM_LDS"], "GEMM_LDS: no selected stage of conv_dgrad tunes it"),
    # an op given a layer set of another kind of op, or an op with no layer sets
    (["--op", "gemm", "--layers", "ci"], "layer set 'ci' holds conv layers, but gemm takes gemm layers: choose from gemm, gemm_small"),
    (["--op", "conv_dgrad", "--layers", "bn_ci"], "layer set 'bn_ci' holds batchnorm layers, but conv_dgrad takes conv or anyshape layers"),
    (["--op", "conv_wgrad", "--layers", "gemm"], "but conv_wgrad takes conv or anyshape layers"),
    (["--op", "batchnorm_backward", "--layers", "gemm"], "but batchnorm_backward takes batchnorm layers: choose from bn, bn_ci, bn_small"),
    (["--op", "conv3d_dgrad"], "conv3d_dgrad has no layer sets to benchmark"),
    # counts that make no sense
    (["--warmup", "-1"], "--warmup -1: the warm-up launches are 0 or more"),
    (["--repeats", "0"], "--repeats 0: the timed repetitions are 3 or more"),
    (["--repeats", "2"], "--repeats 2: the timed repetitions are 3 or more"),
    # a device index that is not one
    (["--device", "0:0:0"], "'0:0:0' is not a device index: write 'P:D'"),
    (["--device", "9:0"], "No OpenCL device matches '9:0'"),
])
def test_mistakes_get_one_line(capsys, monkeypatch, argv, says):
    import pyopencl as cl
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lambda *a, **k: pytest.fail("a kernel was launched"))
    assert bench.main(argv + ["--out", "-", "--no-vendor"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0]


def test_help_lists_ops_layer_sets_and_stages(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    text = capsys.readouterr().out
    for word in ("conv_dgrad:", "batchnorm_forward:", "resnet50", "naive_cuda [cuda]", "layer sets:"):
        assert word in text


def test_bandwidth_counts_the_bytes_of_the_stored_precision():
    """An fp16 stage moves 2 bytes per value: its GB/s and min_bytes are half those of an fp32
    stage at the same time (the ops count 4-byte values)."""
    out = bench.run("conv_dgrad", ["naive", "naive_fp16"], "ci", repeats=3, warmup=1, vendor=False,
                    peak=False, progress=False)
    for fp32, fp16 in zip(*([r for r in out["rows"] if r["stage"] == s] for s in ("naive", "naive_fp16"))):
        assert fp16["min_bytes"] * 2 == fp32["min_bytes"]
        assert fp16["gbps"] == pytest.approx(fp16["min_bytes"] / (fp16["median_ms"] * 1e-3) / 1e9)
    assert "2 bytes per value" in out["formulas"]["gbps"]


def test_a_recorded_run_names_the_command_that_wrote_it(tmp_path):
    import json
    path = tmp_path / "run.json"
    argv = ["--layers", "ci", "--stages", "naive", "--no-vendor", "--repeats", "3", "--out", str(path)]
    assert bench.main(argv) == 0
    assert json.loads(path.read_text())["settings"]["command"] == "python -m helpers.bench " + " ".join(argv)


def test_tune_only_searches_the_named_parameters_and_keeps_the_others():
    """--tune-only GEMM_LDS4: two candidates, each checked before it is timed; the result names
    every tuned parameter (the others at the device's values), so the tuned file stays whole."""
    out = bench.run("gemm", ["register_blocked"], "gemm_small", repeats=3, warmup=1, vendor=False, peak=False,
                    progress=False, tune_only=["GEMM_LDS4"])
    t = out["tuned"]["03_register_blocked"]
    assert t["searched"] == ["GEMM_LDS4"] and [c["defines"] for c in t["tried"]] == [{"GEMM_LDS4": 0}, {"GEMM_LDS4": 1}]
    stage = bench.get_stage("gemm", "register_blocked")
    assert set(t["defines"]) == set(stage.tune) and t["defines"]["GEMM_LDS4"] in (0, 1)
    assert all(r["defines"]["GEMM_LDS4"] == t["defines"]["GEMM_LDS4"] for r in out["rows"])


def test_bench_refuses_to_replace_a_recorded_run_of_other_stages(tmp_path, capsys):
    """A tag used twice for different comparisons would silently replace the first recording:
    the benchmark refuses before any work and says what the file holds. The same stages may be
    recorded again."""
    from helpers import bench
    out = tmp_path / "run.json"
    out.write_text(json.dumps({"kind": "bench", "op": "conv_dgrad", "layer_set": "ci",
                               "rows": [{"stage": "tc_fp16_nhwc"}, {"stage": "tc_bf16_nhwc"}]}))
    with pytest.raises(ValueError, match="holds a recorded run of tc_fp16_nhwc, tc_bf16_nhwc"):
        bench.refuse_overwrite(out, ["igemm_phases"], "conv_dgrad", "ci")
    bench.refuse_overwrite(out, ["tc_bf16_nhwc", "tc_fp16_nhwc"], "conv_dgrad", "ci")   # the same run again
    bench.refuse_overwrite(tmp_path / "new.json", ["igemm_phases"])    # nothing recorded there yet
    assert bench.main(["--layers", "ci", "--stages", "naive", "--no-vendor", "--out", str(out)]) == 2
    assert "holds a recorded run" in capsys.readouterr().err


NOT_OURS = {
    "json.json": '{"mydata": 1}\n',
    "notes.txt": "my notes\n",
    "list.json": "[1, 2, 3]\n",
    "other_op.json": json.dumps({"kind": "bench", "op": "conv_wgrad", "layer_set": "ci", "rows": []}),
    "other_set.json": json.dumps({"kind": "bench", "op": "conv_dgrad", "layer_set": "small", "rows": []}),
}


@pytest.mark.parametrize("name", sorted(NOT_OURS))
def test_out_never_overwrites_a_file_that_is_not_its_own(tmp_path, capsys, monkeypatch, name):
    """A learner's own file (any JSON, a list, text) or another op's or layer set's run at --out:
    one line and exit 2 before any launch, and the file is left as it was."""
    import pyopencl as cl
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lambda *a, **k: pytest.fail("a kernel was launched"))
    path = tmp_path / name
    path.write_text(NOT_OURS[name])
    assert bench.main(["--layers", "ci", "--stages", "naive", "--no-vendor", "--out", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(path) in err[0] and "Traceback" not in err[0]
    assert path.read_text() == NOT_OURS[name]


def test_an_unwritable_out_is_refused_before_any_work(capsys, monkeypatch):
    """--out into a place the process cannot create a file (/proc) is found before the run, not
    after it (the work used to be lost to a traceback at the end)."""
    import pyopencl as cl
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lambda *a, **k: pytest.fail("a kernel was launched"))
    assert bench.main(["--layers", "ci", "--stages", "naive", "--no-vendor", "--out", "/proc/x.json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out /proc/x.json: cannot write there" in err[0]


def test_a_stage_named_twice_runs_once(capsys):
    assert bench.main(["--layers", "ci", "--stages", "naive,naive,02_naive", "--no-vendor", "--repeats", "3",
                       "--out", "-"]) == 0
    cap = capsys.readouterr()
    assert "note: --stages names 02_naive more than once; each stage runs once" in cap.err
    assert sum(" 02_naive " in ln and "(IQR" in ln for ln in cap.out.splitlines()) == len(bench.layer_set("ci", "conv_dgrad"))


def test_rows_print_as_their_layer_finishes_with_progress_and_refusals(capsys):
    """The command line says first that kernels are being built, prints each row when it is
    timed and a progress line with the time left after each layer; a stage that cannot run a
    layer (Winograd on a stride-2 layer) gives a 'refused:' row and the run goes on."""
    lays = bench.layer_set("ci", "conv_forward")
    assert bench.main(["--op", "conv_forward", "--layers", "ci", "--stages", "wino4_blocked,im2col", "--no-vendor",
                       "--repeats", "3", "--out", "-"]) == 0
    cap = capsys.readouterr()
    assert cap.err.splitlines()[0].startswith("conv_forward over 'ci' (3 layers)") and "building and checking" in cap.err
    assert [ln.split(",")[0] for ln in cap.err.splitlines() if ln.startswith("[")] == \
        [f"[{i}/{len(lays)} layers" for i in range(1, len(lays) + 1)]
    refused = [ln for ln in cap.out.splitlines() if "refused:" in ln]
    assert len(refused) == 2 and all("/s2" in ln and "06_wino4_blocked" in ln for ln in refused)  # streamed + summary
    assert sum(" 11_im2col " in ln and "(IQR" in ln for ln in cap.out.splitlines()) == len(lays)


def test_a_row_run_by_a_fallback_says_so():
    """A depthwise stage asked for a dense layer runs any_shape: the printed row names both."""
    out = bench.run("conv_dgrad", ["dw_tiles"], "ci", repeats=3, warmup=0, vendor=False, peak=False, progress=False)
    row = out["rows"][0]
    assert row["ran"] != row["key"]
    assert f"{row['key']} -> {row['ran']} (fallback)" in bench._line(row, out)


def test_ctrl_c_keeps_the_finished_rows_marked_partial(tmp_path):
    """SIGINT once the first layer is done: no traceback, exit 130, the finished rows written
    beside --out as NAME.partial.json with 'partial' saying how far the run got."""
    import os
    import signal
    import subprocess
    import sys
    import time
    out = tmp_path / "run.json"
    cmd = [sys.executable, "-m", "helpers.bench", "--layers", "small", "--stages", "naive,memoized_bounds",
           "--no-vendor", "--repeats", "50", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=bench.RESULTS.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = ""
    deadline = time.time() + 300
    while "[1/" not in seen and time.time() < deadline and proc.poll() is None:
        seen += proc.stderr.readline()
    assert "[1/" in seen, seen
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr + stdout
    partial = tmp_path / "run.partial.json"
    assert not out.exists() and partial.is_file()
    held = json.loads(partial.read_text())
    assert held["partial"].startswith("interrupted (Ctrl-C) after") and held["rows"]
    assert f"wrote {partial} (a partial run" in stdout
    del os


def test_course_tuned_none_leaves_the_tuned_values_out(monkeypatch):
    """COURSE_TUNED=none: a device with tuned values (the recorded H200) gets the registry's
    defaults, as a device nobody tuned for; the benchmark refuses to tune then (it would record)."""
    from helpers import bench, tuned_values
    tuned = tuned_values.tuned_defines("conv_dgrad", "11_igemm_taps", "NVIDIA H200")
    assert tuned, "results/tuned.json holds the H200's igemm_taps parameters"
    monkeypatch.setenv("COURSE_TUNED", "none")
    tuned_values.reload()
    try:
        assert tuned_values.tuned_defines("conv_dgrad", "11_igemm_taps", "NVIDIA H200") == {}
        with pytest.raises(ValueError, match="COURSE_TUNED=none"):
            bench._main(["--layers", "ci", "--stages", "naive", "--tune", "--out", "-"])
    finally:
        monkeypatch.delenv("COURSE_TUNED")
        tuned_values.reload()
    assert tuned_values.tuned_defines("conv_dgrad", "11_igemm_taps", "NVIDIA H200") == tuned


@pytest.mark.parametrize("out, says", [
    ("", "--out names no file"),
    ("{tmp}/missing/run.json", "the folder {tmp}/missing does not exist"),
    ("{tmp}", "that is a folder; name the JSON file"),
])
def test_out_is_checked_before_any_work(tmp_path, capsys, monkeypatch, out, says):
    """--out into a missing folder, onto a folder, or empty: one line before anything runs (it
    used to run to the end, then fail with a traceback; '' wrote into results/)."""
    import pyopencl as cl
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lambda *a, **k: pytest.fail("a kernel was launched"))
    before = sorted(p.name for p in bench.RESULTS.iterdir())
    assert bench.main(["--stages", "naive", "--no-vendor", "--out", out.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says.format(tmp=tmp_path) in err[0], err
    assert sorted(p.name for p in bench.RESULTS.iterdir()) == before


def test_each_op_benchmarks_its_own_small_set_by_default(capsys):
    """`--op gemm` with no --layers runs gemm's small set (it used to take conv's 'ci': KeyError 'm')."""
    assert bench.main(["--op", "gemm", "--stages", "naive", "--no-vendor", "--repeats", "3", "--out", "-"]) == 0
    assert "gemm over 'gemm_small'" in capsys.readouterr().out


def _typed(*argv, env=None):
    """A command as a user types it, from the repository's root."""
    import os
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", *argv], cwd=bench.RESULTS.parent, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("argv, env, says", [
    (["helpers.tools.execute", "nosuch.ipynb"], {}, "error: no notebook nosuch.ipynb: name .ipynb files"),
    (["helpers.tools.editions", "/proc/x"], {}, "cannot write there"),
    (["helpers.tune", "--show"], {"COURSE_TUNE_CACHE": "{tmp}"}, "is a folder; it names the cache's file"),
    (["helpers.tune", "--budget", "1"], {"COURSE_TUNE_CACHE": "{tmp}"}, "is a folder; it names the cache's file"),
    (["helpers.timer_floor", "--device", "no-such-gpu"], {}, "error: No OpenCL device matches 'no-such-gpu'"),
    (["helpers", "--nope"], {}, "python -m helpers takes no arguments"),
])
def test_commands_that_used_to_end_in_a_traceback_say_one_line(tmp_path, argv, env, says):
    """./course execute NAME, ./course student OUT, ./course tune and python -m helpers.timer_floor and
    helpers, each with the mistake a new user made: one line, exit status 2, no traceback."""
    r = _typed(*argv, env={k: v.format(tmp=tmp_path) for k, v in env.items()})
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and says in lines[0], r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_python_m_helpers_help_says_what_it_does():
    r = _typed("helpers", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m helpers") and "COURSE_DEVICE" in r.stdout
