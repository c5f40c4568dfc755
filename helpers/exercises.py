"""Checks for the chapters' exercises: each says what is right or what is off, never just False."""
from __future__ import annotations

import numpy as np


def _verdict(ok: bool, good: str, bad: str) -> bool:
    print(("Correct: " + good) if ok else ("Not yet: " + bad))
    return ok


def check_output_size(answer_fn) -> bool:
    """Chapter 01: a function (size, kernel, stride, padding) -> output size."""
    from .reference import output_size
    for args in [(7, 3, 1, 1), (7, 3, 2, 1), (8, 3, 2, 0), (5, 5, 3, 4), (1, 1, 1, 0), (28, 2, 3, 1)]:
        got, want = answer_fn(*args), output_size(*args)
        if got != want:
            return _verdict(False, "", f"for (size, kernel, stride, padding) = {args} you give {got}, expected {want}")
    return _verdict(True, "the output size matches for every case tried", "")


def check_touched_outputs(answer_fn) -> bool:
    """Chapter 01: (h, kernel, stride, padding, out_size) -> the output rows input row h reaches."""
    for h, k, s, p in [(0, 3, 1, 1), (4, 3, 2, 1), (5, 3, 2, 0), (2, 5, 1, 2), (6, 3, 3, 2)]:
        size = 9
        oh_n = (size + 2 * p - k) // s + 1
        want = sorted(o for o in range(oh_n) if 0 <= h + p - o * s < k)
        got = sorted(answer_fn(h, k, s, p, oh_n))
        if got != want:
            return _verdict(False, "", f"input row {h} with kernel {k}, stride {s}, padding {p}: "
                            f"you give {got}, expected {want}")
    return _verdict(True, "every input row reaches the right output rows", "")


def check_flops(answer_fn) -> bool:
    """Chapter 02: FLOPs of the input gradient for (N, C, H, W, K, R, S, stride, padding)."""
    from .reference import output_size
    for n, c, h, w, k, r, s, st, p in [(1, 3, 8, 8, 4, 3, 3, 1, 1), (2, 16, 7, 5, 32, 5, 5, 2, 2)]:
        oh, ow = output_size(h, r, st, p), output_size(w, s, st, p)
        want = 2 * n * k * oh * ow * c * r * s
        got = answer_fn(n, c, h, w, k, r, s, st, p)
        if got != want:
            return _verdict(False, "", f"for N={n} C={c} {h}x{w} K={k} {r}x{s} stride {st} pad {p} you "
                            f"give {got}, expected {want}: count one multiply-add (2 FLOPs) per weight use")
    return _verdict(True, "2·N·K·OH·OW·C·R·S: one multiply and one add per (output, weight) pair", "")


def check_array(got, want, name: str = "answer", rtol: float = 1e-5) -> bool:
    """Generic: an array the learner computed against the expected one."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return _verdict(False, "", f"{name} has shape {got.shape}, expected {want.shape}")
    ok = np.allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())
    return _verdict(ok, f"{name} matches", f"{name} differs; largest error {np.abs(got - want).max():.3g}")


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
        got = merge_fn(*a, *b)
        try:
            n, mean, m2 = (float(v) for v in got)
        except (TypeError, ValueError):
            return _verdict(False, "", f"merge must return three numbers (n, mean, m2), got {got!r}")
        if n != whole[0]:
            return _verdict(False, "", f"sizes {na} and {nb}: count {n}, expected {whole[0]}")
        if not np.isclose(mean, whole[1], rtol=1e-12, atol=1e-12 * abs(offset)):
            return _verdict(False, "", f"sizes {na} and {nb}, data around {offset}: mean {mean!r}, "
                            f"expected {whole[1]!r}")
        if not np.isclose(m2, whole[2], rtol=1e-6, atol=1e-9):
            return _verdict(False, "", f"sizes {na} and {nb}, data around {offset}: m2 {m2!r}, expected "
                            f"{whole[2]!r} (m2 of the union = m2_a + m2_b + delta^2 * n_a * n_b / n, "
                            f"delta = mean_b - mean_a)")
        # in float32 too: the same formula must keep the small variance of data around 1000
        if trial == 1:
            a32 = [np.float32(v) for v in a]
            b32 = [np.float32(v) for v in b]
            m2_32 = float(merge_fn(*a32, *b32)[2])
            if not np.isclose(m2_32, whole[2], rtol=1e-2):
                return _verdict(False, "", f"in float32, data 1000 + noise of 0.01: m2 {m2_32:.4g}, expected "
                                f"{whole[2]:.4g}; avoid subtracting large squares")
    return _verdict(True, "Chan's merge: the count, mean and m2 of the union, stable for large means", "")
