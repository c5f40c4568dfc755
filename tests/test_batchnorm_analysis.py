"""Chapter 14's readings of runs (helpers/analysis/batchnorm.py): each says what the run's numbers
say, and changes when they change."""
import copy

import pytest

from helpers.analysis import batchnorm as bn


@pytest.fixture(scope="module")
def forward():
    runs = bn.recorded("batchnorm_forward")
    if not runs:
        pytest.skip("no recorded GPU ladder of the batch norm in results/")
    return runs[0]


def test_recorded_takes_the_activation_apart(forward):
    assert all(r["settings"].get("activation", "none") == "none" for r in bn.recorded("batchnorm_forward"))
    assert all(r["settings"]["activation"] == "relu" for r in bn.recorded("batchnorm_backward", "relu"))
    assert bn.recorded("batchnorm_forward", "relu") == []


def test_target_line_follows_the_recorded_share(forward):
    row = next(r for r in forward["rows"] if r["layer"] == bn.TARGET_LAYER and r["stage"] == "fused")
    line = bn.target_line(forward)
    assert f"{row['pct_copy']:.0f}% of the measured copy bandwidth" in line
    assert ("target 80%: met" in line) == (row["pct_copy"] >= 80)
    slow = copy.deepcopy(forward)
    for r in slow["rows"]:
        if r["layer"] == bn.TARGET_LAYER and r["stage"] == "fused":
            r["pct_copy"], r["x_vendor"] = 79.0, 0.99
    assert "target 80%: not met" in bn.target_line(slow) and "target x1.00: not met" in bn.target_line(slow)
    none = copy.deepcopy(forward)
    none["rows"] = [r for r in none["rows"] if r["layer"] != bn.TARGET_LAYER]
    assert "has no bn256@56 row" in bn.target_line(none)


def test_summary_line_names_the_fastest_stage(forward):
    line = bn.summary_line(forward)
    assert forward["device"]["name"] in line and "fastest stage" in line and "PyTorch" in line
    fast = copy.deepcopy(forward)
    for r in fast["rows"]:
        if r["stage"] == "welford":
            r["gbps"] *= 100
    assert "fastest stage 03_welford" in bn.summary_line(fast)


def test_panel_note_only_where_a_stage_is_missing(forward):
    note = bn.panel_note(forward)
    have = {r["stage"] for r in forward["rows"]}
    assert (note is None) == ("one_pass" in have)
    whole = copy.deepcopy(forward)
    whole["rows"] += [dict(r, stage=s, key=f"0{i}_{s}") for i, s in enumerate(("one_pass",), 6) for r in whole["rows"][:1]]
    assert bn.panel_note(whole) is None


def test_per_layer_table_splits_the_time_at_the_copy_bandwidth(forward):
    text = bn.per_layer_table(forward).splitlines()
    layers = list(dict.fromkeys(r["layer"] for r in forward["rows"]))
    assert len(text) == 2 + len(layers) + 1
    row = next(r for r in forward["rows"] if r["layer"] == layers[0] and r["stage"] == "fused")
    at_copy = row["min_bytes"] / forward["roofline"]["copy_gbps"] / 1e3
    us = 1e3 * row["median_ms"]
    fields = text[2].split()
    assert fields[0] == layers[0]
    assert float(fields[2]) == pytest.approx(us, abs=0.05) and float(fields[3]) == pytest.approx(at_copy, abs=0.05)
    assert float(fields[4]) == pytest.approx(us - at_copy, abs=0.1)


def test_stage02_lines_group_the_layers_by_whether_a_slab_fits(forward):
    lines = bn.stage02_lines(forward)
    wg = next(r for r in forward["rows"] if r["stage"] == "local_two_pass")["defines"]["WG"]
    fits, big = lines[1], lines[2]
    for r in forward["rows"]:
        if r["stage"] == "naive":
            hw = r["shape"]["h"] * r["shape"]["w"]
            assert f"{r['layer']} x" in (fits if hw <= wg else big)
