"""helpers/analysis/pairs.py: recorded comparisons side by side (a switch off and on; two stages of
one run beside the vendor), on synthetic runs and on the recorded files the chapters print."""
import pytest

from helpers.analysis import pairs


def _row(layer, key, ms, ran=None, **defines):
    return {"layer": layer, "shape": {"name": layer}, "key": key, "stage": key[3:], "ran": ran or key, "path": "fallback" if ran else "only",
            "defines": defines, "median_ms": ms, "q1_ms": ms * 0.99, "q3_ms": ms * 1.01}


def test_pair_rows_ratio_spread_and_fallback():
    off = {"file": "a0.json", "rows": [_row("l1", "05_s", 2.0, PF=0), _row("l2", "05_s", 1.0, ran="04_t")]}
    on = {"file": "a1.json", "rows": [_row("l1", "05_s", 1.0, PF=1), _row("l2", "05_s", 1.005, ran="04_t")]}
    rows = pairs.pair_rows(off, on, "PF")
    assert [r["ratio"] for r in rows] == pytest.approx([2.0, 1 / 1.005])
    assert [r["apart"] for r in rows] == [True, False]          # 1.0 +- 1 % against 1.005 +- 1 %: overlapping


def test_pair_rows_refuses_a_run_built_without_the_switch():
    off = {"file": "a0.json", "rows": [_row("l1", "05_s", 2.0, PF=1)]}
    on = {"file": "a1.json", "rows": [_row("l1", "05_s", 1.0, PF=1)]}
    with pytest.raises(ValueError, match="PF=1 and 1, not 0 and 1"):
        pairs.pair_rows(off, on, "PF")


def test_a_parameter_that_sets_the_switch_may_differ_with_it():
    """Stage 04's LOAD_LOCAL_W sets its kernel's LOAD_LOCAL: named in set_by it differs with the
    switch; any other parameter that differs is still refused."""
    off = {"file": "a0.json", "rows": [_row("l1", "04_w", 2.0, LOAD_LOCAL=0, LOAD_LOCAL_W=1 << 20, TM=64)]}
    on = {"file": "a1.json", "rows": [_row("l1", "04_w", 1.0, LOAD_LOCAL=1, LOAD_LOCAL_W=1, TM=64)]}
    with pytest.raises(ValueError, match="differs in LOAD_LOCAL_W besides LOAD_LOCAL"):
        pairs.pair_rows(off, on, "LOAD_LOCAL")
    assert [r["ratio"] for r in pairs.pair_rows(off, on, "LOAD_LOCAL", set_by=("LOAD_LOCAL_W",))] == [2.0]
    on["rows"][0]["defines"]["TM"] = 128
    with pytest.raises(ValueError, match="differs in TM"):
        pairs.pair_rows(off, on, "LOAD_LOCAL", set_by=("LOAD_LOCAL_W",))


def test_a_switch_the_stage_kept_off_is_the_same_code_in_both_runs(monkeypatch):
    """A row at 0 in both runs (the stage's rule kept the switch off on that layer) is labelled and
    left out of the mean, as a fallback; one at 1 in both is still refused (above)."""
    off = {"file": "a0.json", "rows": [_row("l1", "05_s", 2.0, PF=0), _row("l2", "05_s", 1.0, PF=0)]}
    on = {"file": "a1.json", "rows": [_row("l1", "05_s", 1.0, PF=1), _row("l2", "05_s", 1.2, PF=0)]}
    assert [r["kept_off"] for r in pairs.pair_rows(off, on, "PF")] == [False, True]
    monkeypatch.setattr(pairs, "recorded_pairs", lambda *args, **kwargs: [(off, on)])
    monkeypatch.setattr(pairs, "device_label", lambda run: "a device")
    text = "\n".join(pairs.pair_table("conv_dgrad", "any", "PF"))
    assert "05_s (kept off)" in text and "geometric mean 2.00 over the 1 layers it ran itself" in text
    assert "PF kept off by the stage's own rule on l2" in text


def test_recorded_switch_pairs():
    rowcopy = "\n".join(pairs.pair_table("conv_dgrad", "resnet50", "ROWCOPY", show=("TX", "TY")))
    assert "10_swizzle: t(ROWCOPY=0) / t(ROWCOPY=1) geometric mean 1.00 over the 4 layers" in rowcopy
    assert "08_width (fallback)" in rowcopy
    prefetch = "\n".join(pairs.pair_table("conv_forward", "winograd6", "PREFETCH"))
    assert "geometric mean 1.09 over the 6 layers it ran itself (from 1.03 to 1.15)" in prefetch
    assert pairs.pair_table("conv_forward", "vgg16", "PREFETCH")[0].startswith("No pair of runs")


def test_recorded_stage_pair():
    text = "\n".join(pairs.stage_pair_table("conv_dgrad", "vgg16", "winograd", "winograd4", tag="wino4"))
    assert "12_winograd: ran itself on 4 of 4 layers" in text and "12_winograd4: ran itself on 4 of 4 layers" in text
    assert "12_winograd4 faster than 12_winograd on 3 of 4 layers" in text
    assert "12_winograd 1.12 (faster on 1 of 4), 12_winograd4 1.18 (faster on 2 of 4)" in text
    assert "no recorded GPU run" in pairs.stage_pair_table("conv_dgrad", "resnet50", "winograd", "winograd4", tag="wino4")[0]


def test_rowcopy_counts_against_the_model_and_the_target():
    from helpers.chapters.bank_evidence import rowcopy_copies, rowcopy_counts
    text = "\n".join(rowcopy_counts())
    assert "10_swizzle ROWCOPY=1    32x4       28,672     28,672     1.000    99.1%" in text
    assert "32x4: 99.1% -> met" in text
    copies = rowcopy_copies()
    assert copies[1].split() == ["32x4", "816", "->", "864", "7", "->", "7", "22", "->", "0"]


def test_two_switches_together_and_a_switch_on_top_of_another():
    """``switches``: every named switch goes 0 -> 1 and nothing else differs; ``tags``: the runs
    to compare where they are not name0/name1."""
    off = {"file": "a0.json", "rows": [_row("l1", "05_s", 2.0, A=0, B=0, T=64)]}
    on = {"file": "a1.json", "rows": [_row("l1", "05_s", 1.0, A=1, B=1, T=64)]}
    assert pairs.pair_rows(off, on, "A+B", switches=("A", "B"))[0]["ratio"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="B=0 and 0, not 0 and 1"):
        pairs.pair_rows(off, {"file": "a1.json", "rows": [_row("l1", "05_s", 1.0, A=1, B=0, T=64)]}, "A+B", ("A", "B"))
    with pytest.raises(ValueError, match="differs in T besides A"):
        pairs.pair_rows(off, {"file": "a1.json", "rows": [_row("l1", "05_s", 1.0, A=1, B=0, T=128)]}, "A")


def test_recorded_gemm_core_switches():
    lds4 = "\n".join(pairs.pair_table("gemm", "gemm", "GEMM_LDS4", tags=("lds4_0", "lds4_1")))
    assert "t(GEMM_LDS4=0) / t(GEMM_LDS4=1) geometric mean 1.11 over the 4 layers" in lds4
    on_top = "\n".join(pairs.pair_table("gemm", "gemm", "GEMM_PREFETCH", tags=("lds4_1", "lds4_1_prefetch1")))
    assert "geometric mean 1.36 over the 4 layers it ran itself (from 1.23 to 1.51)" in on_top
    both = "\n".join(pairs.pair_table("conv_dgrad", "vgg16", "LDS4+PF", tags=("lds4pf0", "lds4pf1"),
                                      switches=("GEMM_LDS4", "GEMM_PREFETCH")))
    assert "12_winograd4: t(LDS4+PF=0) / t(LDS4+PF=1) geometric mean 1.26 over the 4 layers" in both


def test_stage_pair_rows_keep_the_layers_the_stage_ran_itself():
    """The rows chapter 12b reads per kernel: the stage's own, by layer, in the off and the on run."""
    off, on = pairs.stage_pair_rows("conv_dgrad", "edge", "winograd4", ("joint_transforms0", "joint_transforms1"))
    assert set(off) == set(on) and off, "the recorded joint_transforms pair over edge is missing"
    assert all(r["stage"] == "winograd4" and r["ran"] == r["key"] for r in [*off.values(), *on.values()])
    assert "res128@56/s2/n1" not in on                 # stride 2: the fallback ran, so the layer is left out
    assert {name for name, _ in on["res64@56/n1"]["steps_ms"]} >= {"wino_transforms", "wino_gemm"}


def test_kernel_times_and_the_time_outside_them():
    from helpers.analysis.summary import kernels_ms, outside_kernels_ms
    row = {"median_ms": 1.0, "steps_ms": [["wino_filter", 0.1], ["wino_input", 0.2], ["wino_gemm", 0.5]]}
    assert kernels_ms(row) == pytest.approx(0.8)
    assert kernels_ms(row, ("wino_filter", "wino_input")) == pytest.approx(0.3)
    assert outside_kernels_ms(row) == pytest.approx(0.2)


def test_ladder_steps_ranked_and_the_vendors_method():
    """Chapter 12's ladder stage by stage (its recorded headline numbers), the ranking of a CPU
    ladder, and the method cuDNN ran, named from its kernels."""
    from helpers.analysis.results import find
    from helpers.analysis.summary import ladder_steps, ranked, vendor_algorithm
    run = find("conv_forward", "winograd6")[0]
    text = "\n".join(ladder_steps(run, "01_wino_naive", "05_wino_blocked"))
    assert "04_wino_transposed" in text and "x2.00 the stage before" in text and "x1.15 cuDNN" in text
    assert "05_wino_blocked / 01_wino_naive: x26.5" in text
    s = {"a": {"x_first": 1.0}, "b": {"x_first": 3.0}, "c": {"x_first": 2.0}}
    assert ranked(s) == ["b", "c", "a"] and ranked(s, ["a", "c"]) == ["c", "a"]
    assert vendor_algorithm({"kernel_names": ["sm80_xmma_gemm_cf32", "void fft2d_r2c_32x32<float>"]}) == "FFT"
    assert vendor_algorithm({"kernel_names": ["sm80_xmma_fprop_implicit_gemm_f32f32"]}) == "implicit GEMM"
    assert vendor_algorithm({"kernel_names": ["void cudnn::detail::dgrad_engine<float>"]}) == "not an FFT"
