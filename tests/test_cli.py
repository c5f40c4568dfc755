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
    (["--repeats", "0"], "--repeats 0: the timed repetitions are 1 or more"),
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


def test_bench_refuses_to_replace_a_recorded_run_of_other_stages(tmp_path):
    """A tag used twice for different comparisons would silently replace the first recording:
    the benchmark refuses before any work and says what the file holds. The same stages may be
    recorded again."""
    from helpers import bench
    out = tmp_path / "run.json"
    out.write_text(json.dumps({"rows": [{"stage": "tc_fp16_nhwc"}, {"stage": "tc_bf16_nhwc"}]}))
    with pytest.raises(SystemExit, match="holds a recorded run of tc_fp16_nhwc, tc_bf16_nhwc"):
        bench.refuse_overwrite(out, ["igemm_phases"])
    bench.refuse_overwrite(out, ["tc_bf16_nhwc", "tc_fp16_nhwc"])     # the same run again: allowed
    bench.refuse_overwrite(tmp_path / "new.json", ["igemm_phases"])    # nothing recorded there yet
    with pytest.raises(SystemExit, match="holds a recorded run"):
        bench.main(["--layers", "ci", "--stages", "naive", "--no-vendor", "--out", str(out)])


def test_course_tuned_none_leaves_the_tuned_values_out(monkeypatch):
    """COURSE_TUNED=none: a device with tuned values (the recorded H200) gets the registry's
    defaults, as a device nobody tuned for; the benchmark refuses to tune then (it would record)."""
    from helpers import bench, tuning
    tuned = tuning.tuned_defines("conv_dgrad", "11_igemm_taps", "NVIDIA H200")
    assert tuned, "results/tuned.json holds the H200's igemm_taps parameters"
    monkeypatch.setenv("COURSE_TUNED", "none")
    tuning.reload()
    try:
        assert tuning.tuned_defines("conv_dgrad", "11_igemm_taps", "NVIDIA H200") == {}
        with pytest.raises(ValueError, match="COURSE_TUNED=none"):
            bench._main(["--layers", "ci", "--stages", "naive", "--tune", "--out", "-"])
    finally:
        monkeypatch.delenv("COURSE_TUNED")
        tuning.reload()
    assert tuning.tuned_defines("conv_dgrad", "11_igemm_taps", "NVIDIA H200") == tuned


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
