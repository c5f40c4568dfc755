"""Checks for the chapters' exercises: each says what is right or points at what is off, never
just False, and never prints the expected answer.

Solutions in the teacher notebooks sit between ``### BEGIN SOLUTION`` and ``### END SOLUTION``;
the student edition (``./course student``, helpers/chapters/editions.py) replaces them with
``raise NotImplementedError()``. Every check catches that and says, politely, that the exercise
is not answered yet, so the student edition runs top to bottom.
"""
from __future__ import annotations

import functools

import numpy as np

NOT_ANSWERED = ("Not answered yet: replace `raise NotImplementedError()` above with your code, "
                "then run this cell again.")


def _verdict(ok: bool, good: str, bad: str) -> bool:
    print(("Correct: " + good) if ok else ("Not yet: " + bad))
    return ok


def exercise(check):
    """Decorator for a check: an unanswered exercise (NotImplementedError) prints NOT_ANSWERED."""
    @functools.wraps(check)
    def wrapped(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except NotImplementedError:
            print(NOT_ANSWERED)
            return False
    return wrapped


def _compare(got, want) -> str:
    """'too large' / 'too small' for numbers: a direction, not the answer."""
    return "too large" if got > want else "too small"



@exercise
def check_output_size(answer_fn) -> bool:
    """Chapter 01: a function (size, kernel, stride, padding) -> output size."""
    from ..ops.reference import output_size
    for args in [(7, 3, 1, 1), (7, 3, 2, 1), (8, 3, 2, 0), (5, 5, 3, 4), (1, 1, 1, 0), (28, 2, 3, 1)]:
        got, want = answer_fn(*args), output_size(*args)
        if got != want:
            size, k, st, p = args
            if not isinstance(got, (int, np.integer)):
                why = "it should be a whole number of positions (floor division)"
            elif got == want - 1:
                why = "one position short: does your count include the first position?"
            elif got == (size + p - k) // st + 1:
                why = "the padding is added on both sides of the input"
            else:
                why = f"{_compare(got, want)}; count where the window can start, then step by the stride"
            return _verdict(False, "", f"for (size, kernel, stride, padding) = {args} you give {got}: {why}")
    return _verdict(True, "the output size matches for every case tried", "")


@exercise
def check_touched_outputs(answer_fn) -> bool:
    """Chapter 01: (h, kernel, stride, padding, out_size) -> the output rows input row h reaches."""
    for h, k, s, p in [(0, 3, 1, 1), (4, 3, 2, 1), (5, 3, 2, 0), (2, 5, 1, 2), (6, 3, 3, 2), (8, 3, 1, 1)]:
        size = 9
        oh_n = (size + 2 * p - k) // s + 1
        want = {o for o in range(oh_n) if 0 <= h + p - o * s < k}
        got = list(answer_fn(h, k, s, p, oh_n))
        if len(got) != len(set(got)):
            return _verdict(False, "", f"input row {h}, kernel {k}, stride {s}, padding {p}: your list "
                            f"names an output row twice")
        if set(got) != want:
            outside = [o for o in got if not 0 <= o < oh_n]
            why = ("it names rows outside 0 .. out_size-1" if outside else
                   "it misses a row that reads this input" if set(got) < want else
                   "it names a row whose window does not cover this input" if set(got) > want else
                   "some rows are wrong; output row o reads input rows o·stride - padding .. o·stride - padding + kernel - 1")
            return _verdict(False, "", f"input row {h}, kernel {k}, stride {s}, padding {p}: you give "
                            f"{sorted(got)}; {why}")
    return _verdict(True, "every input row reaches the right output rows", "")


@exercise
def check_flops(answer_fn) -> bool:
    """Chapter 02: FLOPs of the input gradient for (N, C, H, W, K, R, S, stride, padding)."""
    from ..ops.reference import output_size
    # the last case has R != S and H != W, so swapping the kernel's or the image's two sides is caught
    for n, c, h, w, k, r, s, st, p in [(1, 3, 8, 8, 4, 3, 3, 1, 1), (2, 16, 7, 5, 32, 5, 5, 2, 2),
                                       (1, 2, 9, 6, 3, 3, 1, 2, 1)]:
        oh, ow = output_size(h, r, st, p), output_size(w, s, st, p)
        want = 2 * n * k * oh * ow * c * r * s
        got = answer_fn(n, c, h, w, k, r, s, st, p)
        if got != want:
            why = ("half the count: a multiply-add is 2 FLOPs" if got * 2 == want else
                   "OH comes from H with the kernel's height R, OW from W with its width S"
                   if got == 2 * n * k * output_size(h, s, st, p) * output_size(w, r, st, p) * c * r * s else
                   "the work follows the output positions (OH, OW), not the input's H and W"
                   if got == 2 * n * k * h * w * c * r * s else
                   f"{_compare(got, want)}; one multiply-add per (output position, weight) pair")
            return _verdict(False, "", f"for N={n} C={c} {h}x{w} K={k} {r}x{s} stride {st} pad {p} you "
                            f"give {got}: {why}")
    return _verdict(True, "2·N·K·OH·OW·C·R·S: one multiply and one add per (output, weight) pair", "")


def check_array(got, want, name: str = "answer", rtol: float = 1e-5) -> bool:
    """Generic: an array the learner computed against the expected one."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return _verdict(False, "", f"{name} has shape {got.shape}, expected {want.shape}")
    ok = np.allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())
    return _verdict(ok, f"{name} matches", f"{name} differs; largest error {np.abs(got - want).max():.3g}")


@exercise
def check_intensity(answer_fn) -> bool:
    """Chapter 00: FLOPs per minimal byte of the input gradient of a layer (no activation)."""
    from ..ops.reference import output_size
    for n, c, size, k, r, st, p in [(64, 64, 56, 64, 3, 1, 1), (1, 512, 7, 512, 3, 1, 1), (8, 128, 56, 128, 3, 2, 1)]:
        o = output_size(size, r, st, p)
        flops = 2 * n * k * o * o * c * r * r
        nbytes = 4 * (n * k * o * o + c * k * r * r + n * c * size * size)
        want = flops / nbytes
        got = answer_fn(n, c, size, k, r, st, p)
        if not np.isclose(got, want, rtol=1e-6):
            ratio = got / want if want else float("inf")
            why = ("half the FLOPs: a multiply-add is 2" if np.isclose(ratio, 0.5) else
                   "4 times too many: count bytes (4 per float), not floats" if np.isclose(ratio, 4) else
                   "the stride-2 layer differs: grad_output has OH x OW positions, the input H x W" if st == 2 else
                   f"{_compare(got, want)}; FLOPs = 2·N·K·OH·OW·C·R·S, bytes = 4·(|dy| + |w| + |dx|)")
            return _verdict(False, "", f"for N={n} C={c} {size}x{size} K={k} {r}x{r} stride {st} you give "
                            f"{got:.4g}: {why}")
    return _verdict(True, "FLOPs divided by the bytes of grad_output, weights and grad_input", "")


@exercise
def check_valid_table(answer_fn) -> bool:
    """Chapter 03: (h, x, kernel, stride, pad, H, W) -> the kernel x kernel table of booleans
    saying which weights (r, s) meet an output position for input (h, x)."""
    from .direct import valid_table
    from ..ops.reference import output_size
    cases = [(0, 0, 3, 1, 1, 8, 8), (7, 3, 3, 1, 1, 8, 8), (4, 4, 3, 2, 1, 9, 9), (3, 0, 3, 2, 1, 7, 5),
             (2, 5, 5, 1, 2, 6, 6), (1, 1, 5, 3, 4, 5, 5), (0, 2, 1, 1, 0, 3, 3), (5, 6, 2, 2, 0, 8, 7)]
    for h, x, k, s, p, hh, ww in cases:
        want = valid_table(h, x, k, k, s, p, output_size(hh, k, s, p), output_size(ww, k, s, p))
        got = np.asarray(answer_fn(h, x, k, s, p, hh, ww))
        if got.shape != want.shape:
            return _verdict(False, "", f"input ({h}, {x}) of a {hh}x{ww} input, kernel {k}: your table has "
                            f"shape {got.shape}; it needs one entry per weight (r, s)")
        if not np.array_equal(got.astype(bool), want):
            r, c = (int(v) for v in np.argwhere(got.astype(bool) != want)[0])
            what = ("marks a weight that meets no output position" if got[r, c] else
                    "misses a weight that does meet an output position")
            return _verdict(False, "", f"input ({h}, {x}) of a {hh}x{ww} input, kernel {k}, stride {s}, "
                            f"padding {p}: your table {what}, at (r={r}, s={c}) (is h + pad - r a multiple "
                            f"of the stride, and is the quotient inside 0..OH-1?)")
    return _verdict(True, "your table agrees with stage 03's for every position tried", "")


@exercise
def check_block_lines(answer_fn) -> bool:
    """Chapter 04: (c, k, K, line_bytes) -> how many cache lines the 9 weights of the (c, k)
    block of a 3x3 IOHW tensor touch (the tensor starts on a line boundary)."""
    from .direct import weight_requests
    # (0, 15, 64, 64) and (1, 6, 8, 32) end one float before a line boundary: counting 10 floats
    # instead of 9 (or the block's end as first + 9) crosses it and is caught.
    for c, k, K, line in [(0, 0, 64, 64), (0, 1, 64, 64), (0, 7, 64, 64), (1, 5, 16, 32), (2, 3, 3, 128),
                          (0, 3, 64, 32), (5, 14, 64, 64), (0, 13, 64, 128), (0, 15, 64, 64), (1, 6, 8, 32)]:
        want = len({ln for q in weight_requests(c, k, K, line, vector=False) for ln in q["lines"]})
        got = answer_fn(c, k, K, line)
        if got != want:
            first, per_line = (c * K + k) * 9, line // 4
            if got == (first + 9) // per_line - first // per_line + 1:
                why = "you count one float too many: which float is the block's last?"
            elif got == (first + 8) // per_line - first // per_line:
                why = "one line short: a block that stays inside one line still touches that line"
            elif got == 9 * 4 // line + 1 or got == -(-36 // line):
                why = "the count depends on where the block starts, not only on its size"
            else:
                why = f"{_compare(got, want)}; find the lines of the block's first and last float"
            return _verdict(False, "", f"block (c={c}, k={k}) with K={K} starts at float {first}; with "
                            f"{line}-byte lines you give {got}: {why}")
    return _verdict(True, "a block touches lines first//L .. (first+8)//L, with L floats per line", "")


@exercise
def check_vector_columns(answer_fn) -> bool:
    """Chapter 05: (W, pad) -> how many of the W work-items of a row take stage 05's 3-wide path
    for a 3x3 kernel with stride 1."""
    from .direct import takes_vector_path
    from ..ops.reference import output_size
    for w, p in [(56, 1), (7, 1), (1, 1), (2, 1), (3, 0), (5, 0), (8, 2), (3, 2), (1, 2), (224, 1)]:
        ow = output_size(w, 3, 1, p)
        want = sum(takes_vector_path(x, ow, 3, 1, p) for x in range(w))
        got = answer_fn(w, p)
        if got != want:
            why = ("it can never be negative" if got < 0 else
                   f"{_compare(got, want)}; the path needs 0 <= x+pad-2 and x+pad <= OW-1, and 0 <= x < W")
            return _verdict(False, "", f"W={w}, padding {p} (so OW={ow}): you give {got}: {why}")
    return _verdict(True, "the vector path covers max(0, 2-pad) <= x <= min(W-1, OW-1-pad)", "")


@exercise
def check_chan_merge(merge_fn) -> bool:
    """Chapter 14: merge(n_a, mean_a, m2_a, n_b, mean_b, m2_b) -> (n, mean, m2) of the union.

    m2 is the sum of squared deviations from the mean. Tried on splits of data with a large mean,
    with one empty side, and in float32 (the merge must not form E[x^2] - E[x]^2)."""
    rng = np.random.default_rng(14)

    def stats(v):
        v = np.asarray(v, dtype=np.float64)
        return (len(v), float(v.mean()) if len(v) else 0.0, float(((v - v.mean()) ** 2).sum()) if len(v) else 0.0)

    for trial, (offset, scale, na, nb) in enumerate([(0, 1, 5, 7), (1000, 0.01, 64, 64), (-3, 2, 1, 9),
                                                      (5, 1, 0, 6), (5, 1, 6, 0), (1e4, 0.1, 300, 17)]):
        data = offset + scale * rng.standard_normal(na + nb)
        a, b, whole = stats(data[:na]), stats(data[na:]), stats(data)
        try:
            got = merge_fn(*a, *b)
        except ZeroDivisionError:
            return _verdict(False, "", f"sizes {na} and {nb}: your merge divides by zero; an empty side "
                            f"has n = 0")
        try:
            n, mean, m2 = (float(v) for v in got)
        except (TypeError, ValueError):
            return _verdict(False, "", f"merge must return three numbers (n, mean, m2), got {got!r}")
        if n != whole[0]:
            return _verdict(False, "", f"sizes {na} and {nb}: the count is wrong")
        if not np.isclose(mean, whole[1], rtol=1e-12, atol=1e-12 * abs(offset)):
            return _verdict(False, "", f"sizes {na} and {nb}, data around {offset}: the mean is "
                            f"{_compare(mean, whole[1])} (weight each side's mean by its count)")
        if not np.isclose(m2, whole[2], rtol=1e-6, atol=1e-9):
            why = ("m2_a + m2_b misses the spread between the two means" if np.isclose(m2, a[2] + b[2]) else
                   f"m2 is {_compare(m2, whole[2])}")
            return _verdict(False, "", f"sizes {na} and {nb}, data around {offset}: {why}")
        # in float32 too: the same formula must keep the small variance of data around 1000
        if trial == 1:
            a32 = [np.float32(v) for v in a]
            b32 = [np.float32(v) for v in b]
            m2_32 = float(merge_fn(*a32, *b32)[2])
            if not np.isclose(m2_32, whole[2], rtol=1e-2):
                return _verdict(False, "", "in float32, data 1000 + noise of 0.01: m2 loses its digits; "
                                "avoid subtracting large squares")
    return _verdict(True, "Chan's merge: the count, mean and m2 of the union, stable for large means", "")


class _Tracked:
    """A number that remembers whether it depends on the inputs d and on the filter g, and counts
    the multiplications of a d-value by a g-value (what F(2,3) saves)."""

    def __init__(self, v, d=False, g=False, counter=None):
        self.v, self.d, self.g, self.counter = float(v), d, g, counter

    def _wrap(self, o):
        return o if isinstance(o, _Tracked) else _Tracked(o, counter=self.counter)

    def _new(self, v, o):
        return _Tracked(v, self.d or o.d, self.g or o.g, self.counter)

    def __add__(self, o): o = self._wrap(o); return self._new(self.v + o.v, o)
    def __sub__(self, o): o = self._wrap(o); return self._new(self.v - o.v, o)
    def __rsub__(self, o): o = self._wrap(o); return o._new(o.v - self.v, self)
    def __truediv__(self, o): o = self._wrap(o); return self._new(self.v / o.v, o)
    def __neg__(self): return _Tracked(-self.v, self.d, self.g, self.counter)
    __radd__ = __add__

    def __mul__(self, o):
        o = self._wrap(o)
        if (self.d and o.g) or (self.g and o.d):
            self.counter[0] += 1
        return self._new(self.v * o.v, o)
    __rmul__ = __mul__

    def __float__(self): return self.v


@exercise
def check_winograd_1d(answer_fn) -> bool:
    """Chapter 12: (d of 4 inputs, g of 3 taps) -> the 2 outputs of F(2,3) with 4 multiplications
    of an input-derived value by a filter-derived value (constants such as 1/2 are free)."""
    rng = np.random.default_rng(12)
    for _ in range(5):
        d, g = rng.standard_normal(4), rng.standard_normal(3)
        want = np.array([d[0] * g[0] + d[1] * g[1] + d[2] * g[2], d[1] * g[0] + d[2] * g[1] + d[3] * g[2]])
        count = [0]
        td = np.array([_Tracked(v, d=True, counter=count) for v in d], dtype=object)
        tg = np.array([_Tracked(v, g=True, counter=count) for v in g], dtype=object)
        out = answer_fn(td, tg)
        got = np.array([float(v) for v in np.asarray(out, dtype=object).ravel()])
        if got.shape != (2,):
            return _verdict(False, "", f"return the 2 outputs (y0, y1), got {got.size} values")
        if not np.allclose(got, want, rtol=1e-10, atol=1e-12):
            if np.allclose(got[::-1], want, rtol=1e-10, atol=1e-12):
                return _verdict(False, "", "y0 and y1 are swapped")
            bad = " and ".join(f"y{i}" for i in range(2) if not np.isclose(got[i], want[i], rtol=1e-10, atol=1e-12))
            return _verdict(False, "", f"{bad} wrong (y0 = d0 g0 + d1 g1 + d2 g2, y1 = d1 g0 + d2 g1 + d3 g2); "
                            f"check the signs and the halves in G g")
        if count[0] > 4:
            return _verdict(False, "", f"the values are right, but you multiply input values by filter values "
                            f"{count[0]} times; F(2,3) needs 4 (form B^T d and G g first, then multiply them)")
    return _verdict(True, "both outputs of F(2,3), with 4 multiplications of inputs by filter values", "")


@exercise
def check_weight_slot(answer_fn) -> bool:
    """Chapter 06: (depth i, tap t) -> (load v, lane) of the nine 16-wide loads of a 16-depth
    block, where weight t (0..8) of depth i (0..15) arrives."""
    for i in range(16):
        for t in range(9):
            want = divmod(9 * i + t, 16)
            got = tuple(answer_fn(i, t))
            if got != want:
                if got == want[::-1]:
                    why = "the order is swapped: return (load, lane)"
                elif got[0] == want[0]:
                    why = "the load is right, the lane is not"
                elif got[1] == want[1]:
                    why = "the lane is right, the load is not"
                else:
                    why = "which float of the 144-float block is it? Depths are stored one after another, 9 floats each"
                return _verdict(False, "", f"depth {i}, tap {t}: you give {got}: {why}")
    return _verdict(True, "weight t of depth i is float 9i + t of the block: load (9i+t)//16, "
                    "lane (9i+t)%16", "")


@exercise
def check_weight_vectors(answer_fn) -> bool:
    """Chapter 07: (first, last) depth of a group -> the float4 indices (0..35) of a 16-depth
    block that hold the group's weights, in order (what the generator loads for the group)."""
    from ..launch.unrolled import weight_vectors
    for first in range(16):
        for last in range(first, 16):
            want = list(weight_vectors(first, last))
            got = list(answer_fn(first, last))
            if got != want:
                if sorted(got) == want:
                    why = "the right float4s, but not in increasing order"
                elif got and want and got[0] != want[0]:
                    why = f"the first float4 is {'too late' if got[0] > want[0] else 'too early'}"
                elif got and want and got[-1] != want[-1]:
                    why = f"the last float4 is {'too late' if got[-1] > want[-1] else 'too early'}"
                else:
                    why = "the list has gaps or repeats"
                return _verdict(False, "", f"depths {first}..{last} (floats {9 * first}..{9 * last + 8}): "
                                f"you give {got}: {why}")
    return _verdict(True, "a group of depths first..last needs float4 9·first//4 .. (9·last+8)//4", "")


@exercise
def check_width_columns(answer_fn) -> bool:
    """Chapter 08: (x0, xpw, W, stride, pad) -> for a 3x3 kernel, the list of the work-item's
    xpw + 2 columns: ow of each (an int), or None where that output does not exist."""
    from .pictures_combining import width_columns
    cases = [(0, 4, 14, 1, 1), (12, 4, 14, 1, 1), (4, 4, 14, 2, 1), (0, 3, 5, 1, 0), (2, 1, 7, 3, 2),
             (6, 8, 9, 2, 1)]
    for x0, xpw, w, stride, pad in cases:
        want = [c["ow"] for c in width_columns(x0, xpw, w, stride, pad)]
        got = list(answer_fn(x0, xpw, w, stride, pad))
        if len(got) != len(want):
            return _verdict(False, "", f"x0={x0}, XPW={xpw}: you give {len(got)} columns; a 3x3 kernel "
                            f"over XPW positions needs XPW + 2")
        if got != want:
            u = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
            why = ("this column has no output: before the first, past the last, or between strides"
                   if want[u] is None else "this column exists; its ow is wrong" if got[u] is not None
                   else "this column does exist")
            return _verdict(False, "", f"x0={x0}, XPW={xpw}, W={w}, stride {stride}, pad {pad}: column "
                            f"u={u} is wrong ({why})")
    return _verdict(True, "column u holds ow = (x0 + pad - 2 + u) / stride where that is exact and "
                    "inside 0 .. OW-1", "")


@exercise
def check_phase_taps(answer_fn) -> bool:
    """Chapter 11: (kernel, stride, phase) -> the taps r that reach the input rows of that phase."""
    from ..launch.gemm import phase_taps
    # (4, 2, 0) and (5, 3, 0) catch taps counted from the far end of the kernel (a flipped filter)
    for kernel, stride, phase in [(3, 1, 0), (3, 2, 0), (3, 2, 1), (5, 2, 1), (1, 2, 1), (5, 3, 2), (2, 3, 2),
                                  (4, 2, 0), (5, 3, 0)]:
        got, want = sorted(answer_fn(kernel, stride, phase)), phase_taps(kernel, stride, phase)
        case = f"kernel {kernel}, stride {stride}, phase {phase}: you give {got}; "
        if len(set(got)) != len(got):
            return _verdict(False, "", case + "a tap appears twice")
        wrong = sorted(set(got) - set(want))
        if wrong:
            return _verdict(False, "", case + f"tap r = {wrong[0]} does not reach the rows of this phase "
                            f"(which r make h + pad - r a multiple of the stride?)")
        if got != want:
            return _verdict(False, "", case + "a tap that reaches the rows of this phase is missing")
    return _verdict(True, "every phase gets exactly the taps that reach it", "")


@exercise
def check_step_flops(answer_fn) -> bool:
    """Chapter 15: FLOPs of the convolution ops in one training step of a model.Config, as the ops
    count them (2 per multiply-add): forward and weight gradient of every layer, input gradient of
    every layer but the first."""
    from ..runner import prepare
    from ..train import model
    configs = [model.SMALL, model.FULL, model.Config(scale=1, batch=4, channels=(3, 5))]
    for cfg in configs:
        forward = backward = 0
        for i, layer in enumerate(cfg.layers()):
            x, w = np.zeros(layer["input"], np.float32), np.zeros(layer["weight"], np.float32)
            y = np.zeros((x.shape[0], w.shape[1]) + x.shape[2:], np.float32)
            forward += prepare("conv_forward", input=x, weight=w, stride=1, padding=1).flops
            backward += prepare("conv_wgrad", input=x, grad_output=y, weight_shape=w.shape, stride=1, padding=1).flops
            if i > 0:
                backward += prepare("conv_dgrad", grad_output=y, weight=w, input_shape=x.shape, stride=1, padding=1).flops
        want, got = forward + backward, answer_fn(cfg)
        if got != want:
            why = ("half the count: a multiply-add is 2 FLOPs" if got * 2 == want else
                   "the first layer needs no input gradient: its input is the image" if got == 3 * forward else
                   "the backward pass computes two gradients, the input's and the weights'" if got == forward else
                   f"{_compare(got, want)}; each gradient costs as many multiply-adds as the forward pass")
            return _verdict(False, "", f"for batch {cfg.batch}, {cfg.side}x{cfg.side}, channels {cfg.channels} "
                            f"you give {got:,}: {why}")
    return _verdict(True, "forward and weight gradient for both layers, input gradient for conv2 only: "
                    "the backward pass costs about twice the forward", "")


@exercise
def check_igemm_launch(answer_fn) -> bool:
    """Chapter 15: (layer, TM, TN, SLICE) -> (work-groups of wgrad_igemm, floats in its workspace)
    for conv_wgrad stage 03, against its launcher (helpers/launch/wgrad.py)."""
    from ..launch import wgrad
    from ..ops.layers import layer
    from ..runner import prepare
    from ..stages import get_stage
    stage = get_stage("conv_wgrad", "igemm")
    layers = [layer("a", 2, 17, 13, 19), layer("b", 4, 64, 14, 64), layer("c", 1, 3, 9, 32, stride=2),
              layer("d", 8, 32, 28, 16, kernel=1, padding=0)]
    for lay in layers:
        for tm, tn, sl in [(64, 64, 1024), (128, 64, 4096), (64, 128, 256)]:
            oh = (lay["h"] + 2 * lay["padding"] - lay["kernel"]) // lay["stride"] + 1
            x = np.zeros((lay["n"], lay["c"], lay["h"], lay["w"]), np.float32)
            p = prepare("conv_wgrad", input=x, grad_output=np.zeros((lay["n"], lay["k"], oh, oh), np.float32),
                        weight_shape=(lay["c"], lay["k"], lay["kernel"], lay["kernel"]), stride=lay["stride"],
                        padding=lay["padding"])
            d = {**stage.defines, "TM": tm, "TN": tn, "SLICE": sl}
            first = wgrad.steps(stage, p, d)[0]                 # wgrad_igemm; then wgrad_sum
            groups = int(np.prod([a // b for a, b in zip(first.global_size, first.local_size)]))
            want = (groups, wgrad.workspace(stage, p, d)["partials"].count)
            got = tuple(answer_fn(lay, tm, tn, sl))
            if got == want:
                continue
            case = f"for {p.label} with TM={tm}, TN={tn}, SLICE={sl}: "
            if got[0] != want[0]:
                rows, cols, sl_count = -(-lay["k"] // tm), -(-lay["c"] * lay["kernel"] ** 2 // tn), want[0] // (
                    -(-lay["k"] // tm) * -(-lay["c"] * lay["kernel"] ** 2 // tn))
                why = ("the slices are missing: each slice of the reduction has its own work-groups"
                       if got[0] == rows * cols else
                       "the result's columns are the taps C*R*S, not the channels C"
                       if got[0] == rows * -(-lay["c"] // tn) * sl_count else
                       "a partial tile or a partial slice still needs its work-group: round up"
                       if got[0] < want[0] else f"{_compare(got[0], want[0])}")
                return _verdict(False, "", case + f"you give {got[0]:,} work-groups: {why}")
            return _verdict(False, "", case + f"you give {got[1]:,} floats of workspace, "
                            f"{_compare(got[1], want[1])}: one partial sum per weight (C*K*R*S) and slice")
    return _verdict(True, "tiles of the K x C*R*S result times the slices of the N*OH*OW reduction, "
                    "and one partial sum per weight and slice, as the launcher computes them", "")


@exercise
def check_tile_reuse(answer_fn) -> bool:
    """Chapter 09: (TX, TY, CB, KH, KW) -> how many times 09_local_tile's work-group reads each dy
    value it copied into local memory, on average (reads from local memory / values copied)."""
    from .local import tile_facts
    for tx, ty, cb, kh, kw in [(16, 4, 4, 3, 3), (32, 4, 2, 3, 3), (8, 8, 4, 5, 5), (16, 2, 1, 1, 1), (8, 1, 8, 3, 3)]:
        f = tile_facts({"TX": tx, "TY": ty, "CB": cb, "KC": 1}, kh, kw)
        want = f["LS"] * kh * kw / f["patch"]
        got = answer_fn(tx, ty, cb, kh, kw)
        if not np.isclose(float(got), want, rtol=1e-6):
            hint = ("did you count the halo (the patch is larger than the tile)?" if got > want else
                    "every work-item of the group, of all CB channels, reads KH x KW values of the patch")
            return _verdict(False, "", f"TX={tx}, TY={ty}, CB={cb}, {kh}x{kw} kernel: {got} is "
                            f"{_compare(got, want)}; {hint}")
    return _verdict(True, "each copied dy value is read that many times from local memory, once from global", "")


@exercise
def check_stride_passes(answer_fn) -> bool:
    """Chapter 10: (stride) -> passes a warp needs when work-item i reads the 4-byte word
    i * stride (32 work-items, 32 banks of 4 bytes), counted by the bank model."""
    from .pictures_winograd import passes
    for stride in (1, 2, 3, 4, 6, 8, 12, 16, 31, 32, 33, 36, 48, 64):
        want = passes([[i * stride] for i in range(32)])
        got = answer_fn(stride)
        if got != want:
            return _verdict(False, "", f"stride {stride} words: {got} passes is {_compare(got, want)} "
                            f"(which banks do the 32 addresses fall into, and how many words in the busiest?)")
    return _verdict(True, "a stride of s words puts the warp's words into 32/gcd(s, 32) banks, gcd(s, 32) "
                    "words each", "")


@exercise
def check_wino_products(answer_fn) -> bool:
    """Chapter 12a: (n, c, h, w, k, m) -> multiplications of the products step of Winograd
    F(m x m, 3 x 3) over a layer (3x3 kernel, stride 1, padding 1, so the output is h x w): each
    of the n * ceil(h/m) * ceil(w/m) tiles takes (m + 2)^2 points, each a product over c input
    and k output channels."""
    shapes = [(1, 64, 56, 56, 64), (2, 3, 14, 14, 5), (1, 4, 7, 9, 2), (3, 2, 1, 1, 1), (1, 8, 28, 13, 16)]
    for n, c, h, w, k in shapes:
        for m in (2, 4):
            tiles = n * -(-h // m) * -(-w // m)
            want, got = tiles * (m + 2) ** 2 * c * k, answer_fn(n, c, h, w, k, m)
            if got == want:
                continue
            exact = n * h * w / (m * m) * (m + 2) ** 2 * c * k
            why = ("a tile that overhangs the right or bottom edge still costs all its products" if got == exact else
                   "count multiplications, not FLOPs" if got == 2 * want else
                   "a tile has (m + 2) x (m + 2) transformed points, not m x m" if got == tiles * m * m * c * k else
                   f"{_compare(got, want)}; how many tiles cover the layer, and how many points has each?")
            return _verdict(False, "", f"n={n} c={c} {h}x{w} k={k}, F({m}x{m}): {got:,}: {why}")
    return _verdict(True, "where m divides the layer F(4x4) takes 2.25/4 of F(2x2)'s multiplications; on 14x14 "
                    "and 7x7 its tiles overhang the edge and it saves less", "")


@exercise
def check_c_fragment(answer_fn) -> bool:
    """Chapter 13: (lane) -> the four (row, col) elements of the 16x8 accumulator C of
    mma.sync.m16n8k8 that the lane holds in c0, c1, c2, c3, in that order (row = position m,
    0-15; col = channel n, 0-7), checked for all 32 lanes against the layout in tc.cuh."""
    from .tensor_cores import fragment_owner
    want = {lane: [None] * 4 for lane in range(32)}
    for row in range(16):
        for col in range(8):
            lane, reg = fragment_owner("C", row, col)
            want[lane][reg] = (row, col)
    for lane in range(32):
        got = [tuple(int(v) for v in e) for e in answer_fn(lane)]
        if got == want[lane]:
            continue
        if len(got) != 4:
            return _verdict(False, "", f"lane {lane}: {len(got)} elements; each lane holds 4 of C's 128 (c0..c3)")
        if sorted(got) == sorted(want[lane]):
            bad = "right elements in the wrong registers: c0 and c1 are neighbours in one row, c2 and c3 the same columns further down"
        elif sorted((c, r) for r, c in got) == sorted(want[lane]):
            bad = "rows and columns swapped: a row of C is a position (16 of them), a column a channel (8)"
        elif [c for _, c in got] == [c for _, c in want[lane]]:
            bad = "the columns are right, a row is not: which group of 4 lanes shares a row, and how far below are c2, c3?"
        elif [r for r, _ in got] == [r for r, _ in want[lane]]:
            bad = "the rows are right, a column is not: the 4 lanes of a group split the 8 columns between them, 2 each"
        else:
            bad = "with g = lane / 4 and t = lane % 4, which row and which pair of columns does the lane own?"
        return _verdict(False, "", f"lane {lane}: {bad}")
    return _verdict(True, "every lane holds 2 adjacent columns of one row, and the same 2 columns 8 rows below", "")


@exercise
def check_tf32_products(answer_fn, count: int = 10_000) -> bool:
    """Chapter 13: (a, b) float32 arrays -> the relative error of each product a*b when both
    operands are rounded to TF32 first (to_tf32), against the exact product. Checked on `count`
    random products; when right, prints the largest error beside 2^-10."""
    from ..engine.tensor import to_tf32
    rng = np.random.default_rng(13)
    a, b = rng.standard_normal((2, count)).astype(np.float32)
    exact = a.astype(np.float64) * b
    want = np.abs(to_tf32(a).astype(np.float64) * to_tf32(b) - exact) / np.abs(exact)
    got = np.asarray(answer_fn(a.copy(), b.copy()), dtype=np.float64)
    if got.shape != want.shape:
        return _verdict(False, "", f"{got.shape} values for {count} products: one relative error per product")
    if np.allclose(got, want, rtol=1e-2, atol=2.0**-20):
        worst = float(want.max())
        return _verdict(True, f"the largest relative error of {count:,} products is {worst:.3e}; "
                        f"2^-10 = {2.0**-10:.3e} ({worst / 2.0**-10:.1%} of it)", "")
    if float(np.abs(got).max()) <= 2.0**-11 * (1 + 1e-3):
        bad = "no error is above 2^-11, one rounding's worth: are both operands rounded (and not the product)?"
    else:
        bad = ("not the relative error of the rounded operands' product: |rounded - exact| / |exact| per product, "
               "with the exact product computed from the unrounded a and b")
    return _verdict(False, "", bad)


@exercise
def check_nhwc_offsets(answer_fn) -> bool:
    """Chapter 13, step 5: (n, h, w, r, s, k, dims) -> the offset in dy' stored channel-last
    (N, OH, OW, K) of the value that position (n, h, w) of dx reads for tap (r, s) and channel k,
    or None where the tap misses dy. ``dims``: N, K, OH, OW, stride, pad. Checked on every
    position, tap and channel of a stride-1 and a stride-2 layer (3x3) against the definition:
    dy's position (oh, ow) reaches dx at (oh * stride - pad + r, ow * stride - pad + s)."""
    for n_, k_, size, stride, pad in ((2, 8, 5, 1, 1), (1, 4, 7, 2, 1)):
        out = (size + 2 * pad - 3) // stride + 1
        dims = {"N": n_, "K": k_, "OH": out, "OW": out, "stride": stride, "pad": pad}
        reads = {}                        # (n, h, w, r, s, k) -> offset of the value it reads
        for n, oh, ow, r, s, k in np.ndindex(n_, out, out, 3, 3, k_):
            h, w = oh * stride - pad + r, ow * stride - pad + s
            if 0 <= h < size and 0 <= w < size:
                reads[(n, h, w, r, s, k)] = ((n * out + oh) * out + ow) * k_ + k
        for n, h, w, r, s, k in np.ndindex(n_, size, size, 3, 3, k_):
            got, want = answer_fn(n, h, w, r, s, k, dict(dims)), reads.get((n, h, w, r, s, k))
            if got == want:
                continue
            where = f"stride {stride}, position (n, h, w) = ({n}, {h}, {w}), tap (r, s) = ({r}, {s}), k = {k}"
            if want is None:
                bad = "no position of dy reaches dx there through this tap: return None (the copy is zero-filled)"
            elif got is None:
                bad = "this tap does reach dy there: which (oh, ow)? (h + pad - r must be a multiple of the stride)"
            elif int(got) == ((n * k_ + k) * out + want // k_ % (out * out) // out) * out + want // k_ % out:
                bad = "that is where the value lies in NCHW; the copy is channel-last, (N, OH, OW, K)"
            elif int(got) // k_ == want // k_:
                bad = "the right pixel of dy, the wrong channel: k is the innermost index of the copy"
            elif int(got) % k_ == k:
                bad = "the right channel, the wrong pixel: oh = (h + pad - r) / stride, ow = (w + pad - s) / stride"
            else:
                bad = "not the offset of the value this tap reads: which pixel (oh, ow) of image n, then which channel?"
            return _verdict(False, "", f"{where}: {bad}")
    return _verdict(True, "every position, tap and channel of both layers reads the right value of the "
                    "channel-last copy, and nothing where the tap misses", "")
@exercise
def check_box_starts(answer_fn) -> bool:
    """Chapter 13, step 8: (i0, ph, r, stride, pad) -> the row of dy' where the TMA box of tap r
    starts for a block whose patch starts at row i0 of phase ph (the rows h = i * stride + ph of
    dx), or None where tap r reaches no row of that phase. Checked for strides 1 to 3, pads 0 to 2,
    taps 0 to 4, every phase and three first rows, against the definition: row oh of dy reaches
    row oh * stride - pad + r of dx through tap r (a box may start outside dy: zeros arrive there)."""
    for stride in range(1, 4):
        for pad, r, ph, i0 in np.ndindex(3, 5, stride, 6):
            if i0 not in (0, 1, 5):
                continue
            h = i0 * stride + ph                      # the patch's first row of dx
            want = next((oh for oh in range(-10, 30) if oh * stride - pad + r == h), None)
            got = answer_fn(int(i0), int(ph), int(r), stride, int(pad))
            if got == want:
                continue
            where = f"stride {stride}, pad {pad}, tap r = {r}, phase ph = {ph}, patch from row i0 = {i0}"
            if want is None:
                bad = ("tap r reaches no row of this phase (h + pad - r is not a multiple of the stride for "
                       "h = i0 * stride + ph): return None, the block skips the tap")
            elif got is None:
                bad = "this tap does reach the phase: which row oh of dy has oh * stride - pad + r = i0 * stride + ph?"
            elif got == want - i0:
                bad = "the box starts at the block's first row: add i0"
            elif got == h + pad - r:
                bad = "that is the row at stride 1; the phase's rows lie a stride apart in dx: divide by the stride"
            else:
                bad = "not the row of dy that reaches the patch's first row: oh * stride - pad + r = i0 * stride + ph"
            return _verdict(False, "", f"{where}: {bad}")
    return _verdict(True, "every stride, pad, tap and phase: each box starts where the definition says, and the "
                    "taps that miss a phase are skipped", "")


