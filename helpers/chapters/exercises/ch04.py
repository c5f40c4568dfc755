"""Chapter 04's exercise checks (weight vectorization)."""
from __future__ import annotations

from .verdict import _verdict, exercise, _compare, named_mistake

# (0, 15, 64, 64) and (1, 6, 8, 32) end one float before a line boundary: counting 10 floats
# instead of 9 (or the block's end as first + 9) crosses it and is caught.
CASES = [(0, 0, 64, 64), (0, 1, 64, 64), (0, 7, 64, 64), (1, 5, 16, 32), (2, 3, 3, 128),
         (0, 3, 64, 32), (5, 14, 64, 64), (0, 13, 64, 128), (0, 15, 64, 64), (1, 6, 8, 32)]


def _first(c, k, K):
    return (c * K + k) * 9


MISTAKES = [
    ("you count one float too many: which float is the block's last?",
     lambda c, k, K, L: (_first(c, k, K) + 9) // (L // 4) - _first(c, k, K) // (L // 4) + 1),
    ("one line short: a block that stays inside one line still touches that line",
     lambda c, k, K, L: (_first(c, k, K) + 8) // (L // 4) - _first(c, k, K) // (L // 4)),
    ("the count depends on where the block starts, not only on its size",
     lambda c, k, K, L: -(-36 // L)),
    ("the count depends on where the block starts, not only on its size",
     lambda c, k, K, L: 36 // L + 1),
    ("a line holds line_bytes / 4 floats: you divided floats by bytes",
     lambda c, k, K, L: (_first(c, k, K) + 8) // L - _first(c, k, K) // L + 1),
    ("the block starts at float (c·K + k)·9, its index in floats, not in bytes",
     lambda c, k, K, L: (4 * _first(c, k, K) + 8) // (L // 4) - 4 * _first(c, k, K) // (L // 4) + 1),
]


@exercise(closes=("chapters.direct:weight_requests", "chapters.direct:weight_traffic",
                   "chapters.pictures_combining:weight_requests_per_16_depths"))
def check_block_lines(answer_fn) -> bool:
    """Chapter 04: (c, k, K, line_bytes) -> how many cache lines the 9 weights of the (c, k)
    block of a 3x3 IOHW tensor touch (the tensor starts on a line boundary)."""
    from ..direct import weight_requests
    for c, k, K, line in CASES:
        want = len({ln for q in weight_requests(c, k, K, line, vector=False) for ln in q["lines"]})
        got = answer_fn(c, k, K, line)
        if got != want:
            why = named_mistake(answer_fn, CASES, MISTAKES, same=lambda a, b: a == b) or (
                f"{_compare(got, want)}; find the lines of the block's first and last float")
            return _verdict(False, "", f"block (c={c}, k={k}) with K={K} starts at float {_first(c, k, K)}; "
                            f"with {line}-byte lines you give {got}: {why}")
    return _verdict(True, "a block touches lines first//L .. (first+8)//L, with L floats per line", "")
