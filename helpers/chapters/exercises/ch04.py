"""Chapter 04's exercise checks (weight vectorization)."""
from __future__ import annotations

from .verdict import _verdict, exercise, _compare


@exercise
def check_block_lines(answer_fn) -> bool:
    """Chapter 04: (c, k, K, line_bytes) -> how many cache lines the 9 weights of the (c, k)
    block of a 3x3 IOHW tensor touch (the tensor starts on a line boundary)."""
    from ..direct import weight_requests
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
