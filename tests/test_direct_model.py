"""The Python models of the direct kernels (helpers/chapters/direct.py), their pictures and exercises.

The models are what chapters 03-05 count and draw, so they are checked against independent
definitions here, and against the kernels' own behaviour where a kernel decides something.
"""
import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers.chapters import direct, exercises
from helpers.chapters import pictures_direct  # noqa: E402
from helpers.ops.reference import output_size  # noqa: E402

from shapes import conv_grid  # noqa: E402


def brute_valid(h, x, k, stride, pad, oh_n, ow_n):
    """Independent definition: (r, s) is valid iff some output (oh, ow) read input (h, x) through it."""
    t = np.zeros((k, k), dtype=bool)
    for oh, ow, r, s in itertools.product(range(oh_n), range(ow_n), range(k), range(k)):
        if oh * stride + r - pad == h and ow * stride + s - pad == x:
            t[r, s] = True
    return t


@pytest.mark.parametrize("k,stride,pad,size", [(3, 1, 1, 6), (3, 2, 1, 7), (5, 3, 4, 5), (1, 1, 0, 3), (2, 2, 1, 5)])
def test_valid_table_matches_definition(k, stride, pad, size):
    oh_n = output_size(size, k, stride, pad)
    for h, x in itertools.product(range(size), repeat=2):
        assert np.array_equal(direct.valid_table(h, x, k, k, stride, pad, oh_n, oh_n),
                              brute_valid(h, x, k, stride, pad, oh_n, oh_n))


@pytest.mark.parametrize("shape", [(1, 2, 8, 8, 4, 3, 1, 1), (2, 1, 7, 5, 3, 3, 2, 1), (1, 1, 5, 6, 2, 5, 3, 4),
                                   (1, 1, 1, 1, 2, 1, 1, 0), (1, 3, 9, 4, 5, 2, 2, 0), (1, 1, 4, 3, 2, 3, 1, 2)])
def test_check_counts_walk_equals_formula(shape):
    f = direct.checks_formula(*shape)
    assert direct.count_checks(*shape) == f["naive"]
    assert direct.count_checks(*shape, memoized=True) == f["memoized"]
    assert f["naive"]["checks"] == shape[4] * f["memoized"]["checks"]       # exactly K times fewer


def test_rows_reached_same_padding_closed_form():
    for h in (1, 2, 7, 14, 56):
        for k in (1, 3, 5):
            p = (k - 1) // 2
            if h >= p:
                assert direct.rows_reached(h, k, 1, p) == k * h - p * (p + 1)


def test_weight_requests_cover_the_block_exactly_and_stay_inside():
    C, K = 3, 5
    for c, k in itertools.product(range(C), range(K)):
        for vec in (False, True):
            reqs = direct.weight_requests(c, k, K, 64, vec)
            floats = [i for q in reqs for i in range(q["first"], q["first"] + q["count"])]
            assert sorted(floats) == list(range(9 * (c * K + k), 9 * (c * K + k) + 9))
            assert max(floats) < 9 * C * K        # the last block's loads end at the last element
            assert len(reqs) == (2 if vec else 9)


def test_weight_traffic_counts():
    # block offsets in a 16-float line cycle through all 16 values; the 8-wide load crosses for 7
    t = direct.weight_traffic(64, 64, vector=True)
    assert (t["requests"], t["straddling"], t["line_accesses"]) == (128, 28, 156)
    assert direct.weight_traffic(64, 64, vector=False)["line_accesses"] == 576


def test_vector_path_model_is_safe_and_exercised_by_the_grid():
    for w, pad in itertools.product(range(1, 30), range(0, 3)):
        if w + 2 * pad < 3:
            continue
        ow = output_size(w, 3, 1, pad)
        for x in range(w):
            if direct.takes_vector_path(x, ow, 3, 1, pad):
                cols = direct.window_columns(x, 3, 1, pad)
                assert cols == [x + pad - 2, x + pad - 1, x + pad] and 0 <= cols[0] and cols[-1] < ow
    # the test grid reaches both sides of stage 05's test, and both sides of stage 04's
    grid = conv_grid()
    vec = [c for c in grid if c["kernel"] == 3 and c["stride"] == 1 and direct.vector_fraction(c["w"], 3, 1, c["padding"]) > 0]
    assert len(vec) >= 10
    assert any(direct.vector_fraction(c["w"], 3, 1, c["padding"]) < 1 for c in vec)
    assert any(c["kernel"] == 3 and c["stride"] > 1 for c in grid)
    assert any(c["kernel"] != 3 for c in grid)


def test_lane_reads_overlap():
    d = direct.lane_reads(4, 4, 14)          # four interior lanes: 12 floats asked, 6 distinct
    assert (d["asked"], d["distinct"], d["vector_requests"], d["scalar_requests"]) == (12, 6, 4, 0)
    d = direct.lane_reads(0, 4, 14, stride=2)
    assert d["vector_requests"] == 0


def test_pictures_return_what_they_draw():
    tables = pictures_direct.draw_valid_tables([(0, 0), (3, 3)], 8, 8)
    assert tables[0].sum() == 4 and tables[1].sum() == 9
    fig, scalar, vector = pictures_direct.weight_lines_figure(64, 0, blocks=16)
    assert scalar["requests"] == 9 * 16 and vector["requests"] == 2 * 16 and vector["straddling"] == 7
    _, ax = plt.subplots()
    d = pictures_direct.draw_input_windows(ax, w=14, x0=0, lanes=4)
    assert [lane["vector"] for lane in d["lanes"]] == [False, True, True, True]
    assert d["lanes"][0]["columns"] == [0, 1]
    plt.close("all")


def test_widgets_build():
    pytest.importorskip("ipywidgets")
    w = pictures_direct.weight_lines_widget(K=16)
    w.children[1].value = 3
    v = pictures_direct.input_windows_widget(w=10)
    v.children[0].value = 5
    t = pictures_direct.valid_tables_widget(6, 5)
    t.children[0].value = 3
    t.children[4].value = 4                  # a padding too large for the kernel: a message, no error
    plt.close("all")


def test_ladder_helpers_without_recorded_runs(capsys):
    run = {"op": "conv_dgrad", "layer_set": "small", "date": "2026-01-01", "vendor": [],
           "device": {"name": "dev", "platform": "p", "driver": "d"},
           "rows": [{"layer": "a", "key": f"0{n}_s{n}", "number": n, "stage": f"s{n}", "median_ms": t,
                     "gflops": 1 / t, "x_first": 4 / t} for n, t in [(2, 4.0), (3, 2.0), (4, 3.0)]]}
    assert [r["number"] for r in pictures_direct.upto(run, 3)["rows"]] == [2, 3]
    text = pictures_direct.describe_step(run, 4)
    assert "1.50x slower than 03_s3" in text[1] and "1.33x the speed of 02_s2" in text[1]
    assert "faster" in pictures_direct.describe_step(run, 3)[1]
    plt.close("all")


def test_exercise_checks_accept_the_right_answer_and_reject_a_wrong_one(capsys):
    def table(h, x, k, s, p, hh, ww):          # written out, as a learner would (the check refuses
        oh_n, ow_n = output_size(hh, k, s, p), output_size(ww, k, s, p)    # a call to valid_table)

        def meets(i, off, n):
            return i + p - off >= 0 and (i + p - off) % s == 0 and (i + p - off) // s < n
        return np.array([[meets(h, r, oh_n) and meets(x, c, ow_n) for c in range(k)] for r in range(k)])
    assert exercises.check_valid_table(table)
    assert not exercises.check_valid_table(lambda h, x, k, s, p, hh, ww: np.ones((k, k), bool))

    assert exercises.check_block_lines(lambda c, k, K, L: (9 * (c * K + k) + 8) // (L // 4) - 9 * (c * K + k) // (L // 4) + 1)
    assert not exercises.check_block_lines(lambda c, k, K, L: 1)

    def cols(w, p):
        ow = w + 2 * p - 2
        return max(0, min(w - 1, ow - 1 - p) - max(0, 2 - p) + 1)
    assert exercises.check_vector_columns(cols)
    assert not exercises.check_vector_columns(lambda w, p: w - 2)
    out = capsys.readouterr().out
    assert out.count("Correct") == 3 and out.count("Not yet") == 3


def test_divergent_warps():
    # 56-wide rows, 32 lanes: in every 7 warps (4 rows) 5 hold a row end
    d = direct.divergent_warps(56, 56, warp=32, wg=64)
    assert (d["groups"], d["both"], d["vector_only"], d["scalar_only"]) == (98, 70, 28, 0)
    assert direct.divergent_warps(7, 7, warp=32)["both"] == 2
    assert direct.divergent_warps(8, 8, warp=32, stride=2)["scalar_only"] == 2
    # lanes of one group never mix when the group is one row's interior
    assert direct.divergent_warps(1, 40, warp=8, pad=1)["vector_only"] == 3


def test_weight_lines_with_other_load_patterns():
    # 16 output channels through nine line-aligned 16-wide loads (the pattern of a later stage)
    _, ax = plt.subplots()
    d = pictures_direct.draw_weight_lines(ax, K=64, blocks=16, line_bytes=64,
                                          requests=[(16 * i, 16) for i in range(9)], label="16-wide")
    assert (d["requests"], d["line_accesses"], d["straddling"]) == (9, 9, 0)
    plt.close("all")


def test_recorded_step_reads_the_recorded_runs_or_says_none(monkeypatch):
    from helpers.chapters import pictures_direct
    from helpers.analysis import results
    lines = pictures_direct.recorded_step(5)
    if results.find("conv_dgrad", "resnet50"):
        assert any("05_input_vec" in l and "over 02_naive" in l for l in lines)
    monkeypatch.setattr(results, "find", lambda *a, **k: [])
    assert pictures_direct.recorded_step(5)[0].startswith("No GPU run of conv_dgrad over 'resnet50'")
