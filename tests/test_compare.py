"""The comparison with the vendor libraries: the fastest checked float32 stage per layer, against
the vendor's time from the same run, read from results/."""
import pytest

from helpers.analysis import compare


def _run(file, rows, vendor, op="conv_dgrad", device="GPU X", kind="GPU"):
    return {"op": op, "layer_set": "s", "file": file, "device": {"name": device, "type": kind},
            "rows": rows, "vendor": vendor}


def _row(key, ms, layer="a", **kw):
    return {"layer": layer, "problem": f"P {layer}", "key": key, "median_ms": ms, **kw}


@pytest.fixture
def runs(monkeypatch):
    recorded = [
        _run("one.json", [_row("02_naive", 4.0), _row("08_width", 2.0), _row("09_fast", 0.5, verified=False),
                          _row("13_tc_fp16", 0.1, precision="fp16"), _row("09_prefetch", 3.0, layer="b")],
             [{"layer": "a", "median_ms": 1.0, "name": "cuDNN"}, {"layer": "b", "median_ms": 1.5, "name": "cuDNN"}]),
        _run("two.json", [_row("10_padded", 1.6, ran="08_width"), _row("10_padded", 1.0, layer="b")],
             [{"layer": "a", "median_ms": 2.0, "name": "cuDNN"}, {"layer": "b", "median_ms": 1.0, "name": "cuDNN"}]),
        _run("cpu.json", [_row("02_naive", 0.01)], [{"layer": "a", "median_ms": 1.0}], kind="CPU"),
        _run("bn.json", [_row("05_fused", 0.5)], [{"layer": "a", "median_ms": 1.0, "library": "PyTorch 2"}],
             op="batchnorm_forward"),
        _run("bnb.json", [_row("05_fused", 0.5)], [{"layer": "a", "median_ms": 3.0, "kernels_median_ms": 0.75,
                                                    "library": "PyTorch 2"}], op="batchnorm_backward"),
        _run("fwd.json", [_row("05_wino_blocked", 0.5)], [{"layer": "a", "median_ms": 1.0, "kernels_median_ms": 0.9,
                                                         "name": "cuDNN"}], op="conv_forward"),
    ]
    monkeypatch.setattr(compare, "_runs", lambda: iter(r for r in recorded if r["device"]["type"] == "GPU"))
    return recorded


def test_best_stage_per_layer_with_its_own_runs_vendor(runs):
    rows = {(b["op"], b["layer"]): b for b in compare.best_vs_vendor()}
    a = rows[("conv_dgrad", "a")]
    # unverified and fp16 rows never count; the fastest is the fallback that ran, with run two's vendor
    assert (a["stage"], a["ms"], a["vendor_ms"], a["file"]) == ("08_width", 1.6, 2.0, "two.json")
    assert a["x_vendor"] == pytest.approx(2.0 / 1.6)
    b = rows[("conv_dgrad", "b")]
    assert (b["stage"], b["x_vendor"]) == ("10_padded", 1.0)
    assert rows[("batchnorm_forward", "a")]["vendor"] == "PyTorch"
    # autograd's batch norm backward (host work between its kernels): its kernels added up; a
    # convolution: first kernel to last, as the course's stages are timed
    assert rows[("batchnorm_backward", "a")]["vendor_ms"] == 0.75
    assert rows[("conv_forward", "a")]["vendor_ms"] == 1.0
    assert [r["op"] for r in compare.best_vs_vendor("batchnorm_forward")] == ["batchnorm_forward"]
    with pytest.raises(ValueError, match="GPU X"):      # an unknown device: refused, naming the recorded ones
        compare.best_vs_vendor(device="other")
    assert compare.best_vs_vendor(device="gpu-x") == compare.best_vs_vendor(device="GPU X")


def test_readme_section_summarises_each_layer_set(runs):
    text = compare.readme_section()
    assert "| input gradient, s | GPU X | cuDNN | ×1.12 (×1.00 to ×1.25) | 1 of 2 | `08_width`, `10_padded` |" in text
    assert "batch norm forward, s" in text and "| 1 of 1 |" in text


def test_each_operation_is_named_and_ordered_by_where_it_is_defined(runs):
    """The tables name an op by its module's NAME and order the ops as the registry lists them, so a
    new op needs no edit here; an op of an old run that the registry no longer has keeps its key."""
    from helpers.ops import op_module
    from helpers.stages import OPS
    assert [compare.op_name(op) for op in OPS] == [op_module(op).NAME for op in OPS]
    assert compare.op_name("conv_retired") == "conv_retired"
    ops = [r["op"] for r in compare.best_vs_vendor()]
    assert ops == sorted(ops, key=OPS.index)


def test_recorded_results_give_a_row_per_gpu_layer():
    rows = compare.best_vs_vendor()
    if not rows:
        pytest.skip("no GPU run with vendor times in results/")
    assert {r["op"] for r in rows} >= {"conv_dgrad", "batchnorm_forward"}
    for r in rows:
        assert r["x_vendor"] == pytest.approx(r["vendor_ms"] / r["ms"])
    assert "x vendor" in compare.table(rows).splitlines()[0]
    assert compare.table([]).startswith("No GPU run")


def test_no_recorded_product_beats_the_measured_fma_peak():
    """A float32 product that performs every multiply-add (a GEMM, a direct or GEMM-lowered
    convolution, a library's SGEMM) cannot run faster than the device's measured FMA peak: a time
    that does measured something else (only a library's last kernel, say). Winograd stages, stage
    auto (which may pick one) and the convolution vendors (cuDNN picks FFT and Winograd too) do
    fewer multiplications and are left out."""
    from helpers.analysis.results import load
    from helpers.stages import get_stage
    checked = 0
    for run in load("**/*.json"):
        peak = run.get("roofline", {}).get("fma_gflops")
        if run.get("kind") != "bench" or not peak:
            continue
        entries = [("library " + v["name"], v) for v in run.get("libraries", [])]
        if run["op"] == "gemm":
            entries += [("vendor " + v.get("name", ""), v) for v in run.get("vendor", [])]
        for r in run["rows"]:
            stage = get_stage(run["op"], r["ran"])
            fewer = "winograd" in (stage.family_name, stage.launch)      # conv_wgrad's 04 launches as winograd
            if r.get("precision", "fp32") == "fp32" and not fewer and not stage.choose:
                entries.append((r["ran"], r))
        for what, e in entries:
            assert e["gflops"] <= 1.05 * peak, (
                f"{run['file']}: {what} on {e['layer']} at {e['gflops']:,.0f} GFLOP/s, above the measured "
                f"FMA peak ({peak:,.0f}): its time cannot be the whole product")
            checked += 1
    if not checked:
        pytest.skip("no recorded run with a measured peak in results/")
