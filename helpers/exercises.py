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


def check_weight_slot(answer_fn) -> bool:
    """Chapter 06: (depth i, tap t) -> (load v, lane) of the nine 16-wide loads of a 16-depth
    block, where weight t (0..8) of depth i (0..15) arrives."""
    for i in range(16):
        for t in range(9):
            want = divmod(9 * i + t, 16)
            got = answer_fn(i, t)
            if tuple(got) != want:
                return _verdict(False, "", f"depth {i}, tap {t}: you give {tuple(got)}, expected {want} "
                                f"(it is float {9 * i + t} of the block)")
    return _verdict(True, "weight t of depth i is float 9i + t of the block: load (9i+t)//16, "
                    "lane (9i+t)%16", "")


def check_weight_vectors(answer_fn) -> bool:
    """Chapter 07: (first, last) depth of a group -> the float4 indices (0..35) of a 16-depth
    block that hold the group's weights, in order (what the generator loads for the group)."""
    from .combining import weight_vectors
    for first in range(16):
        for last in range(first, 16):
            want = list(weight_vectors(first, last))
            got = list(answer_fn(first, last))
            if got != want:
                return _verdict(False, "", f"depths {first}..{last}: you give {got}, expected {want} "
                                f"(floats {9 * first}..{9 * last + 8})")
    return _verdict(True, "a group of depths first..last needs float4 9·first//4 .. (9·last+8)//4", "")


def check_width_columns(answer_fn) -> bool:
    """Chapter 08: (x0, xpw, W, stride, pad) -> for a 3x3 kernel, the list of the work-item's
    xpw + 2 columns: ow of each (an int), or None where that output does not exist."""
    from .pictures_ladder2 import width_columns
    cases = [(0, 4, 14, 1, 1), (12, 4, 14, 1, 1), (4, 4, 14, 2, 1), (0, 3, 5, 1, 0), (2, 1, 7, 3, 2),
             (6, 8, 9, 2, 1)]
    for x0, xpw, w, stride, pad in cases:
        want = [c["ow"] for c in width_columns(x0, xpw, w, stride, pad)]
        got = list(answer_fn(x0, xpw, w, stride, pad))
        if got != want:
            return _verdict(False, "", f"x0={x0}, XPW={xpw}, W={w}, stride {stride}, pad {pad}: you give "
                            f"{got}, expected {want}")
    return _verdict(True, "column u holds ow = (x0 + pad - 2 + u) / stride where that is exact and "
                    "inside 0 .. OW-1", "")
