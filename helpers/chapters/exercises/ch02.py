"""Chapter 02's exercise checks (the naive kernel)."""
from __future__ import annotations

from .verdict import _verdict, exercise, _compare, named_mistake

# (N, C, H, W, K, R, S, stride, padding, activation): R != S and H != W in the last two, so swapped
# sides are caught; padding everywhere but one case, so offsets that meet the padding matter
CASES = [(1, 3, 8, 8, 4, 3, 3, 1, 1, "none"), (2, 4, 7, 5, 6, 5, 5, 2, 2, "relu"),
         (1, 2, 9, 6, 3, 3, 1, 2, 1, "none"), (1, 2, 6, 7, 2, 2, 3, 1, 0, "tanh"), (3, 1, 5, 4, 2, 3, 3, 3, 2, "none")]


def _out(size, k, st, p):
    return (size + 2 * p - k) // st + 1


def _reached(size, k, st, p):
    """Pairs (input position, kernel offset) along one axis whose output position exists."""
    o = _out(size, k, st, p)
    return sum(1 for i in range(size) for r in range(k) if (i + p - r) >= 0 and (i + p - r) % st == 0
               and (i + p - r) // st < o)


def _macs(n, c, h, w, k, r, s, st, p):
    return n * c * k * _reached(h, r, st, p) * _reached(w, s, st, p)


def _bytes(n, c, h, w, k, r, s, st, p, act, macs=None, loads=None, store=True):
    macs = _macs(n, c, h, w, k, r, s, st, p) if macs is None else macs
    loads = (2 if act == "none" else 3) if loads is None else loads
    return 4 * (loads * macs + (n * c * h * w if store else 0))


MISTAKES = [
    ("every (k, r, s) of every work-item is counted: an offset whose output does not exist is skipped "
     "(`continue`) before it loads anything",
     lambda n, c, h, w, k, r, s, st, p, a: _bytes(n, c, h, w, k, r, s, st, p, a, macs=n * c * h * w * k * r * s)),
    ("the multiply-adds are counted from the output side (N·K·OH·OW·C·R·S), which includes the pairs whose "
     "input lies in the padding: no work-item computes those",
     lambda n, c, h, w, k, r, s, st, p, a: _bytes(n, c, h, w, k, r, s, st, p, a,
                                                  macs=n * k * _out(h, r, st, p) * _out(w, s, st, p) * c * r * s)),
    ("with an activation each multiply-add also reads y, the layer's output, for the derivative",
     lambda n, c, h, w, k, r, s, st, p, a: _bytes(n, c, h, w, k, r, s, st, p, a, loads=2)),
    ("each work-item also writes its one value of dx",
     lambda n, c, h, w, k, r, s, st, p, a: _bytes(n, c, h, w, k, r, s, st, p, a, store=False)),
    ("count bytes, 4 per float, not floats",
     lambda n, c, h, w, k, r, s, st, p, a: _bytes(n, c, h, w, k, r, s, st, p, a) // 4),
    ("the kernel's height R goes with the image's height H, its width S with W",
     lambda n, c, h, w, k, r, s, st, p, a: _bytes(n, c, h, w, k, s, r, st, p, a)),
]


@exercise(closes=("chapters.direct:valid_table", "chapters.direct:count_checks", "chapters.direct:checks_formula",
                   "chapters.direct:rows_reached", "chapters.exercises.ch02:_reached", "chapters.exercises.ch02:_macs",
                   "chapters.exercises.ch02:_bytes"))
def check_naive_bytes(answer_fn) -> bool:
    """Chapter 02: the bytes the naive kernel asks global memory for (loads and stores, no cache),
    for (N, C, H, W, K, R, S, stride, padding, activation)."""
    for case in CASES:
        want, got = _bytes(*case), answer_fn(*case)
        if got != want:
            n, c, h, w, k, r, s, st, p, act = case
            why = named_mistake(answer_fn, CASES, MISTAKES, same=lambda a, b: a == b) or (
                f"{_compare(got, want)}; count the multiply-adds the kernel performs first")
            return _verdict(False, "", f"for N={n} C={c} {h}x{w} K={k} {r}x{s} stride {st} pad {p} {act} you give "
                            f"{got:,}: {why}")
    return _verdict(True, "4 bytes per load of dy and w (and y) for every multiply-add the checks let through, "
                    "plus one store per work-item", "")
