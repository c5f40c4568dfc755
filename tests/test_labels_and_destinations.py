"""What the commands say and where they write, as a new user meets them: the GEMM benchmark's
vendor is cuBLAS; best_vs_vendor takes a device's slug as the result files spell it and refuses an
unknown device by name; bench --tune keeps its values where ./course tune does (the user's cache)
unless --commit asks for results/tuned.json; COURSE_TUNE_CACHE is described as naming a file."""
import re
from pathlib import Path

import pytest

from helpers import bench, tuned_values
from helpers.analysis import compare
from helpers.analysis.summary import vendor_name

ROOT = Path(__file__).resolve().parent.parent


def test_the_gemm_benchmark_names_cublas_even_where_it_is_not_timed():
    out = {"op": "gemm", "vendor": []}
    assert vendor_name(out) == "cuBLAS"
    assert vendor_name({"op": "conv_dgrad", "vendor": []}) == "cuDNN"
    assert vendor_name({"op": "batchnorm_backward", "vendor": []}) == "PyTorch"
    assert vendor_name({"op": "gemm", "vendor": [{"name": "cuBLAS"}]}) == "cuBLAS"


def test_the_gemm_benchmark_report_says_cublas(capsys):
    """The report of a CPU run (no vendor timed) names the vendor it would have timed. The run is
    pinned to an OpenCL CPU device: on a machine with an NVIDIA GPU too, cuBLAS (which runs there)
    is not timed beside the CPU's rows."""
    from helpers.engine.devices import is_gpu, list_devices
    cpus = [key for key, dev in list_devices() if not is_gpu(dev)]
    if not cpus:
        pytest.skip("no OpenCL CPU device here (PoCL): the report without a vendor needs one")
    assert bench.main(["--op", "gemm", "--layers", "gemm_small", "--stages", "naive", "--repeats", "3",
                       "--warmup", "0", "--device", cpus[0], "--out", "-"]) == 0
    text = capsys.readouterr().out
    assert "vendor column (cuBLAS) skipped" in text and "cuDNN" not in text


def test_a_run_on_a_device_other_than_an_nvidia_gpu_times_no_vendor(monkeypatch, ctx):
    """cuDNN and cuBLAS time an NVIDIA GPU through CUDA, whatever the run's OpenCL device: beside a
    CPU's rows they would compare two machines. A vendor that would answer is not asked, and the
    report says why."""
    from helpers.ops import gemm
    asked = []
    monkeypatch.setattr(gemm, "vendor_time", lambda *a, **k: asked.append(1) or
                        {"name": "cuBLAS", "median_ms": 1.0, "times_ms": [1.0]})
    from helpers.engine.devices import vendor_of
    if vendor_of(ctx.devices[0]) == "nvidia":
        pytest.skip("this test's device is an NVIDIA GPU: the vendor is timed there")
    out = bench.run("gemm", ["naive"], "gemm_small", ctx, warmup=0, repeats=3, progress=False)
    assert not asked and out["vendor"] == []
    assert "is not one" in out["vendor_skipped"] and "is not one" in bench.report(out)


def test_best_vs_vendor_takes_the_device_slug():
    by_name = compare.best_vs_vendor("conv_dgrad", "H200")
    assert by_name, "results/ holds the H200's conv_dgrad runs"
    for spelled in ("nvidia-h200", "NVIDIA H200", "nvidia h200", "h200"):
        assert compare.best_vs_vendor("conv_dgrad", spelled) == by_name, spelled


def test_best_vs_vendor_refuses_an_unknown_device_naming_the_recorded_ones():
    with pytest.raises(ValueError, match=r"'rtx-9090'.*NVIDIA H200 \(nvidia-h200\)"):
        compare.best_vs_vendor("conv_dgrad", "rtx-9090")
    with pytest.raises(ValueError, match="unknown op 'conv_dgard'"):
        compare.best_vs_vendor("conv_dgard", "H200")


class Ran(Exception):
    pass


@pytest.mark.parametrize("extra, where", [((), "cache"), (("--commit",), "results")])
def test_bench_tune_records_where_course_tune_does_unless_committed(monkeypatch, tmp_path, extra, where):
    cache = tmp_path / "my_tuned.json"
    monkeypatch.setenv("COURSE_TUNE_CACHE", str(cache))

    def run(*args, **kwargs):
        raise Ran(kwargs["record_tuned"])
    monkeypatch.setattr(bench, "run", run)
    with pytest.raises(Ran) as got:
        bench._main(["--op", "gemm", "--layers", "gemm_small", "--stages", "naive", "--tune",
                     "--out", str(tmp_path / "run.json"), *extra])
    assert got.value.args[0] == (cache if where == "cache" else tuned_values.TUNED)


def test_save_tuned_writes_the_file_it_is_given(tmp_path):
    path = tmp_path / "tuned.json"
    out = {"op": "gemm", "layer_set": "gemm_small", "date": "2026-01-01",
           "device": {"describe": {"name": "a device", "vendor": "v", "type": "CPU"}},
           "tuned": {"01_naive": {"defines": {"WG": 64}}}}
    before = tuned_values.TUNED.read_text()
    bench.save_tuned(out, path)
    assert tuned_values.read(path)["a device"]["gemm"]["01_naive"]["defines"] == {"WG": 64}
    assert tuned_values.TUNED.read_text() == before


def test_commit_without_tune_is_refused(capsys):
    assert bench.main(["--op", "gemm", "--layers", "gemm_small", "--commit", "--out", "-"]) == 2
    assert "--commit" in capsys.readouterr().err


def test_course_tune_cache_is_described_as_a_file(monkeypatch, tmp_path):
    readme = (ROOT / "README.md").read_text()
    said = [readme[m.start():m.start() + 100] for m in re.finditer("COURSE_TUNE_CACHE", readme)]
    assert said and all("file" in s and "moves it" not in s for s in said), said
    doc = " ".join(tuned_values.__doc__.split())
    assert "the file ``COURSE_TUNE_CACHE`` names" in doc and "not a folder" in doc
    monkeypatch.setenv("COURSE_TUNE_CACHE", str(tmp_path / "mine.json"))
    assert tuned_values.user_cache() == tmp_path / "mine.json"
