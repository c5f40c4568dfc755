"""Every Python exercise's check refuses the course's own answer however the learner reaches it
(helpers/chapters/exercises/closed.py), and accepts the right answer written another way.

For each exercise, ROUTES holds one of the course's references and a route to the right answer
through it. The route is shown to pass the check while nothing is closed (so it is a real way
round the exercise), then each way of reaching it is refused by name while the check runs: an
alias defined outside the function (as a notebook cell defines it), a copy of the reference made
from its code, ``getattr`` with a joined name, and the learner's own right answer with a token call
of the route whose error it catches."""
import importlib
import types

import numpy as np
import pytest

from helpers.chapters import exercises as ex
from helpers.chapters.exercises import closed
from helpers.ops.reference import output_size


def _arena(shapes, bits):
    align, offsets, at = max(1, bits // 32), {}, 0
    for name, shape in shapes.items():
        offsets[name] = at
        at += -(-int(np.prod(shape)) // align) * align
    return offsets, at


def _samples(n, mean, m2):
    """n values whose mean and sum of squared deviations are the given ones."""
    if n == 0:
        return []
    if n == 1:
        return [mean]
    d = np.sqrt(m2 / (n - n % 2))
    return [mean + d * (1 if i % 2 else -1) for i in range(n - n % 2)] + [mean] * (n % 2)


def _merge_route(stats, na, ma, qa, nb, mb, qb):
    x = np.asarray(_samples(int(na), float(ma), float(qa)) + _samples(int(nb), float(mb), float(qb)))
    mean, _, var = stats(x.reshape(1, 1, 1, -1), 0.0)
    return len(x), float(mean[0]), float(var[0]) * len(x)


def _step_flops_route(prep, cfg):
    total = 0
    for i, layer in enumerate(cfg.layers()):
        x, w = np.zeros(layer["input"], np.float32), np.zeros(layer["weight"], np.float32)
        y = np.zeros((x.shape[0], w.shape[1]) + x.shape[2:], np.float32)
        total += prep("conv_forward", input=x, weight=w, stride=1, padding=1).flops
        total += prep("conv_wgrad", input=x, grad_output=y, weight_shape=w.shape, stride=1, padding=1).flops
        if i:
            total += prep("conv_dgrad", grad_output=y, weight=w, input_shape=x.shape, stride=1, padding=1).flops
    return total


def _igemm_route(prepare, lay, tm, tn, sl):
    from helpers.launch import wgrad
    from helpers.stages import get_stage
    stage = get_stage("conv_wgrad", "igemm")
    oh = (lay["h"] + 2 * lay["padding"] - lay["kernel"]) // lay["stride"] + 1
    p = prepare("conv_wgrad", input=np.zeros((lay["n"], lay["c"], lay["h"], lay["w"]), np.float32),
                grad_output=np.zeros((lay["n"], lay["k"], oh, oh), np.float32),
                weight_shape=(lay["c"], lay["k"], lay["kernel"], lay["kernel"]), stride=lay["stride"],
                padding=lay["padding"])
    d = {**stage.defines, "TM": tm, "TN": tn, "SLICE": sl}
    first = wgrad.steps(stage, p, d)[0]
    return (int(np.prod([a // b for a, b in zip(first.global_size, first.local_size)])),
            wgrad.workspace(stage, p, d)["partials"].count)


def _vector_route(takes, w, p):
    """The ends of the vector path found by bisection on stage 05's own test: no loop over the row."""
    def first(pred, lo, hi):            # the first x in lo .. hi-1 where pred holds (pred: false, then true)
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if pred(mid) else (mid + 1, hi)
        return lo
    start = first(lambda x: takes(x, 10**30, 3, 1, p), 0, w)
    return first(lambda x: not takes(x, w + 2 * p - 2, 3, 1, p), start, w) - start


def _f23_route(matrices, d, g):
    at, gm, bt = matrices(2, 3)
    u = [sum(gm[i][j] * g[j] for j in range(3)) for i in range(4)]
    v = [sum(bt[i][j] * d[j] for j in range(4)) for i in range(4)]
    m = [u[i] * v[i] for i in range(4)]
    return [sum(at[r][i] * m[i] for i in range(4)) for r in range(2)]


def _nhwc_route(dy_offset, n, h, w, r, s, k, d):
    oh_s, ow_s = h + d["pad"] - r, w + d["pad"] - s
    if oh_s < 0 or ow_s < 0 or oh_s % d["stride"] or ow_s % d["stride"]:
        return None
    oh, ow = oh_s // d["stride"], ow_s // d["stride"]
    return dy_offset("nhwc", d, n, oh, ow, k) if oh < d["OH"] and ow < d["OW"] else None


def _ring_route(barrier, i, stages):
    b = barrier()
    b.completed = i // stages
    full = next(p for p in (0, 1) if not b.passes(p))
    if i < stages:
        return i % stages, full, None
    b.completed -= 1
    return i % stages, full, next(p for p in (0, 1) if not b.passes(p))


def _conv3d(x, w, stride, padding, conv2d):
    """The right answer, another spelling than the notebook's: planes collected into an array."""
    od = (x.shape[2] + 2 * padding[0] - w.shape[2]) // stride[0] + 1
    out = None
    for o in range(od):
        for t in range(w.shape[2]):
            i = o * stride[0] - padding[0] + t
            if not 0 <= i < x.shape[2]:
                continue
            part = np.asarray(conv2d(x[:, :, i], w[:, :, t], stride=stride[1:], padding=padding[1:]))
            if out is None:
                out = np.zeros((x.shape[0], w.shape[1], od, *part.shape[2:]))
            out[:, :, o] += part
    return out


def _reached(size, k, st, p):
    return sum(1 for i in range(size) for q in range(k)
               if i + p - q >= 0 and (i + p - q) % st == 0 and (i + p - q) // st < output_size(size, k, st, p))


def _naive_bytes(n, c, h, w, k, r, s, st, p, act):
    loads = 2 if act == "none" else 3
    return 4 * n * c * h * w + 4 * loads * n * c * k * _reached(h, r, st, p) * _reached(w, s, st, p)


def _width_columns(x0, xpw, w, st, p):
    ow_n = (w + 2 * p - 3) // st + 1
    return [(x0 + p - 2 + u) // st if x0 + p - 2 + u in range(0, st * ow_n, st) else None for u in range(xpw + 2)]


def _f23(d, g):
    m1, m4 = (d[0] - d[2]) * g[0], (d[1] - d[3]) * g[2]
    m2 = (d[1] + d[2]) * (g[0] + g[1] + g[2]) * 0.5
    m3 = (d[2] - d[1]) * (g[0] - g[1] + g[2]) * 0.5
    return [m1 + m2 + m3, m2 - m3 - m4]


def _tf32_errors(a, b):
    from helpers.engine.tensor import to_tf32
    return np.abs(1 - to_tf32(a).astype(np.float64) * to_tf32(b) / (a.astype(np.float64) * b))


def _nhwc(n, h, w, r, s, k, d):
    oh_s, ow_s = h + d["pad"] - r, w + d["pad"] - s
    oh, ow = oh_s // d["stride"], ow_s // d["stride"]
    if min(oh_s, ow_s) < 0 or oh_s % d["stride"] or ow_s % d["stride"] or oh >= d["OH"] or ow >= d["OW"]:
        return None
    return k + d["K"] * (ow + d["OW"] * (oh + d["OH"] * n))


def _merge(na, ma, qa, nb, mb, qb):
    n = na + nb
    if not na or not nb:
        return (na, ma, qa) if na else (nb, mb, qb)
    return n, (na * ma + nb * mb) / n, qa + qb + na * nb / n * (mb - ma) ** 2


def _step_flops(cfg):
    return sum(2 * int(np.prod(lay["input"])) * int(np.prod(lay["weight"][1:])) * (3 if i else 2)
               for i, lay in enumerate(cfg.layers()))


def _igemm(lay, tm, tn, sl):
    oh = (lay["h"] + 2 * lay["padding"] - lay["kernel"]) // lay["stride"] + 1
    taps = lay["c"] * lay["kernel"] ** 2
    slices = -(-(lay["n"] * oh * oh) // sl)
    return slices * -(-lay["k"] // tm) * -(-taps // tn), taps * lay["k"] * slices


# check -> (a course reference, a route to the right answer through it, the right answer written another way)
ROUTES = {
    "check_timing_summary": ("engine.timing:Timing",
                             lambda ref, s, e, w: (lambda t: (t.median_ms, t.q1_ms, t.q3_ms))(
                                 ref([(b - a) / 1e6 for a, b in zip(s, e)][w:])),
                             lambda s, e, w: (lambda d: (float(np.quantile(d, 0.5)), float(np.quantile(d, 0.25)),
                                                         float(np.quantile(d, 0.75))))(
                                 np.subtract(e[w:], s[w:]) * 1e-6)),
    "check_intensity": ("chapters.exercises.ch00:_right", lambda ref, *a: ref(*a),
                        lambda n, c, size, k, r, st, p: (lambda o: n * k * o * o * c * r * r / (
                            2 * (n * k * o * o + c * k * r * r + n * c * size * size)))(output_size(size, r, st, p))),
    "check_output_size": ("ops.reference:output_size", lambda ref, *a: ref(*a),
                          lambda s, k, st, p: 1 + (s - k + 2 * p) // st),
    "check_touched_outputs": ("chapters.pictures:touched_outputs",
                              lambda ref, h, k, s, p, n: sorted({o for o, *_ in ref(h, h, (n - 1) * s + k - 2 * p, k, s, p)}),
                              lambda h, k, s, p, n: [o for o in range(n) if o * s <= h + p < o * s + k]),
    "check_launch": ("chapters.exercises.ch01a:_right", lambda ref, *a: ref(*a),
                     lambda n, c, h, w, wg: (lambda groups: ((groups * wg, c, n), (groups * wg - h * w) * c * n,
                                                             groups * c * n))(-(-(h * w) // wg))),
    "check_naive_bytes": ("chapters.exercises.ch02:_bytes", lambda ref, *a: ref(*a), _naive_bytes),
    "check_valid_table": ("chapters.direct:valid_table",
                          lambda ref, h, x, k, s, p, hh, ww: ref(h, x, k, k, s, p, output_size(hh, k, s, p),
                                                                output_size(ww, k, s, p)),
                          lambda h, x, k, s, p, hh, ww: np.outer(
                              [(h + p - r) % s == 0 and 0 <= (h + p - r) // s < output_size(hh, k, s, p) for r in range(k)],
                              [(x + p - q) % s == 0 and 0 <= (x + p - q) // s < output_size(ww, k, s, p) for q in range(k)])),
    "check_block_lines": ("chapters.direct:weight_requests",
                          lambda ref, c, k, kk, line: len({ln for q in ref(c, k, kk, line, vector=False) for ln in q["lines"]}),
                          lambda c, k, kk, line: len({f * 4 // line for f in range((c * kk + k) * 9, (c * kk + k) * 9 + 9)})),
    "check_vector_columns": ("chapters.direct:takes_vector_path", _vector_route,
                             lambda w, p: max(0, min(w - 1, w + p - 3) - max(0, 2 - p) + 1)),
    "check_straddling_depths": ("chapters.exercises.ch06:_right", lambda ref, *a: ref(*a),
                                lambda d, t, w: [i for i in range(d) if (t * i) // w < (t * i + t - 1) // w]),
    "check_live_loads": ("chapters.exercises.ch06:_live", lambda ref, *a: ref(*a),
                         lambda d, t, w: max(len({f // w for f in range(t * i, t * i + t)}) for i in range(d))),
    "check_weight_vectors": ("launch.unrolled:weight_vectors", lambda ref, a, b: list(ref(a, b)),
                             lambda a, b: [q for q in range(36) if 9 * a <= 4 * q + 3 and 4 * q <= 9 * b + 8]),
    "check_width_columns": ("chapters.pictures_combining:width_columns", lambda ref, *a: [c["ow"] for c in ref(*a)],
                            _width_columns),
    "check_tile_reuse": ("launch.local:tile_facts",
                         lambda ref, tx, ty, cb, kh, kw: (lambda f: f["LS"] * kh * kw / f["patch"])(
                             ref({"TX": tx, "TY": ty, "CB": cb, "KC": 1}, kh, kw)),
                         lambda tx, ty, cb, kh, kw: cb * kh * kw * tx * ty / (tx + kw - 1) / (ty + kh - 1)),
    "check_stride_passes": ("chapters.banks:passes", lambda ref, s: ref([[i * s] for i in range(32)]),
                            lambda s: 32 // (32 // np.gcd(s, 32))),
    "check_phase_taps": ("launch.gemm:phase_taps", lambda ref, *a: ref(*a),
                         lambda k, s, p: [r for r in range(k) if r % s == p]),
    "check_winograd_1d": ("chapters.winograd:matrices", _f23_route, _f23),
    "check_wino_products": ("chapters.winograd:layer_tiles",
                            lambda ref, n, c, h, w, k, m: ref({"n": n, "h": h, "w": w}, m) * (m + 2) ** 2 * c * k,
                            lambda n, c, h, w, k, m: n * ((h + m - 1) // m) * ((w + m - 1) // m) * (m + 2) * (m + 2) * c * k),
    "check_c_fragment": ("engine.fragments:fragment",
                         lambda ref, lane: [tuple(int(v) for v in ref("m16n8k8", "C")[lane][j][0]) for j in range(4)],
                         lambda lane: [(lane // 4 + 8 * (j // 2), 2 * (lane % 4) + j % 2) for j in range(4)]),
    "check_tf32_products": ("chapters.exercises.ch13:_tf32_errors", lambda ref, a, b: ref(a, b), _tf32_errors),
    "check_nhwc_offsets": ("chapters.tensor_core_layouts:dy_offset", _nhwc_route, _nhwc),
    "check_box_starts": ("chapters.exercises.ch13:_box_start", lambda ref, *a: ref(*a),
                         lambda i0, ph, r, stride, pad: divmod(ph + pad - r, stride)[0] + i0
                         if (ph + pad - r) % stride == 0 else None),
    "check_ring_waits": ("chapters.exercises.ch13:_Barrier", _ring_route,
                         lambda i, s: (i % s, i // s & 1, (i // s + 1) & 1 if i >= s else None)),
    "check_chan_merge": ("ops.reference:batchnorm_stats", _merge_route, _merge),
    "check_step_flops": ("runner:prepare", _step_flops_route, _step_flops),
    "check_igemm_launch": ("runner:prepare", _igemm_route, _igemm),
    "check_arena_layout": ("train.kernels:arena_layout",
                           lambda ref, shapes, bits: (lambda lay: ({k: o for k, (o, _) in lay[0].items()}, lay[1]))(
                               ref(shapes, bits)), _arena),
    "check_conv3d_by_2d": ("chapters.any_shape:by_recursion",
                           lambda ref, x, w, s, p, conv2d: ref(x, w, s, p, lower=lambda x2, w2, s2, pads, d2: conv2d(
                               x2, w2, s2, tuple(b for b, _ in pads)))[0], _conv3d),
}

CHECKS = sorted(ROUTES)


def _check_name_of(ref: str) -> str:
    return ref.partition(":")[2]


def test_every_python_exercise_has_its_routes():
    assert set(CHECKS) == {n for n in ex.__all__ if n.startswith("check_")}


def _route_answer(name):
    return ROUTES[name][:2]


def _alias_cell(name, copy: bool = False):
    """The answer as a notebook cell defines it: the reference bound to a name of the cell's own
    (or a copy of it made from its code) outside the function."""
    ref, route = _route_answer(name)
    module, _, attr = ref.partition(":")
    cell = (f"import importlib, types\n"
            f"ref = importlib.import_module('helpers.{module}').{attr}\n"
            + ("ref = types.FunctionType(ref.__code__, ref.__globals__, 'mine', ref.__defaults__, ref.__closure__)\n"
               if copy else "")
            + "def answer(*args):\n    return route(ref, *args)\n")
    space = {"route": route}
    exec(cell, space)
    return space["answer"]


def _getattr_answer(name):
    ref, route = _route_answer(name)
    module, _, attr = ref.partition(":")
    parts = [attr[:2], attr[2:]]
    return lambda *args: route(getattr(importlib.import_module("helpers." + module), "".join(parts)), *args)


def _token_answer(name):
    ref, route = _route_answer(name)
    right = ROUTES[name][2]

    def answer(*args):
        try:
            route(closed.resolve(ref), *args)
        except Exception:          # noqa: BLE001: the token call's refusal, swallowed
            pass
        return right(*args)
    return answer


def _run(check, answer, capsys):
    capsys.readouterr()
    ok = check(answer)
    return ok, capsys.readouterr().out


@pytest.mark.parametrize("name", CHECKS)
def test_the_route_is_a_way_round_the_exercise_while_nothing_is_closed(name, capsys, monkeypatch):
    """With the closing switched off, the route through the course's reference passes the check:
    the refusals below refuse a real way round, not a wrong answer."""
    monkeypatch.setattr(closed.Closed, "_swap", lambda self, closing: None)
    ok, out = _run(getattr(ex, name), _alias_cell(name), capsys)
    assert ok and out.startswith("Correct"), out


# a copy made from a reference's code exists only for a function (a class has no code to copy)
ALIASES = [(name, False) for name in CHECKS] + [
    (name, True) for name in CHECKS if isinstance(closed.resolve(ROUTES[name][0]), types.FunctionType)]


@pytest.mark.parametrize("name, copy", ALIASES, ids=[f"{n}-{'copy of its code' if c else 'alias'}" for n, c in ALIASES])
def test_an_alias_defined_outside_the_function_is_refused(name, copy, capsys):
    ok, out = _run(getattr(ex, name), _alias_cell(name, copy), capsys)
    assert not ok and out.startswith("Not yet") and "the course's own reference" in out, out


@pytest.mark.parametrize("name", CHECKS)
def test_a_getattr_with_a_joined_name_is_refused(name, capsys):
    ok, out = _run(getattr(ex, name), _getattr_answer(name), capsys)
    assert not ok and f"calls {_check_name_of(ROUTES[name][0])}" in out, out


@pytest.mark.parametrize("name", CHECKS)
def test_an_own_answer_with_a_token_call_is_refused(name, capsys):
    """The right answer of the learner's own, plus one call of the course's reference whose refusal
    the answer catches: refused all the same."""
    ok, out = _run(getattr(ex, name), _token_answer(name), capsys)
    assert not ok and f"calls {_check_name_of(ROUTES[name][0])}" in out, out


@pytest.mark.parametrize("name", CHECKS)
def test_the_right_answer_in_another_spelling_is_accepted(name, capsys):
    ok, out = _run(getattr(ex, name), ROUTES[name][2], capsys)
    assert ok and out.startswith("Correct"), out


def test_the_references_are_open_again_after_a_check(capsys):
    from helpers.chapters.banks import passes
    from helpers.launch.gemm import phase_taps
    _run(ex.check_stride_passes, _getattr_answer("check_stride_passes"), capsys)
    _run(ex.check_phase_taps, _token_answer("check_phase_taps"), capsys)
    assert passes([[i * 2] for i in range(32)]) == 2 and phase_taps(5, 2, 1) == [1, 3]


# The wrong methods named in the course's review, each refused.

def test_chapter_15_arena_layout_by_an_alias_is_refused(capsys):
    cell = ("from helpers.train.kernels import arena_layout as layout_of\n"
            "def arena_layout(shapes, align_bits):\n"
            "    lay, size = layout_of(shapes, align_bits)\n"
            "    return {k: o for k, (o, _) in lay.items()}, size\n")
    space = {}
    exec(cell, space)
    ok, out = _run(ex.check_arena_layout, space["arena_layout"], capsys)
    assert not ok and "calls arena_layout" in out, out


@pytest.mark.parametrize("check,module,parts,call", [
    (ex.check_weight_vectors, "helpers.launch.unrolled", ("weight_", "vectors"), lambda f, a, b: list(f(a, b))),
    (ex.check_stride_passes, "helpers.chapters.banks", ("pas", "ses"), lambda f, s: f([[i * s] for i in range(32)])),
    (ex.check_phase_taps, "helpers.launch.gemm", ("phase", "_taps"), lambda f, *a: f(*a)),
], ids=["07", "10", "11"])
def test_chapters_07_10_11_refuse_a_getattr_with_a_joined_string(check, module, parts, call, capsys):
    answer = lambda *a: call(getattr(importlib.import_module(module), "".join(parts)), *a)
    ok, out = _run(check, answer, capsys)
    assert not ok and f"calls {''.join(parts)}" in out, out


def test_chapter_16_refuses_an_einsum_with_one_token_conv2d_call(capsys):
    """The 3-D convolution computed by einsum, with one conv2d call whose result is thrown away:
    conv2d was called, but the result was not built from it."""
    def einsum_3d(x, w, stride, padding, conv2d):
        conv2d(x[:, :, 0], w[:, :, 0], stride[1:], padding[1:])          # the token call
        xp = np.pad(x, ((0, 0), (0, 0), *[(p, p) for p in padding]))
        kd, kh, kw = w.shape[2:]
        od, oh, ow = ((xp.shape[i + 2] - w.shape[i + 2]) // stride[i] + 1 for i in range(3))
        out = np.zeros((x.shape[0], w.shape[1], od, oh, ow))
        for a, b, c in np.ndindex(kd, kh, kw):
            win = xp[:, :, a:a + stride[0] * od:stride[0], b:b + stride[1] * oh:stride[1], c:c + stride[2] * ow:stride[2]]
            out += np.einsum("ncdhw,ck->nkdhw", win, w[:, :, a, b, c])
        return out
    ok, out = _run(ex.check_conv3d_by_2d, einsum_3d, capsys)
    assert not ok and "not built from conv2d's results" in out, out


def test_chapter_16_accepts_a_decomposition_that_pads_the_planes_itself(capsys):
    """The check's conv2d is a convolution all the same: padding the planes before the call, and
    calling conv2d with no padding, is a right decomposition and passes."""
    def padded(x, w, stride, padding, conv2d):
        xp = np.pad(x, ((0, 0), (0, 0), (0, 0), *[(p, p) for p in padding[1:]]))
        return _conv3d(xp, w, stride, (padding[0], 0, 0), conv2d)
    ok, out = _run(ex.check_conv3d_by_2d, padded, capsys)
    assert ok, out


@pytest.mark.parametrize("answer,says", [
    (lambda w, p: sum(1 for x in range(w) if x + p - 2 >= 0 and x + p < w + 2 * p - 2), "takes a step per column"),
    (lambda w, p: len([x for x in range(max(0, 2 - p), w) if x + p < w + 2 * p - 2]), "takes a step per column"),
    (lambda w, p: int(np.count_nonzero((np.arange(w) + p >= 2) & (np.arange(w) + p < w + 2 * p - 2))),
     "runs out of memory"),
], ids=["loop", "comprehension", "an array of the row"])
def test_chapter_05_refuses_a_count_by_visiting_the_columns(answer, says, capsys):
    ok, out = _run(ex.check_vector_columns, answer, capsys)
    assert not ok and "right on the rows tried" in out and says in out, out


def test_chapter_05_row_is_too_long_for_any_address_space():
    """The long row's array must fail to allocate at once: one that fits a 57-bit address space (a
    row of 10^13 int64s is 80 TB) is granted by a machine that overcommits memory, which then kills
    the process as the array fills (seen on a GPU machine: the test's worker crashed)."""
    from helpers.chapters.exercises import ch05
    assert ch05.HUGE > 2 ** 57, "an array of the row (1 byte a column) must not fit a 57-bit address space"


def test_chapter_05_refuses_a_recursion(capsys):
    def count(w, p, x=0):
        if x >= w:
            return 0
        return (x + p - 2 >= 0 and x + p < w + 2 * p - 2) + count(w, p, x + 1)
    ok, out = _run(ex.check_vector_columns, count, capsys)
    assert not ok and "takes a step per column" in out, out


def test_chapter_05_accepts_a_formula_with_a_fixed_loop(capsys):
    """A loop whose length does not grow with the row (over the two ends) is still a formula."""
    def ends(w, p):
        lo, hi = [bound for bound in (max(0, 2 - p), min(w - 1, w - 3 + p))]
        return max(0, hi - lo + 1)
    ok, out = _run(ex.check_vector_columns, ends, capsys)
    assert ok, out
