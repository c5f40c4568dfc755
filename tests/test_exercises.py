"""Every exercise check accepts a right answer, rejects the typical wrong ones (off-by-one, swapped
order, a missing check) with a message that does not print the expected answer, and says "not
answered yet" for the student edition's stub."""
import numpy as np
import pyopencl as cl
import pytest

from helpers.chapters import exercises as ex
from helpers.chapters.direct import valid_table
from helpers.chapters.kernel_exercises import GAPS, kernel_gap
from helpers.engine.backends.opencl import ClPlan
from helpers.ops import reference
from helpers.ops.reference import output_size


@pytest.fixture
def own_ctx(ctx):
    """A context of the test's own for learners' wrong kernels: on a GPU a kernel that faults (a
    local-memory index past its tile, say) leaves its context unusable, and the session's must survive."""
    return cl.Context(ctx.devices)


def stub(*args):
    raise NotImplementedError()


def _run(check, fn, capsys):
    ok = check(fn)
    return ok, capsys.readouterr().out


def _names_each_mistake(check, wrong: dict, capsys, hidden: str | None = None):
    """Each wrong answer is refused with "Not yet" and the words that name its mistake (and
    without ``hidden``, the expected answer); the student edition's stub is "Not answered yet"."""
    for says, answer in wrong.items():
        capsys.readouterr()
        ok, out = _run(check, answer, capsys)
        assert not ok and says in out and "Not yet" in out, (says, out)
        assert hidden is None or hidden not in out
    capsys.readouterr()
    ok, out = _run(check, stub, capsys)
    assert not ok and "Not answered yet" in out


def _macs(n, c, h, w, k, r, s, st, p):
    """The multiply-adds the naive kernel performs: per work-item, the (r, s) whose output exists."""
    rows = sum(1 for i in range(h) for q in range(r) if (i + p - q) % st == 0 and 0 <= (i + p - q) // st < output_size(h, r, st, p)
               and i + p - q >= 0)
    cols = sum(1 for i in range(w) for q in range(s) if (i + p - q) % st == 0 and 0 <= (i + p - q) // st < output_size(w, s, st, p)
               and i + p - q >= 0)
    return n * c * k * rows * cols


def _f23(d, g):
    m1, m4 = (d[0] - d[2]) * g[0], (d[1] - d[3]) * g[2]
    m2 = (d[1] + d[2]) * ((g[0] + g[1] + g[2]) / 2)
    m3 = (d[2] - d[1]) * ((g[0] - g[1] + g[2]) / 2)
    return [m1 + m2 + m3, m2 - m3 - m4]


def _times_ms(start, end, warmup, scale=1e6):
    return np.array([(b - a) / scale for a, b in zip(start, end)])[warmup:]


def _median_iqr(d):
    return np.median(d), np.percentile(d, 25), np.percentile(d, 75)


RIGHT = {
    "check_timing_summary": lambda s, e, w: _median_iqr(_times_ms(s, e, w)),
    "check_output_size": lambda s, k, st, p: (s + 2 * p - k) // st + 1,
    "check_touched_outputs": lambda h, k, s, p, n: [o for o in range(n) if 0 <= h + p - o * s < k],
    "check_launch": lambda n, c, h, w, wg: (((h * w + wg - 1) // wg * wg, c, n), ((h * w + wg - 1) // wg * wg - h * w) * c * n,
                                            (h * w + wg - 1) // wg * c * n),
    "check_naive_bytes": lambda n, c, h, w, k, r, s, st, p, a: 4 * ((2 if a == "none" else 3) * _macs(n, c, h, w, k, r, s, st, p)
                                                                 + n * c * h * w),
    "check_intensity": lambda n, c, size, k, r, st, p: (
        2 * n * k * output_size(size, r, st, p) ** 2 * c * r * r
        / (4 * (n * k * output_size(size, r, st, p) ** 2 + c * k * r * r + n * c * size * size))),
    "check_valid_table": lambda h, x, k, s, p, H, W: np.array(
        [[(h + p - r) >= 0 and (h + p - r) % s == 0 and (h + p - r) // s < output_size(H, k, s, p)
          and (x + p - c) >= 0 and (x + p - c) % s == 0 and (x + p - c) // s < output_size(W, k, s, p)
          for c in range(k)] for r in range(k)]),
    "check_block_lines": lambda c, k, K, L: ((c * K + k) * 9 + 8) // (L // 4) - (c * K + k) * 9 // (L // 4) + 1,
    "check_vector_columns": lambda W, p: max(0, min(W - 1, W + 2 * p - 3 - p) - max(0, 2 - p) + 1),
    "check_straddling_depths": lambda d, t, w: [i for i in range(d) if (t * i) % w + t > w],
    "check_live_loads": lambda d, t, w: max(-(-((t * i) % w + t) // w) for i in range(d)),
    "check_weight_vectors": lambda a, b: list(range(9 * a // 4, (9 * b + 8) // 4 + 1)),
    "check_width_columns": lambda x0, xpw, W, st, p: [
        (x0 + p - 2 + u) // st if (x0 + p - 2 + u >= 0 and (x0 + p - 2 + u) % st == 0
                                   and (x0 + p - 2 + u) // st < (W + 2 * p - 3) // st + 1) else None
        for u in range(xpw + 2)],
    "check_chan_merge": lambda na, ma, qa, nb, mb, qb: (
        (na, ma, qa) if nb == 0 else
        (na + nb, ma + (mb - ma) * nb / (na + nb), qa + qb + (mb - ma) ** 2 * na * nb / (na + nb))),
    "check_winograd_1d": lambda d, g: _f23(d, g),
    "check_phase_taps": lambda k, s, p: list(range(p, k, s)),
    "check_tile_reuse": lambda tx, ty, cb, kh, kw: tx * ty * cb * kh * kw / ((ty + kh - 1) * (tx + kw - 1)),
    "check_stride_passes": lambda s: int(np.gcd(s, 32)),
    "check_wino_products": lambda n, c, h, w, k, m: n * -(-h // m) * -(-w // m) * (m + 2) ** 2 * c * k,
}

WRONG = {
    "check_timing_summary": [lambda s, e, w: _median_iqr(_times_ms(s, e, 0)),                  # warm-up kept
                             lambda s, e, w: _median_iqr(_times_ms(s, e, w, 1e3))],            # microseconds
    "check_output_size": [lambda s, k, st, p: (s + 2 * p - k) // st,          # off by one
                          lambda s, k, st, p: (s + p - k) // st + 1],         # padding once
    "check_launch": [lambda n, c, h, w, wg: ((h * w, c, n), 0, (h * w + wg - 1) // wg * c * n),     # not rounded up
                     lambda n, c, h, w, wg: (RIGHT["check_launch"](n, c, h, w, wg)[0], 0, 1)],
    "check_touched_outputs": [lambda h, k, s, p, n: [o for o in range(n) if 0 <= h + p - o * s <= k],  # one too many
                              lambda h, k, s, p, n: [o for o in range(n) if 0 <= h - o * s < k]],     # padding forgotten
    "check_naive_bytes": [lambda n, c, h, w, k, r, s, st, p, a: 4 * 2 * n * c * h * w * k * r * s,   # no checks
                          lambda n, c, h, w, k, r, s, st, p, a: RIGHT["check_naive_bytes"](n, c, h, w, k, r, s, st, p, a) // 4],
    "check_intensity": [lambda *a: RIGHT["check_intensity"](*a) / 2, lambda *a: RIGHT["check_intensity"](*a) * 4],
    "check_valid_table": [lambda h, x, k, s, p, H, W: np.array(  # the stride forgotten
        [[0 <= h + p - r < output_size(H, k, s, p) and 0 <= x + p - c < output_size(W, k, s, p)
          for c in range(k)] for r in range(k)]),
        lambda h, x, k, s, p, H, W: RIGHT["check_valid_table"](h, x, k, s, p, H, W).T],  # r and s swapped
    "check_block_lines": [  # ten floats instead of nine
        lambda c, k, K, L: ((c * K + k) * 9 + 9) // (L // 4) - (c * K + k) * 9 // (L // 4) + 1,
        lambda c, k, K, L: ((c * K + k) * 9 + 8) // (L // 4) - (c * K + k) * 9 // (L // 4)],
    "check_vector_columns": [lambda W, p: W - 2, lambda W, p: RIGHT["check_vector_columns"](W, p) + 1],
    "check_straddling_depths": [lambda d, t, w: [i for i in range(d) if (t * i) // w != (t * i + t) // w],   # one too far
                                lambda d, t, w: [i for i in range(1, d) if (t * i) % w + t > w]],          # depth 0 skipped
    "check_live_loads": [lambda d, t, w: 2,                                         # ping and pong always
                         lambda d, t, w: max((t * i + t) // w - (t * i) // w + 1 for i in range(d))],  # one float past
    "check_weight_vectors": [lambda a, b: list(range(9 * a // 4, (9 * b + 8) // 4)),   # one short
                             lambda a, b: list(range((9 * b + 8) // 4, 9 * a // 4 - 1, -1))],  # reversed
    "check_width_columns": [lambda x0, xpw, W, st, p: [x0 - 1 + u for u in range(xpw + 2)],
                            lambda x0, xpw, W, st, p: RIGHT["check_width_columns"](x0, xpw + 1, W, st, p)],
    "check_chan_merge": [lambda na, ma, qa, nb, mb, qb: (na + nb, (ma + mb) / 2, qa + qb),
                         lambda na, ma, qa, nb, mb, qb: (na + nb, ma + (mb - ma) * nb / (na + nb), qa + qb)],
    "check_phase_taps": [lambda k, s, p: list(range(k)),                       # the stride forgotten
                         lambda k, s, p: list(range(p + 1, k, s)),             # off by one
                         lambda k, s, p: list(range(p, k - 1, s)),             # the last tap dropped
                         lambda k, s, p: list(range(k - 1 - p, -1, -s))],      # counted from the far end
    "check_tile_reuse": [lambda tx, ty, cb, kh, kw: cb * kh * kw,                     # the halo forgotten
                         lambda tx, ty, cb, kh, kw: tx * ty * kh * kw / ((ty + kh - 1) * (tx + kw - 1))],  # CB
    "check_stride_passes": [lambda s: min(s, 32),                                     # every odd stride is free
                            lambda s: 1 if s % 2 else s,                              # 6 and 12 share banks
                            lambda s: 32 // s if s < 32 else 32],                     # upside down
    "check_winograd_1d": [lambda d, g: RIGHT["check_winograd_1d"](d, g)[::-1],
                          lambda d, g: [d[0] * g[0] + d[1] * g[1] + d[2] * g[2], d[1] * g[0] + d[2] * g[1] + d[3] * g[2]]],
    "check_wino_products": [lambda n, c, h, w, k, m: n * h * w // (m * m) * (m + 2) ** 2 * c * k,      # no partial tiles
                            lambda n, c, h, w, k, m: n * -(-h // m) * -(-w // m) * m * m * c * k,     # m x m points
                            lambda n, c, h, w, k, m: 2 * n * -(-h // m) * -(-w // m) * (m + 2) ** 2 * c * k],  # FLOPs
}


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_check_accepts_right_answer(name, capsys):
    ok, out = _run(getattr(ex, name), RIGHT[name], capsys)
    assert ok and out.startswith("Correct"), out


@pytest.mark.parametrize("name,i", [(n, i) for n in sorted(WRONG) for i in range(len(WRONG[n]))])
def test_check_rejects_wrong_answer_without_giving_it(name, i, capsys):
    ok, out = _run(getattr(ex, name), WRONG[name][i], capsys)
    assert not ok and out.startswith("Not yet:"), out
    assert "expected" not in out, f"the message hands over the answer: {out}"


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_unanswered_exercise_is_reported_politely(name, capsys):
    ok, out = _run(getattr(ex, name), stub, capsys)
    assert not ok and out.strip() == ex.NOT_ANSWERED


def test_block_lines_catches_ten_floats(capsys):
    ok, out = _run(ex.check_block_lines, WRONG["check_block_lines"][0], capsys)
    assert not ok and "one float too many" in out


def test_winograd_1d_counts_every_product_and_cannot_be_escaped(capsys):
    """The direct formula is told its 6 products by name; converting the values to numbers (to
    escape the count) is refused; a product written out twice counts twice; outputs that are not
    computed from d and g are refused."""
    def direct(d, g):
        return [d[0] * g[0] + d[1] * g[1] + d[2] * g[2], d[1] * g[0] + d[2] * g[1] + d[3] * g[2]]

    def inline(d, g):            # m2 and m3 written out in both outputs: 6 products
        m1, m4 = (d[0] - d[2]) * g[0], (d[1] - d[3]) * g[2]
        return [m1 + (d[1] + d[2]) * ((g[0] + g[1] + g[2]) / 2) + (d[2] - d[1]) * ((g[0] - g[1] + g[2]) / 2),
                (d[1] + d[2]) * ((g[0] + g[1] + g[2]) / 2) - (d[2] - d[1]) * ((g[0] - g[1] + g[2]) / 2) - m4]
    _names_each_mistake(ex.check_winograd_1d, {
        "6 times: d0*g0, d1*g1, d2*g2, d1*g0, d2*g1, d3*g2": direct,
        "hold no number": lambda d, g: direct(np.asarray(d, dtype=float), np.asarray(g, dtype=float)),
        "which hold no number": lambda d, g: _f23([float(v) for v in d], [float(v) for v in g]),
        "value by a filter-derived value 6 times": inline,
        "y0 is not computed from both d and g": lambda d, g: [0.0, _f23(d, g)[1]],
        "swapped": lambda d, g: _f23(d, g)[::-1],
    }, capsys)
    ok, out = _run(ex.check_winograd_1d, lambda d, g: np.asarray(_f23(d, g), dtype=object), capsys)
    assert ok and "with 4 multiplications" in out, out


# Kernel exercises: the teacher's lines pass; typical mistakes are caught and named.
# Chapter 10's exercise asks for another layout than the kernel's own XOR: its answer is a rotation.
ROTATION = "#define WADDR(R, cc) ((R) * WROW + ((((cc) / 4) + (R)) % (CB / 4)) * 4 + (cc) % 4)"


def _right(name):
    if name == "slab_swizzle":
        return ROTATION
    g = kernel_gap(name)
    src, a, b = g._lines()
    return "\n".join(src[a:b + 1])


KERNEL_WRONG = {
    # the stride check dropped: stride 1 passes, stride 2 must not
    "naive_checks": (lambda c: c.replace("if (oh_s < 0 || oh_s % STRIDE != 0) continue;", "if (oh_s < 0) continue;"),
                     "stride 2"),
    # the lower bound dropped: reads before dy (the NaN guard)
    "memo_table": (lambda c: c.replace("row_ok = oh_s >= 0 && ", "row_ok = "), "NaN"),
    # off by one: the block of (c, k) starts 9 floats later
    "weight_load": (lambda c: c.replace("(c * K + k) * 9", "(c * K + k + 1) * 9"), "NaN"),
    # off by one at the right end: x + PAD <= OW reads one column past the row
    "inside_test": (lambda c: c.replace("x + PAD < OW", "x + PAD <= OW"), "Not yet"),
    # the bounds check dropped: reads outside the input (the NaN guard)
    "wino_tile_padding": (lambda c: c.replace("(h >= 0 && h < IH && x_ >= 0 && x_ < IW)", "(1)"), "NaN"),
    # the lower row bound dropped: reads before dy (the NaN guard)
    "tile_copy": (lambda c: c.replace("oh >= 0 && ", ""), "NaN"),
    # a rotation by half the row number: right values, but more store passes than needed
    "slab_swizzle": (lambda c: c.replace("+ (R))", "+ (R) / 2)"), "extra passes"),
    # inv_std from E[x^2] - E[x]^2 (m2 kept for the running statistics): right near 0, wrong near 1000
    "bn_variance": (lambda c: c.replace(
        "const float inv_std = 1.0f / sqrt(m2 / count + eps);",
        "float sq = 0.0f;\n    for (int n = 0; n < N; n++)\n        for (int i = 0; i < HW; i++)\n"
        "            sq += x[(n * C + c) * HW + i] * x[(n * C + c) * HW + i];\n"
        "    const float inv_std = 1.0f / sqrt(sq / count - mean * mean + eps);"), "around 1000"),
    # dilation ignored on every axis: the plain shapes pass, the first dilated one must not
    "groups_dilation": (lambda c: c.replace("- q * DA", "- q").replace("- t * DD", "- t").replace("- r * DH", "- r")
                        .replace("- s * DW", "- s"), "dilation 2"),
}


@pytest.mark.parametrize("name", sorted(GAPS))
def test_kernel_gap(name, own_ctx, capsys):
    g = kernel_gap(name)
    assert "the gap" in str(g.show())
    assert g.check(_right(name), ctx=own_ctx), capsys.readouterr().out
    capsys.readouterr()
    mutate, says = KERNEL_WRONG[name]
    wrong = mutate(_right(name))
    assert wrong != _right(name), "the mutation did not apply"
    assert not g.check(wrong, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and says in out, out
    assert not g.check("  # YOUR CODE HERE\n  raise NotImplementedError()", ctx=own_ctx)
    assert capsys.readouterr().out.startswith("Not answered yet")
    assert not g.check("    this is not C;", ctx=own_ctx)
    assert "does not compile" in capsys.readouterr().out


# A second spelling of the right answer, accepted, for the gaps whose exercise asks for values only (no
# lesson check): other names, other tests of the same bounds, the loops or the formula written otherwise.
OTHER_SPELLINGS = {
    # the existence tests on the candidate's expression itself, the upper bound before the division
    "naive_checks": """
            if (h + PAD < r || (h + PAD - r) % STRIDE) continue;
            const int oh = (h + PAD - r) / STRIDE;
            if (!(oh < OH)) continue;
            for (int s = 0; s < KW; s++) {
                const int ow_s = x - s + PAD;
                if (ow_s < 0 || ow_s >= OW * STRIDE || ow_s % STRIDE != 0) continue;
                const int ow = ow_s / STRIDE;""",
    # the row test folded into the table's entries, the bound as a product, a conditional expression
    "memo_table": """
        const int oh_s = h - r + PAD;
        const bool row_ok = !(oh_s < 0) && !(oh_s % STRIDE) && oh_s < OH * STRIDE;
        for (int s = 0; s < KW; s++) {
            const int ow_s = x - s + PAD;
            valid[r][s] = row_ok ? (ow_s >= 0 && ow_s % STRIDE == 0 && ow_s <= (OW - 1) * STRIDE) : false;""",
    # one unsigned comparison per axis (a negative index wraps past the extent), an if instead of ?:
    "wino_tile_padding": """
                float d = 0.0f;
                if ((unsigned)h < (unsigned)IH && (unsigned)x_ < (unsigned)IW)
                    d = GRAD_IN(x, xy, ((n * CI + ci) * IH + h) * IW + x_);""",
    # one loop over the channel's N * HW values, the square written out, rsqrt
    "bn_variance": """
    float m2 = 0.0f;
    for (int i = 0; i < N * HW; i++) {
        const float v = x[(i / HW * C + c) * HW + i % HW] - mean;
        m2 += v * v;
    }
    const float inv_std = rsqrt(eps + m2 / count);""",
}


@pytest.mark.parametrize("name", sorted(OTHER_SPELLINGS))
def test_kernel_gap_accepts_a_second_spelling(name, own_ctx, capsys):
    code = OTHER_SPELLINGS[name]
    assert code.strip() not in _right(name)
    assert kernel_gap(name).check(code, ctx=own_ctx), capsys.readouterr().out
    assert capsys.readouterr().out.startswith("Correct")


# The routes round a check that tests/test_exercise_routes.py tries on every Python exercise, for the
# kernel gaps, route by route:
# - a getattr route: OpenCL C has no reflection, so a kernel cannot reach code through a name built
#   while it runs; it names code only by identifiers and macros, which the alias route covers.
# - an alias (the course's code under another name): a kernel can call only what its own headers hold.
#   No header of a gapped stage computes a gap's answer, but for batchnorm.h's welford_add, the same m2
#   by Welford's update, which chapter 14 teaches as the stable way: accepted, a right answer by
#   another method. A later stage's header cannot be included into the gap: its functions do not
#   compile inside a kernel's body.
# - an own implementation with a token call (right values, with a dead use of the construct asked
#   for): only four gaps ask for a construct, and each check judges what runs, not the text: the
#   loads that execute (weight_load, WEIGHT_LOADS's dead vload8), the work-items the vector path
#   takes (inside_test), the segments the copy reads (tile_copy), the macro the kernel is built with
#   (slab_swizzle); each with a dead branch below. The other five ask for values only, so any code
#   that computes them is a right answer, and there is no construct to fake.
# - a second spelling of the right answer, accepted: OTHER_SPELLINGS, GROUPS_DILATION_OTHER,
#   test_kernel_gap_lessons_accept_other_right_ways, test_slab_swizzle_reads_other_argument_names.
def test_a_later_stages_header_cannot_be_included_into_a_gap(own_ctx, capsys):
    code = '#include "igemm_nd.h"\n' + _right("groups_dilation")      # 16_igemm_nd's gather and its taps
    assert not kernel_gap("groups_dilation").check(code, ctx=own_ctx)
    assert "does not compile" in capsys.readouterr().out


def test_bn_variance_accepts_m2_by_welfords_update(own_ctx, capsys):
    code = """
    float m2 = 0.0f, seen = 0.0f, running = 0.0f;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) welford_add(&seen, &running, &m2, x[(n * C + c) * HW + i]);
    const float inv_std = 1.0f / sqrt(m2 / count + eps);"""
    assert kernel_gap("bn_variance").check(code, ctx=own_ctx), capsys.readouterr().out


@pytest.mark.parametrize("name,code,says", [
    # the vector path's test behind a condition that never holds: every work-item takes the scalar loop
    ("inside_test", "    const bool inside = K < 0 && x + PAD - 2 >= 0 && x + PAD < OW;", "to the scalar loop"),
    # the patch's own order only in a dead branch: the channel fastest runs
    ("tile_copy", lambda right: right.replace(
        "const int kk = i / (PH * PW), py = i / PW % PH, px = i % PW;",
        "const int kk = K < 0 ? i / (PH * PW) : i % KC, py = K < 0 ? i / PW % PH : i / KC % PH,\n"
        "                  px = K < 0 ? i % PW : i / (KC * PH);"), "not coalesced"),
    # the rotation defined, then replaced by the chapter's own XOR, which the kernel would run
    ("slab_swizzle", lambda right: ROTATION + "\n#undef WADDR\n" + right, "no other directive"),
    # the rotation in a block the compiler never sees, the XOR after it
    ("slab_swizzle", lambda right: "#if 0\n" + ROTATION + "\n#endif\n" + right, "no other directive"),
], ids=["inside_test", "tile_copy", "slab_swizzle-undef", "slab_swizzle-if0"])
def test_a_dead_use_of_the_construct_asked_for_is_refused(name, code, says, own_ctx, capsys):
    if callable(code):
        g = kernel_gap(name)
        src, a, b = g._lines()
        code = code("\n".join(src[a:b + 1]))
    assert not kernel_gap(name).check(code, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and says in out, out


@pytest.mark.parametrize("mutate,says", [
    (lambda c: c.replace("m2 / count + eps", "m2 / count"), "has no eps"),
    (lambda c: c.replace("sqrt(m2 / count + eps)", "(sqrt(m2 / count) + eps)"), "after the square root"),
    (lambda c: c.replace("m2 / count + eps", "m2 / (count - 1.0f) + eps"), "divided by count - 1"),
    (lambda c: c.replace("sqrt(m2 / count + eps)", "(m2 / count + eps)"), "one over a standard deviation"),
], ids=["eps missing", "eps outside the root", "unbiased variance", "no square root"])
def test_bn_variance_names_each_slip(mutate, says, own_ctx, capsys):
    """Each wrong inv_std is refused with the slip named, not the bare "values differ"."""
    wrong = mutate(_right("bn_variance"))
    assert wrong != _right("bn_variance"), "the mutation did not apply"
    assert not kernel_gap("bn_variance").check(wrong, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and says in out, out


def test_bn_variance_has_a_case_where_eps_matters(own_ctx, capsys):
    """Without eps the answer must fail even where the variance is not small by chance: the case
    whose spread is as small as eps fails on its own."""
    gap = kernel_gap("bn_variance")
    small = [c for c in gap.cases if "as small as eps" in c[0]]
    assert small
    only = __import__("dataclasses").replace(gap, cases=tuple(small))
    assert not only.check(_right("bn_variance").replace("m2 / count + eps", "m2 / count"), ctx=own_ctx,
                          isolated=False)     # a variant of the gap: a child could not rebuild it
    assert "has no eps" in capsys.readouterr().out


# Chapter 16's gap over the any-shape grid: a second spelling of the loops (the output position per
# axis in a variable of its own, the group's first channel folded into dy's index, w read through an
# index instead of a pointer offset) is accepted.
GROUPS_DILATION_OTHER = """
    const int KG = K / G, k0 = c / (C / G) * KG;    // the first output channel of c's group
    for (int q = 0; q < Q; q++) {
        const int ea = a - DA * q + PA;
        if (ea < 0 || ea % SA || ea >= OA * SA) continue;
        const int oa = ea / SA;
        for (int t = 0; t < T; t++) {
            const int ed = d - DD * t + PD;
            if (ed < 0 || ed % SD || ed >= OD * SD) continue;
            const int od = ed / SD;
            for (int r = 0; r < R; r++) {
                const int eh = h - DH * r + PH;
                if (eh < 0 || eh % SH || eh >= OH * SH) continue;
                const int oh = eh / SH;
                for (int s = 0; s < S; s++) {
                    const int ew = x - DW * s + PW;
                    if (ew < 0 || ew % SW || ew >= OW * SW) continue;
                    const int o = ((((n * K + k0) * OA + oa) * OD + od) * OH + oh) * OW + ew / SW;
                    const __global float* wc = &w[(c * KG * Q * T + q * T + t) * R * S + r * S + s];
"""


GROUPS = "The shapes with one group pass"      # the hints of the first grouped and first dilated cases
DILATION = "The shapes without dilation pass"


@pytest.mark.parametrize("mutate,says,hint", [
    # every group reads the output channels of group 0: the layers with one group pass
    (lambda c: c.replace("(n * K + g * KG) * plane", "n * K * plane"), "values differ", GROUPS),
    # the group offset moved from dy's index to w's (as if w held every output channel per input channel)
    (lambda c: c.replace("(n * K + g * KG) * plane", "n * K * plane").replace(
        "w + c * KG * taps", "w + (c * KG + g * KG) * taps"), "NaN", GROUPS),
    # w read as a dense (C, K, ...) weight: c's row taken K channels long
    (lambda c: c.replace("w + c * KG * taps", "w + (c * K + g * KG) * taps"), "NaN", GROUPS),
    # the dilation on the wrong side of the subtraction, on the last axis: (x + PW - s) * DW
    (lambda c: c.replace("x + PW - s * DW", "(x + PW - s) * DW"), "values differ", DILATION),
    # the same on the first axis, which only the 4-D shapes (all grouped) dilate
    (lambda c: c.replace("a + PA - q * DA", "(a + PA - q) * DA"), "values differ", "the first axis"),
], ids=["every group reads group 0", "group offset on w, not dy", "w read as dense", "dilation misplaced",
        "dilation misplaced on the first axis"])
def test_groups_dilation_refuses_each_planted_mistake(mutate, says, hint, own_ctx, capsys):
    """Chapter 16's kernel gap, run over the whole any-shape grid with guards in a child process:
    each planted mistake fails at the first case that has the feature it breaks, with the hint for
    that feature (groups, dilation) and without the answer."""
    right = _right("groups_dilation")
    wrong = mutate(right)
    assert wrong != right, "the mutation did not apply"
    assert not kernel_gap("groups_dilation").check(wrong, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and says in out and hint in out, out
    assert "g * KG" not in out and "q * DA" not in out, out


def test_groups_dilation_accepts_another_spelling(own_ctx, capsys):
    """The same loops written another way (an output index per axis, one test per bound, the
    group folded into dy's index, w through an index) pass every case of the grid."""
    assert kernel_gap("groups_dilation").check(GROUPS_DILATION_OTHER, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Correct: 55 shapes (the any-shape grid") and "guard zone intact" in out, out


def test_groups_dilation_cases_are_the_any_shape_grid_plain_first():
    """The gap's cases are every case of the grid the any-shape stages are tested on, ordered plain,
    dilated, grouped, both: a kernel that ignores one feature fails first where that feature starts."""
    from helpers.chapters.kernel_exercises import _any_shape_kind
    from helpers.ops.grid_any_shape import ANY_SHAPE
    order = ["plain", "dilated", "grouped", "grouped and dilated"]
    index = [int(label[1:].split()[0]) for label, _ in kernel_gap("groups_dilation").cases]
    assert sorted(index) == list(range(len(ANY_SHAPE)))
    ranks = [order.index(_any_shape_kind(ANY_SHAPE[i])) for i in index]
    assert ranks == sorted(ranks) and set(ranks) == {0, 1, 2, 3}


def test_step_flops_exercise_check(capsys):
    from helpers.chapters.exercises import check_step_flops

    def right(cfg):
        total = 0
        for i, layer in enumerate(cfg.layers()):
            n, c, h, w = layer["input"]
            _, k, r, s = layer["weight"]
            total += 2 * n * k * h * w * c * r * s * (3 if i else 2)
        return total
    assert check_step_flops(right)
    assert not check_step_flops(lambda cfg: right(cfg) // 2)
    assert "multiply-add is 2 FLOPs" in capsys.readouterr().out
    assert not check_step_flops(lambda cfg: right(cfg) + 1)

    def unanswered(cfg):
        raise NotImplementedError()
    assert not check_step_flops(unanswered)
    assert "Not answered yet" in capsys.readouterr().out


def _igemm_launch(lay, tm, tn, slice_len, size=None):
    """Stage 03's launch; ``size``: the side the reduction is counted over (the answer's OH)."""
    oh = (lay["h"] + 2 * lay["padding"] - lay["kernel"]) // lay["stride"] + 1 if size is None else size
    taps = lay["c"] * lay["kernel"] ** 2
    slices = -(-(lay["n"] * oh * oh) // slice_len)
    return -(-lay["k"] // tm) * -(-taps // tn) * slices, slices * taps * lay["k"]


def test_igemm_launch_check_names_each_mistake(capsys):
    from helpers.chapters.exercises import check_igemm_launch
    assert check_igemm_launch(_igemm_launch)
    wrong = {
        # the input's H x W for dy's OH x OW: the same slices on small strided layers, not on a large one
        "the reduction runs over dy's positions": lambda lay, tm, tn, sl: _igemm_launch(lay, tm, tn, sl, lay["h"]),
        "counted over the input's N*H*W": lambda lay, tm, tn, sl: (
            _igemm_launch(lay, tm, tn, sl)[0], _igemm_launch(lay, tm, tn, sl, lay["h"])[1]),
        "the slices are missing": lambda lay, tm, tn, sl: (
            _igemm_launch(lay, tm, tn, 10**9)[0], _igemm_launch(lay, tm, tn, sl)[1]),   # one slice
        "not the channels C": lambda lay, tm, tn, sl: _igemm_launch({**lay, "c": lay["c"] / lay["kernel"] ** 2}, tm, tn, sl),
        "one partial sum per weight": lambda lay, tm, tn, sl: (_igemm_launch(lay, tm, tn, sl)[0],
                                                               _igemm_launch(lay, tm, tn, sl)[1] // 2),
    }
    _names_each_mistake(check_igemm_launch, wrong, capsys)


def _arena_layout(shapes, align_bits, align=None, scale=1, last_padded=True):
    """The arena's layout in float32 values; ``align``: the alignment a mistake uses (in values),
    ``scale``: 4 for offsets in bytes."""
    a = max(1, align_bits // 32) if align is None else align
    offsets, at, end = {}, 0, 0
    for name, shape in shapes.items():
        offsets[name] = at * scale
        end = at + int(np.prod(shape))
        at += -(-int(np.prod(shape)) // a) * a
    return offsets, (at if last_padded else end) * scale


def test_arena_layout_check_names_each_mistake(capsys):
    from helpers.chapters.exercises import check_arena_layout
    from helpers.train import kernels, model
    assert check_arena_layout(_arena_layout)
    layout, size = kernels.arena_layout(model.parameter_shapes(model.SMALL), 1024)
    assert _arena_layout(model.parameter_shapes(model.SMALL), 1024) == ({k: o for k, (o, _) in layout.items()}, size)
    wrong = {
        "not bytes": lambda sh, b: _arena_layout(sh, b, scale=4),
        "not 8": lambda sh, b: _arena_layout(sh, b, align=b // 8),
        "divide by 32": lambda sh, b: _arena_layout(sh, b, align=b),
        "must start at a multiple of the alignment": lambda sh, b: _arena_layout(sh, b, align=1),
        "the last parameter is rounded up too": lambda sh, b: _arena_layout(sh, b, last_padded=False),
        "the offset of": lambda sh, b: _arena_layout(sh, b, align=b // 16),        # no named mistake: a direction
        "one offset per parameter": lambda sh, b: (dict(list(_arena_layout(sh, b)[0].items())[1:]), _arena_layout(sh, b)[1]),
        "calls arena_layout": lambda sh, b: ({k: o for k, (o, _) in kernels.arena_layout(sh, b)[0].items()},
                                             kernels.arena_layout(sh, b)[1]),
    }
    _names_each_mistake(check_arena_layout, wrong, capsys)


def test_tile_copy_names_a_missing_activation(own_ctx, capsys):
    wrong = _right("tile_copy").replace("GRAD_IN(dy, y, ((n * K + k) * OH + oh) * OW + ow)",
                                        "dy[((n * K + k) * OH + oh) * OW + ow]")
    assert not kernel_gap("tile_copy").check(wrong, ctx=own_ctx)
    out = capsys.readouterr().out
    assert "values differ" in out and "GRAD_IN" in out, out


@pytest.mark.parametrize("code,says", [
    ("#define WADDR(R, cc) ((R) * (WROW + 4) + (cc))", "outside the slab"),           # padding: no room here
    ("#define WADDR(R, cc) ((R) * WROW + ((cc) ^ (R)))", "multiple of 4"),            # float4s broken
    ("#define WADDR(R, cc) ((R) * WROW + (cc) % 16)", "share word"),                   # two weights, one word
    ("#define WADDR(R, cc) ((R) ? (cc) : 0)", "integer arithmetic"),                   # beyond the model
    ("#define WADDR(R, cc) ((R) * WROW + (cc))", "extra passes"),                      # right, but conflicted
    ("#define WADDR(R, cc) ((R) * WROW + (((cc) / 4 + (R)) % 8) * 4 + (cc) % 4)", "at CB = 16"),  # 8 groups hard-coded
])
def test_slab_swizzle_names_the_problem_before_or_after_the_kernel(code, says, own_ctx, capsys):
    assert not kernel_gap("slab_swizzle").check(code, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and says in out, out


def test_slab_swizzle_reads_other_argument_names(ctx, capsys):
    code = "#define WADDR(row, c) ((row) * CB + ((((c) >> 2) + (row)) & (CB / 4 - 1)) * 4 + ((c) & 3))"
    assert kernel_gap("slab_swizzle").check(code, ctx=ctx), capsys.readouterr().out


@pytest.mark.parametrize("code", [
    None,                                                                          # the kernel's own line
    "#define WADDR(row, c) ((row) * CB + (((c) / 4 ^ (row) % 8) << 2) + (c) % 4)",  # the same XOR, rewritten
])
def test_slab_swizzle_refuses_the_chapters_own_xor(code, capsys):
    """The task asks for a layout other than 10_swizzle's: its XOR, however written, is refused
    before any launch, by name, without the answer."""
    if code is None:
        src, a, b = kernel_gap("slab_swizzle")._lines()
        code = "\n".join(src[a:b + 1])
    assert not kernel_gap("slab_swizzle").check(code)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "the chapter's own layout" in out and "%" not in out, out


def test_slab_swizzle_names_unparenthesized_macro_arguments(own_ctx, capsys):
    # right as arithmetic, wrong as a macro: WADDR(W_R(i), W_CC(i)) pastes `(i) / 4 % ROWS` for row.
    # On the CPU the values come out wrong; on the H200 the pasted index left the local tile and the
    # kernel faulted: both verdicts carry the hint
    code = "#define WADDR(row, c) (row * CB + ((c / 4 + row) % (CB / 4)) * 4 + c % 4)"
    assert not kernel_gap("slab_swizzle").check(code, ctx=own_ctx)
    assert "parentheses" in capsys.readouterr().out


def test_a_kernel_that_faults_is_named_and_the_context_is_not_reused(own_ctx, capsys, monkeypatch):
    """A fault at the launch or the wait (how a GPU reports an address outside the kernel's memory)
    is a verdict with the case's hint and the way out, not a traceback; a later check on that
    context, and a later build, say the context faulted instead of blaming the new code."""
    import helpers.runner
    from helpers.engine.build import KernelBuildError, build
    gap = kernel_gap("slab_swizzle")
    right = _right("slab_swizzle")

    def fault(self):
        raise cl.LogicError("clFinish failed: INVALID_COMMAND_QUEUE")
    with monkeypatch.context() as m:          # in this process (isolated=False): what a child reports
        m.setattr(ClPlan, "enqueue", fault)
        assert not gap.check(right, ctx=own_ctx, isolated=False)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "fault on the device" in out and "INVALID_COMMAND_QUEUE" in out, out
    assert "parentheses" in out and "Restart Kernel" in out, out
    assert not gap.check(right, ctx=own_ctx, isolated=False)   # the launch works again, but the context is marked
    assert "an earlier check stopped with a fault" in capsys.readouterr().out
    with pytest.raises(KernelBuildError, match="A kernel faulted on this context earlier"):
        build(own_ctx, "conv_dgrad/02_naive.cl", source="this is not C")


WILD_WRITE = "*(volatile __global float *)0 = 1.0f;   /* a write through a null pointer */\n"


@pytest.mark.parametrize("name", ["naive_checks", "tile_copy", "groups_dilation"])
def test_a_learners_kernel_that_faults_leaves_the_session_running(name, ctx, capsys):
    """A learner's kernel that writes through a wild pointer (a segmentation fault in PoCL's
    threads on a CPU, a fault that spoils the process's OpenCL on an NVIDIA GPU) runs in a child
    process: the verdict says how it stopped, and this process's context still builds and runs
    the right answer afterwards, in this process."""
    gap = kernel_gap(name)
    assert not gap.check(WILD_WRITE + _right(name), ctx=ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and ("process of its own" in out or "fault on the device" in out), out
    assert gap.check(_right(name), ctx=ctx, isolated=False), capsys.readouterr().out


def test_a_device_s_selector_names_it_in_another_process(ctx):
    from helpers.engine.devices import device_info, find_device, selector_of
    from helpers.engine.child import in_child
    index = selector_of(ctx.devices[0])
    assert find_device(index) == ctx.devices[0]
    assert in_child(device_info, index)["name"] == ctx.devices[0].name.strip()


def test_a_child_process_returns_prints_raises_and_reports_its_death(capsys):
    """helpers/engine/child.py: a value and the child's prints come back; an exception is raised
    again as itself; a child killed by a signal, or stopped at its timeout, is ChildDied saying how."""
    import os
    import time
    from helpers.engine.child import ChildDied, in_child
    assert in_child(divmod, 7, 2) == (3, 1)
    assert in_child(print, "from the child") is None and capsys.readouterr().out == "from the child\n"
    with pytest.raises(ValueError, match="invalid literal"):
        in_child(int, "seven")
    with pytest.raises(ChildDied, match="killed by SIGABRT"):
        in_child(os.abort)
    with pytest.raises(ChildDied, match="did not finish within 1 s") as err:
        in_child(time.sleep, 30, timeout=1)
    assert err.value.timed_out


def test_a_stage_copy_runs_through_plan_stage_without_touching_the_registry(ctx):
    import dataclasses

    import helpers
    from helpers.engine.build import kernel_source
    from helpers.ops.conv_dgrad import random_problem_args
    from helpers.stages import REGISTRY, get_stage
    base = get_stage("conv_dgrad", "naive")
    trial = dataclasses.replace(base, source=lambda jit: kernel_source(base.kernel).replace("continue;", "continue; "))
    before = list(REGISTRY["conv_dgrad"])
    helpers.check_stage("conv_dgrad", trial, ctx=ctx, guard=True, **random_problem_args(1, 3, 5, 4, 2, 3, 1, 1, "none"))
    assert REGISTRY["conv_dgrad"] == before
    with pytest.raises(ValueError, match="belongs to conv_dgrad"):
        get_stage("conv_forward", base)


def test_c_fragment_check_accepts_the_layout_and_names_each_mistake(capsys):
    from helpers.chapters.exercises import check_c_fragment
    from helpers.engine import fragments
    from helpers.engine.fragments import fragment_owner as owner
    right = lambda l: [(l // 4, 2 * (l % 4)), (l // 4, 2 * (l % 4) + 1), (l // 4 + 8, 2 * (l % 4)), (l // 4 + 8, 2 * (l % 4) + 1)]
    assert check_c_fragment(right)
    wrong = {
        "wrong registers": lambda l: [right(l)[i] for i in (0, 2, 1, 3)],
        "swapped": lambda l: [(c, r) for r, c in right(l)],
        "a row is not": lambda l: [((r + 1) % 16, c) for r, c in right(l)],
        "a column is not": lambda l: [(r, (c + 2) % 8) for r, c in right(l)],
        "each lane holds 4": lambda l: right(l)[:2],
    }
    _names_each_mistake(check_c_fragment, wrong, capsys, hidden=str(right(5)))
    # the layout read off the course's own model instead of derived: refused however the model is reached
    for looked_up in (lambda l: [next((r, c) for r in range(16) for c in range(8)
                                      if fragments.fragment_owner("C", r, c) == (l, reg))
                                 for reg in range(4)],
                      lambda l: [next((r, c) for r in range(16) for c in range(8) if owner("C", r, c) == (l, reg))
                                 for reg in range(4)]):
        _names_each_mistake(check_c_fragment, {"calls fragment_owner": looked_up}, capsys)
    assert owner("C", 9, 3) == (5, 3)          # the model answers again once the check is over


def test_tf32_product_check_accepts_the_error_and_names_each_mistake(capsys):
    from helpers.chapters.exercises import check_tf32_products
    from helpers.engine.tensor import to_tf32

    def right(a, b):
        exact = a.astype(np.float64) * b
        return np.abs(to_tf32(a).astype(np.float64) * to_tf32(b) - exact) / np.abs(exact)
    assert check_tf32_products(right)
    assert check_tf32_products(lambda a, b: np.abs(to_tf32(a) * to_tf32(b) - a * b) / np.abs(a * b))   # float32 is fine
    wrong = {
        "both operands rounded": lambda a, b: np.abs(to_tf32(a).astype(np.float64) * b - a.astype(np.float64) * b)
        / np.abs(a.astype(np.float64) * b),
        "not the relative error": lambda a, b: np.abs(to_tf32(a).astype(np.float64) * to_tf32(b) - a.astype(np.float64) * b),
        "one relative error per product": lambda a, b: right(a, b)[:10],
        # relative to the rounded product: within 1 % of the right errors, the wrong quantity
        "divided by the rounded product": lambda a, b: np.abs(to_tf32(a).astype(np.float64) * to_tf32(b)
                                                              - a.astype(np.float64) * b)
        / np.abs(to_tf32(a).astype(np.float64) * to_tf32(b)),
        "negative": lambda a, b: (to_tf32(a).astype(np.float64) * to_tf32(b) - a.astype(np.float64) * b)
        / np.abs(a.astype(np.float64) * b),
    }
    _names_each_mistake(check_tf32_products, wrong, capsys)


def test_nhwc_offsets_check_accepts_the_copy_and_names_each_mistake(capsys):
    from helpers.chapters.exercises import check_nhwc_offsets

    def pixel(n, h, w, r, s, d):
        oh_s, ow_s = h + d["pad"] - r, w + d["pad"] - s
        if oh_s < 0 or ow_s < 0 or oh_s % d["stride"] or ow_s % d["stride"]:
            return None
        oh, ow = oh_s // d["stride"], ow_s // d["stride"]
        return (oh, ow) if oh < d["OH"] and ow < d["OW"] else None

    def right(n, h, w, r, s, k, d):
        p = pixel(n, h, w, r, s, d)
        return None if p is None else ((n * d["OH"] + p[0]) * d["OW"] + p[1]) * d["K"] + k
    assert check_nhwc_offsets(right)

    def nchw(n, h, w, r, s, k, d):
        p = pixel(n, h, w, r, s, d)
        return None if p is None else ((n * d["K"] + k) * d["OH"] + p[0]) * d["OW"] + p[1]

    def no_stride_test(n, h, w, r, s, k, d):
        oh, ow = (h + d["pad"] - r) // d["stride"], (w + d["pad"] - s) // d["stride"]
        ok = h + d["pad"] - r >= 0 and w + d["pad"] - s >= 0 and oh < d["OH"] and ow < d["OW"]
        return ((n * d["OH"] + oh) * d["OW"] + ow) * d["K"] + k if ok else None

    def never_none(n, h, w, r, s, k, d):
        o = right(n, h, w, r, s, k, d)
        return 0 if o is None else o
    wrong = {
        "lies in NCHW": nchw,
        "the wrong channel": lambda *a: None if right(*a) is None else right(*a) - a[5] + (a[5] + 1) % a[6]["K"],
        "return None": no_stride_test,
        "zero-filled": never_none,
        "the wrong pixel": lambda *a: None if right(*a) is None else right(*a) + a[6]["K"],
        "which (oh, ow)": lambda *a: None,
        # right wherever OH == OW: the check has layers that are not square
        "OH and OW are swapped": lambda *a: None if right(*a) is None else (
            (a[0] * a[6]["OW"] + right(*a) // a[6]["K"] % (a[6]["OH"] * a[6]["OW"]) // a[6]["OW"]) * a[6]["OH"]
            + right(*a) // a[6]["K"] % a[6]["OW"]) * a[6]["K"] + a[5],
        # the padding of the chapter's layers written in: the check has pads 0 and 2 too
        "pad 0": lambda n, h, w, r, s, k, d: right(n, h, w, r, s, k, {**d, "pad": 1}),
    }
    _names_each_mistake(check_nhwc_offsets, wrong, capsys)


def test_box_starts_check_accepts_the_phases_and_names_each_mistake(capsys):
    from helpers.chapters.exercises import check_box_starts

    def right(i0, ph, r, stride, pad):
        return None if (ph + pad - r) % stride else i0 + (ph + pad - r) // stride
    assert check_box_starts(right)
    wrong = {
        "add i0": lambda i0, ph, r, s, p: None if (ph + p - r) % s else (ph + p - r) // s,
        "skips the tap": lambda i0, ph, r, s, p: i0 + (ph + p - r) // s,
        "divide by the stride": lambda i0, ph, r, s, p: None if (ph + p - r) % s else i0 * s + ph + p - r,
        "does reach the phase": lambda *a: None,
        "not the row of dy": lambda i0, ph, r, s, p: None if (ph + p - r) % s else i0 + (r - ph - p) // s,
    }
    _names_each_mistake(check_box_starts, wrong, capsys)


def test_ring_waits_check_accepts_the_parities_and_names_each_mistake(capsys):
    from helpers.chapters.exercises import check_ring_waits
    right = lambda i, s: (i % s, (i // s) % 2, None if i < s else (i // s - 1) % 2)
    assert check_ring_waits(right)
    wrong = {
        "would read what the slot held before": lambda i, s: (i % s, (i // s + 1) % 2, right(i, s)[2]),   # parity flipped
        "the copy would overwrite it": lambda i, s: (i % s, (i // s) % 2, None if i < s else (i // s) % 2),
        "must wait until the warpgroups have read it": lambda i, s: (i % s, (i // s) % 2, None),
        "never return": lambda i, s: (i % s, (i // s) % 2, 0 if i < s else right(i, s)[2]),
        "completed 1 phase": lambda i, s: (i % s, 0, right(i, s)[2]),                                   # no phase kept
        "not the slot": lambda i, s: ((i + 1) % s, *right(i, s)[1:]),
        "three values": lambda i, s: (i % s, (i // s) % 2),
    }
    _names_each_mistake(check_ring_waits, wrong, capsys)


def test_check_stage_names_a_fault_on_the_device(own_ctx, monkeypatch):
    """A learner's edited stage that faults (check_stage, the notebooks' one way to run a stage and
    check it) raises an error that says what happened and what to do, and marks the context."""
    import helpers
    import helpers.runner
    from helpers.engine.devices import faulted
    from helpers.ops.conv_dgrad import random_problem_args

    def fault(self):
        raise cl.LogicError("clFinish failed: INVALID_COMMAND_QUEUE")
    monkeypatch.setattr(ClPlan, "enqueue", fault)
    with pytest.raises(RuntimeError, match="02_naive stopped with a fault on the device.*Restart Kernel"):
        helpers.check_stage("conv_dgrad", "naive", ctx=own_ctx, **random_problem_args(1, 3, 5, 4, 2, 3, 1, 1, "none"))
    assert faulted(own_ctx)


def test_a_launch_the_driver_refuses_is_named_as_such(own_ctx, monkeypatch):
    """NVIDIA's driver refuses a launch it cannot take (CL_INVALID_KERNEL_ARGS,
    INVALID_WORK_ITEM_SIZE, ...) before any kernel runs: the report says the launch was refused and
    why, not that memory outside the tensors was touched, and the context is not marked faulted."""
    import helpers
    from helpers.engine.devices import faulted
    from helpers.ops.conv_dgrad import random_problem_args
    for code in ("INVALID_KERNEL_ARGS", "INVALID_WORK_ITEM_SIZE", "INVALID_WORK_GROUP_SIZE"):
        def refused(self, code=code):
            raise cl.LogicError(f"clEnqueueNDRangeKernel failed: {code}")
        monkeypatch.setattr(ClPlan, "enqueue", refused)
        with pytest.raises(RuntimeError, match=f"02_naive was not launched: the driver refused its arguments or its "
                                               f"grid \\({code}") as err:
            helpers.check_stage("conv_dgrad", "naive", ctx=own_ctx, **random_problem_args(1, 3, 5, 4, 2, 3, 1, 1, "none"))
        assert "outside the memory" not in str(err.value)
    assert not faulted(own_ctx)


# Each wrong answer is refused with the message that names its own mistake, not a neighbour's
# (two mistakes can give the same number on one case; the checks name a mistake by what the whole
# function does).
def _intensity_hw(n, c, size, k, r, st, p):          # FLOPs over the input's H x W
    o = output_size(size, r, st, p)
    return 2 * n * k * size * size * c * r * r / (4 * (n * k * o * o + c * k * r * r + n * c * size * size))


NAMED = [
    ("check_straddling_depths", lambda d, t, w: [i for i in range(d) if (t * i) // w != (t * i + t) // w],
     "not taps·i + taps"),
    ("check_straddling_depths", lambda d, t, w: [i + 1 for i in range(d) if (t * i) % w + t > w], "counted from 1"),
    ("check_live_loads", lambda d, t, w: -(-t // w), "where a depth starts matters"),
    ("check_live_loads", lambda d, t, w: 2, "ping and pong are what 16-wide loads"),
    ("check_live_loads", lambda d, t, w: -(-t // w) + 1, "a spare register"),
    ("check_live_loads", lambda d, t, w: -(-(d * t) // w), "not the loads of the whole block"),
    ("check_live_loads", lambda d, t, w: len(__import__("helpers.chapters.pictures_combining", fromlist=["x"])
                                             .weight_block_loads(1)["straddling_depths"]) + 1, "course's own reference"),
    ("check_naive_bytes", lambda n, c, h, w, k, r, s, st, p, a: 4 * ((2 if a == "none" else 3) * n * k * c * r * s
                          * output_size(h, r, st, p) * output_size(w, s, st, p) + n * c * h * w), "lies in the padding"),
    ("check_naive_bytes", lambda n, c, h, w, k, r, s, st, p, a: 4 * 2 * _macs(n, c, h, w, k, r, s, st, p) + 4 * n * c * h * w,
     "also reads y"),
    ("check_naive_bytes", lambda n, c, h, w, k, r, s, st, p, a: 4 * (2 if a == "none" else 3) * _macs(n, c, h, w, k, r, s, st, p),
     "writes its one value"),
    ("check_naive_bytes", lambda n, c, h, w, k, r, s, st, p, a: 4 * ((2 if a == "none" else 3) * n * c * h * w * k * r * s
                                                                    + n * c * h * w), "is skipped"),
    ("check_launch", lambda n, c, h, w, wg: ((h * w, c, n), 0, (h * w + wg - 1) // wg * c * n), "not rounded up"),
    ("check_launch", lambda n, c, h, w, wg: (RIGHT["check_launch"](n, c, h, w, wg)[0],
                                             RIGHT["check_launch"](n, c, h, w, wg)[0][0] - h * w,
                                             RIGHT["check_launch"](n, c, h, w, wg)[2]), "one (channel, image) plane"),
    ("check_launch", lambda n, c, h, w, wg: (RIGHT["check_launch"](n, c, h, w, wg)[0],
                                             RIGHT["check_launch"](n, c, h, w, wg)[1],
                                             RIGHT["check_launch"](n, c, h, w, wg)[0][0] // wg), "dimension 0 only"),
    ("check_timing_summary", lambda s, e, w: _median_iqr(_times_ms(s, e, 0)), "leave out the first `warmup`"),
    ("check_timing_summary", lambda s, e, w: (lambda d: (d.mean(), *_median_iqr(d)[1:]))(_times_ms(s, e, w)),
     "report the median"),
    ("check_timing_summary", lambda s, e, w: _median_iqr(_times_ms(s, e, w, 1e3)), "1e-3 gives microseconds"),
    ("check_timing_summary", lambda s, e, w: _median_iqr(np.diff(list(s) + [e[-1]])[w:] / 1e6), "the gap before the next"),
    ("check_timing_summary", lambda s, e, w: (lambda d: (np.median(d), d.min(), d.max()))(_times_ms(s, e, w)),
     "not the fastest and slowest"),
    ("check_timing_summary", lambda s, e, w: (lambda d: (np.median(d), np.median(d) - d.std(), np.median(d) + d.std()))(
        _times_ms(s, e, w)), "standard deviation"),
    ("check_timing_summary", lambda s, e, w: __import__("helpers.engine.timing", fromlist=["Timing"]).Timing(
        list(_times_ms(s, e, w))).median_ms, "course's own reference"),
    ("check_intensity", _intensity_hw, "use the input's H x W positions"),
    ("check_intensity", lambda *a: RIGHT["check_intensity"](*a) * 4, "count bytes (4 per float), not floats"),
    ("check_intensity", lambda *a: RIGHT["check_intensity"](*a) / 2, "a multiply-add is 2"),
    ("check_output_size", lambda s, k, st, p: (s + p - k) // st + 1, "added on both sides"),
    ("check_output_size", lambda s, k, st, p: (s + 2 * p - k) // st, "one position short"),
    ("check_output_size", lambda s, k, st, p: -(-(s + 2 * p - k) // st) + 1, "rounded up"),
    ("check_output_size", lambda s, k, st, p: output_size(s, k, st, p), "course's own reference"),
    ("check_block_lines", WRONG["check_block_lines"][0], "one float too many"),
    ("check_block_lines", WRONG["check_block_lines"][1], "one line short"),
    ("check_block_lines", lambda c, k, K, L: -(-36 // L), "depends on where the block starts"),
    ("check_block_lines", lambda c, k, K, L: 36 // L + 1, "depends on where the block starts"),
    ("check_valid_table", lambda h, x, k, s, p, H, W: valid_table(h, x, k, k, s, p, output_size(H, k, s, p),
                                                                  output_size(W, k, s, p)), "course's own reference"),
]


@pytest.mark.parametrize("name,answer,says", NAMED, ids=[f"{n}-{s.split()[0]}-{i}" for i, (n, _, s) in enumerate(NAMED)])
def test_check_names_the_mistake_made(name, answer, says, capsys):
    ok, out = _run(getattr(ex, name), answer, capsys)
    assert not ok and out.startswith("Not yet:") and says in out, out


# Kernel exercises whose right values can come the wrong way: the lesson check refuses them.
LESSON_WRONG = {
    "weight_load": ("        weights3x3 wk;\n        for (int i = 0; i < 9; i++) wk.s[i] = w[(c * K + k) * 9 + i];",
                    "no vector load runs"),
    "inside_test": ("    const bool inside = false;", "to the scalar loop"),
    "tile_copy": (None, "not coalesced"),
}


@pytest.mark.parametrize("name", sorted(LESSON_WRONG))
def test_kernel_gap_refuses_right_values_the_wrong_way(name, own_ctx, capsys):
    code, says = LESSON_WRONG[name]
    if code is None:   # the copy with the patch's channel fastest: right values, scattered reads
        code = _right(name).replace("const int kk = i / (PH * PW), py = i / PW % PH, px = i % PW;",
                                    "const int kk = i % KC, py = i / KC % PH, px = i / (KC * PH);")
    assert not kernel_gap(name).check(code, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "match the reference" in out and says in out, out


def test_kernel_gap_lessons_accept_other_right_ways(own_ctx, capsys):
    """The lesson checks refuse the slow way, not another spelling of the right one."""
    v8 = ("        weights3x3 wk;\n        wk.v.lo = vload8(0, w + (c * K + k) * 9);\n"
          "        wk.v.hi = w[(c * K + k) * 9 + 8];")
    assert kernel_gap("weight_load").check(v8, ctx=own_ctx), capsys.readouterr().out
    helper = "        const weights3x3 wk = load_weights3x3(&w[(c * K + k) * 9]);"     # the block's address as &w[i]
    assert kernel_gap("weight_load").check(helper, ctx=own_ctx), capsys.readouterr().out
    inside = "    const bool inside = 2 - PAD <= x && x <= OW - 1 - PAD;"
    assert kernel_gap("inside_test").check(inside, ctx=own_ctx), capsys.readouterr().out
    copy = _right("tile_copy").replace("const int kk = i / (PH * PW), py = i / PW % PH, px = i % PW;",
                                       "const int px = i % PW, py = (i / PW) % PH, kk = i / PW / PH;")
    assert kernel_gap("tile_copy").check(copy, ctx=own_ctx), capsys.readouterr().out


# Chapter 04: what the kernel runs is judged, not the text (a probe tags each vloadN's values).
WEIGHT_LOADS = {
    "two vload4": ("        weights3x3 wk;\n        const __global float* p = w + (c * K + k) * 9;\n"
                   "        vstore4(vload4(0, p), 0, wk.s);\n        vstore4(vload4(1, p), 1, wk.s);\n"
                   "        wk.s[8] = p[8];", "narrower loads (weights 0-3: vload4, 4-7: vload4, 8: plain reads)"),
    "eight plain reads and a dead vload8": (
        "        weights3x3 wk;\n        const __global float* p = w + (c * K + k) * 9;\n"
        "        for (int i = 0; i < 9; i++) wk.s[i] = p[i];\n        if (K < 0) wk.v.lo = vload8(0, p);",
        "a vload8 in your lines that never runs does not count"),
    "one vload8 per weight": ("        weights3x3 wk;\n        for (int i = 0; i < 8; i++) wk.s[i] = vload8(0, w + (c * K + k) * 9 + i).s0;\n"
                              "        wk.s[8] = w[(c * K + k) * 9 + 8];", "not come from one 8-wide load"),
    "weight 8 by a second vload8": ("        weights3x3 wk;\n        wk.v.lo = vload8(0, w + (c * K + k) * 9);\n"
                                    "        wk.v.hi = vload8(0, w + (c * K + k) * 9 + 1).s7;", "a second vector load"),
}


@pytest.mark.parametrize("name", sorted(WEIGHT_LOADS))
def test_weight_load_judges_the_loads_that_run(name, own_ctx, capsys):
    code, says = WEIGHT_LOADS[name]
    assert not kernel_gap("weight_load").check(code, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "match the reference" in out and says in out, out


# Chapter 10: the task asks for the rotation; another layout without conflicts is not its answer.
@pytest.mark.parametrize("code,says", [
    ("#define WADDR(R, cc) ((R) * WROW + ((((cc) / 4) ^ (((R) + 1) & (CB / 4 - 1))) * 4) + (cc) % 4)",
     "not another layout without conflicts"),                                              # an XOR with R + 1
    ("#define WADDR(R, cc) ((R) * WROW + ((((cc) / 4) - (R) % (CB / 4) + CB / 4) % (CB / 4)) * 4 + (cc) % 4)",
     "the other way"),                                                                     # rotated backwards
], ids=["xor R+1", "backwards"])
def test_slab_swizzle_refuses_a_layout_other_than_the_rotation(code, says, own_ctx, capsys):
    assert not kernel_gap("slab_swizzle").check(code, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "match the reference" in out and says in out, out


def test_slab_swizzle_rotation_check_sees_every_width():
    """The XOR with R + 1 differs from the rotation at every width the check covers (so each width
    alone would refuse it), and the rotation itself passes at each."""
    from helpers.chapters.slab_swizzle import SLAB_OTHER_TILES, SLAB_TILE, _not_the_rotation, _waddr
    xor = _waddr("#define WADDR(R, cc) ((R) * WROW + ((((cc) / 4) ^ (((R) + 1) & (CB / 4 - 1))) * 4) + (cc) % 4)")
    rot = _waddr(ROTATION)
    for tile in (SLAB_TILE, *SLAB_OTHER_TILES):
        import helpers.chapters.slab_swizzle as ke
        one = (tile,)
        saved = ke.SLAB_TILE, ke.SLAB_OTHER_TILES
        ke.SLAB_TILE, ke.SLAB_OTHER_TILES = tile, ()
        try:
            assert f"CB = {tile['CB']}" in _not_the_rotation(xor) and _not_the_rotation(rot) == "", one
        finally:
            ke.SLAB_TILE, ke.SLAB_OTHER_TILES = saved


# Chapter 14: m2 holding the variance gives the right inv_std; the running statistics' update shows it.
def test_bn_variance_refuses_m2_holding_the_variance(own_ctx, capsys):
    wrong = _right("bn_variance").replace("const float inv_std = 1.0f / sqrt(m2 / count + eps);",
                                          "m2 /= count;\n    const float inv_std = 1.0f / sqrt(m2 + eps);")
    assert wrong != _right("bn_variance")
    assert not kernel_gap("bn_variance").check(wrong, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "m2 holds the variance" in out, out


def test_bn_variance_cases_update_the_running_statistics_at_two_counts():
    counts = set()
    for label, make in kernel_gap("bn_variance").cases:
        args = make()
        if "momentum" in args:
            counts.add(args["x"].size // args["x"].shape[1])
    assert len(counts) >= 2 and 1 not in counts, counts


def test_a_gap_view_conceals_the_comment_that_states_its_answer():
    view = kernel_gap("inside_test").view()
    assert "Memory safety: the vector path runs only when" not in view and "// ..." in view


@pytest.mark.parametrize("name", sorted(GAPS))
def test_kernel_gap_cases_run_the_path_its_gap_sits_in(name, ctx):
    """A gap inside a stage's fast path (`#if KH == 3 && KW == 3`, `#if STRIDE == 1`) is only
    checked if some case builds that path: at least one case of the gap takes the stage's fast path
    (runner.path_of), so the learner's lines are compiled and run, not left out by the preprocessor."""
    from helpers.runner import path_of
    from helpers.stages import get_stage
    g = kernel_gap(name)
    stage = get_stage(g.op, g.stage)
    paths = {label: path_of(g.op, g.stage, ctx=ctx, **make()) for label, make in g.cases}
    if stage.fast:
        assert "fast" in paths.values(), paths
    else:
        assert set(paths.values()) <= {"only"}, paths


def test_chapters_10_to_12a_refuse_an_answer_that_calls_the_course_s_own_count(capsys):
    """The stride's passes through the bank simulator, the taps through the launcher's phase_taps, the
    products through the tile count of helpers: each hands the work to what the check compares
    against, and is refused by name (the answers are defined as a notebook cell defines them)."""
    cell = """
from helpers.chapters import winograd as wg
from helpers.chapters.banks import passes
from helpers.launch.gemm import phase_taps

def stride_passes(s):
    return passes([[i * s] for i in range(32)])

def taps(k, s, p):
    return phase_taps(k, s, p)

def products(n, c, h, w, k, m):
    return wg.layer_tiles({"n": n, "h": h, "w": w}, m) * (m + 2) ** 2 * c * k
"""
    ns = {}
    exec(cell, ns)
    for check, answer, name in ((ex.check_stride_passes, ns["stride_passes"], "passes"),
                                (ex.check_phase_taps, ns["taps"], "phase_taps"),
                                (ex.check_wino_products, ns["products"], "layer_tiles")):
        ok, out = _run(check, answer, capsys)
        assert not ok and f"calls {name}" in out, out


def test_the_swizzle_gap_hides_the_rotation_not_the_chapters_xor():
    """Chapter 10's exercise asks for a layout other than the kernel's XOR: the kernel's WADDR line is
    the chapter's lesson, shown in its diffs in both editions (no gap secret); the student edition
    hides the notebook's solution, the rotation."""
    import nbformat
    from helpers.chapters.answers import key_of, notebook_secrets
    from helpers.chapters.kernel_exercises import secret_lines
    from pathlib import Path
    gap = kernel_gap("slab_swizzle")
    src, a, _ = gap._lines()
    assert key_of(src[a]) not in secret_lines() and gap.secrets() == {}
    nb = nbformat.read(Path(__file__).resolve().parent.parent / "notebooks" / "10_bank_conflicts.ipynb", as_version=4)
    assert any(k.startswith("#defineWADDR(R,cc)") and "+(R))%(CB/4)" in k for k in notebook_secrets(nb))


# Chapter 16: each check accepts the right method and names each wrong one by what it does.

def _planes_3d(plane, keep=lambda i, d: 0 <= i < d):
    """A 3-D convolution from the check's 2-D one: output plane o adds, for each depth tap t, the
    2-D convolution of input plane ``plane(o, t, stride, pad, T)`` where ``keep`` says it exists."""
    def answer(x, w, stride, padding, conv2d):
        od = (x.shape[2] + 2 * padding[0] - w.shape[2]) // stride[0] + 1
        planes = []
        for o in range(od):
            acc = None
            for t in range(w.shape[2]):
                i = plane(o, t, stride[0], padding[0], w.shape[2])
                if keep(i, x.shape[2]):
                    part = conv2d(x[:, :, i], w[:, :, t], stride[1:], padding[1:])
                    acc = part if acc is None else acc + part
            planes.append(acc if acc is not None else
                          np.zeros_like(conv2d(x[:, :, 0], w[:, :, 0], stride[1:], padding[1:])))
        return np.stack(planes, axis=2)
    return answer


CH16 = {
    ex.check_conv3d_by_2d: (_planes_3d(lambda o, t, s, p, T: o * s - p + t), {
        "wraps around to the last planes": _planes_3d(lambda o, t, s, p, T: o * s - p + t, keep=lambda i, d: i < d),
        "the depth stride is missing": _planes_3d(lambda o, t, s, p, T: o - p + t),
        "the depth padding is missing": _planes_3d(lambda o, t, s, p, T: o * s + t),
        "the taps are read from the far end": _planes_3d(lambda o, t, s, p, T: o * s - p + (T - 1 - t)),
        "read past the input's last plane": _planes_3d(lambda o, t, s, p, T: o * s - p + t, keep=lambda i, d: i >= 0),
        "pass it one depth tap of the 3-D weight": lambda x, w, s, p, conv2d: conv2d(
            x.reshape(x.shape[0], -1, *x.shape[3:]), w.reshape(-1, w.shape[1], *w.shape[3:]), s[1:], p[1:]),
        "conv2d was never called": lambda x, w, s, p, conv2d: np.zeros((1,)),
        "the course's own reference": lambda x, w, s, p, conv2d: __import__(
            "helpers.ops.reference", fromlist=["x"]).conv_forward_nd(x, w, s, p)}),
}


@pytest.mark.parametrize("check", list(CH16), ids=[c.__name__ for c in CH16])
def test_chapter_16_checks_accept_the_method_and_name_each_mistake(check, capsys):
    right, wrong = CH16[check]
    ok, out = _run(check, right, capsys)
    assert ok and out.startswith("Correct"), out
    _names_each_mistake(check, wrong, capsys)


def _through_a_helper(x, w, stride, padding, conv2d):
    def inner():
        return reference.conv_forward_nd(x, w, stride, padding)
    return inner()


def test_the_3d_check_refuses_an_answer_that_calls_the_course_s_3d_reference_by_any_path(capsys):
    """Through a helper of the learner's own too (calls_reference reads nested code), and through
    the course's N-D lowerings and stages."""
    from helpers.chapters import any_shape
    for answer, name in ((_through_a_helper, "conv_forward_nd"),
                         (lambda x, w, s, p, c: any_shape.by_recursion(x, w, s, p)[0], "by_recursion")):
        ok, out = _run(ex.check_conv3d_by_2d, answer, capsys)
        assert not ok and f"calls {name}" in out, out
