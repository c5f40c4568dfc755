"""Chapter 11b's reading of the zoo runs (helpers/analysis/zoo.py), on rows made up for the test:
the kinds of layer, the stages auto ran on each kind, the verdict's counts."""
from helpers.analysis.zoo import by_kind, kind, ran, verdict


def row(name, kernel, stride, x, stage, first=1.0):
    return {"layer": name, "shape": {"kernel": kernel, "stride": stride}, "x_vendor": x, "ran": stage,
            "first_call_s": first}


ROWS = [row("a", 1, 1, 0.5, "11_igemm"), row("b", (1, 1), 1, 2.0, "11_igemm"), row("c", 3, 1, 1.5, "12_winograd4"),
        row("d", (1, 7), 1, 0.1, "16_any_shape", first=4.0), row("e", 1, (2, 2), 1.0, "11_im2col")]


def test_a_kind_is_the_kernel_and_the_stride_however_they_are_written():
    assert [kind(r) for r in ROWS] == ["1x1 s1", "1x1 s1", "3x3 s1", "1x7 s1", "1x1 s2"]
    assert kind(row("f", (3, 3), (1, 2), 1, "x")) == "3x3 s1,2"


def test_kinds_come_furthest_behind_first_and_the_stages_each_ran():
    kinds = by_kind(ROWS)
    assert list(kinds)[0] == "1x7 s1" and kinds["1x1 s1"] == (2, 1.0)
    assert ran(ROWS, "1x1 s1") == {"11_igemm": 2} and ran(ROWS, "5x5 s1") == {}


def test_the_verdict_counts_layers_at_the_vendor_and_slow_first_calls():
    text = verdict(ROWS)
    assert text.startswith("3 of 5 layers at x1.0 or better") and "slowest x0.10 (d)" in text
    assert "first calls within 3 s: 4 of 5, slowest 4.0 s (d)" in text
