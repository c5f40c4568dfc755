"""Pictures and exercise checks of chapters 06-08: what they draw, checked without looking."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from helpers.chapters import exercises  # noqa: E402
from helpers.chapters import pictures_combining as P  # noqa: E402
from helpers.ops.reference import output_size  # noqa: E402


def test_weight_block_loads_follow_ping_and_pong():
    seen = set()
    for v in range(9):
        d = P.weight_block_loads(v)
        assert d["register"] == ("ping" if v % 2 == 0 else "pong")
        new = set(d["complete_depths"]) - seen
        for i in new:                                   # complete exactly when its last float arrives
            assert (9 * i + 8) // 16 == v
        seen |= new
    assert seen == set(range(16))
    with pytest.raises(ValueError):
        P.weight_block_loads(9)
    fig, ax = plt.subplots()
    assert P.draw_weight_block(ax, 4)["complete_depths"] == list(range(8))
    plt.close(fig)


def test_weight_requests_per_16_depths():
    r = P.weight_requests_per_16_depths(64)
    assert r["stage 06"] == {"requests": 9, "line visits": 9}
    assert r["stage 04-05"]["requests"] == 32 and r["stage 04-05"]["line visits"] == 32 + 7


@pytest.mark.parametrize("w,stride,pad", [(14, 1, 1), (9, 2, 1), (7, 3, 2), (5, 1, 0)])
def test_width_columns_match_the_definition(w, stride, pad):
    ow_n = output_size(w, 3, stride, pad)
    for xpw in (1, 3, 4):
        for x0 in range(0, w, xpw):
            cols = P.width_columns(x0, xpw, w, stride, pad)
            assert len(cols) == xpw + 2
            for c in cols:
                # the output ow that input x0+p meets through tap s: ow*stride = x0 + p + pad - s
                for p, s in c["users"]:
                    ow_s = x0 + p + pad - s
                    exists = ow_s >= 0 and ow_s % stride == 0 and ow_s // stride < ow_n
                    assert (c["ow"] is not None) == exists
                    if exists:
                        assert c["ow"] == ow_s // stride


def test_draw_width_tables_reports_inside_only_for_stride_1_interior():
    fig, ax = plt.subplots()
    assert P.draw_width_tables(ax, 14, 4, 4, 1)["inside"] is True
    assert P.draw_width_tables(ax, 14, 0, 4, 1)["inside"] is False
    d = P.draw_width_tables(ax, 14, 4, 4, 2)
    assert d["inside"] is False and d["existing"] == 3
    plt.close(fig)


def test_live_weights_and_reuse():
    fig, ax = plt.subplots()
    peaks = P.draw_live_weights(ax, cpw=2, splits=(16, 4, 1))["peak_live"]
    assert peaks[16] == 2 * 144 and peaks[1] < peaks[4] < peaks[16]
    plt.close(fig)
    r = P.reuse_per_block(8, 4)
    assert r["per weight float"] == 4 and r["per dy float"] == 16


def test_time_against_and_tuning_tables():
    rows = [{"layer": "a", "defines": {"CPW": c}, "median_ms": 1.0 / c} for c in (1, 2, 4)]
    ax = P.time_against(rows, "CPW")
    assert len(ax.lines) == 1
    plt.close(ax.figure)
    assert isinstance(P.tuning_tables(), list)


def test_exercise_checks_accept_right_and_reject_wrong(capsys):
    assert exercises.check_straddling_depths(lambda d, t, w: [i for i in range(d) if (t * i) % w + t > w])
    assert not exercises.check_straddling_depths(lambda d, t, w: list(range(d)))
    assert exercises.check_weight_vectors(lambda a, b: range(9 * a // 4, (9 * b + 8) // 4 + 1))
    assert not exercises.check_weight_vectors(lambda a, b: range(a, b + 1))
    table = {a: [c["ow"] for c in P.width_columns(*a)] for a in
             [(0, 4, 14, 1, 1), (12, 4, 14, 1, 1), (4, 4, 14, 2, 1), (0, 3, 5, 1, 0), (2, 1, 7, 3, 2), (6, 8, 9, 2, 1)]}
    assert exercises.check_width_columns(lambda *a: table[a])          # the picture's columns are the check's
    assert not exercises.check_width_columns(lambda x0, xpw, w, s, p: [x0 - 1 + u for u in range(xpw + 2)])
    out = capsys.readouterr().out
    assert out.count("Correct:") == 3 and out.count("Not yet:") == 3
