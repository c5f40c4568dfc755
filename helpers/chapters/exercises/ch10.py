"""Chapter 10's exercise checks (bank conflicts)."""
from __future__ import annotations

from .verdict import _verdict, exercise, _compare


@exercise(closes=("chapters.banks:passes", "chapters.banks:conflict_degree", "chapters.local:warp_lanes",
                   "chapters.local:store_extra"))
def check_stride_passes(answer_fn) -> bool:
    """Chapter 10: (stride) -> passes a warp needs when work-item i reads the 4-byte word
    i * stride (32 work-items, 32 banks of 4 bytes), counted by the bank model."""
    from ..banks import passes
    for stride in (1, 2, 3, 4, 6, 8, 12, 16, 31, 32, 33, 36, 48, 64):
        want = passes([[i * stride] for i in range(32)])
        got = answer_fn(stride)
        if got != want:
            return _verdict(False, "", f"stride {stride} words: {got} passes is {_compare(got, want)} "
                            f"(which banks do the 32 addresses fall into, and how many words in the busiest?)")
    return _verdict(True, "a stride of s words puts the warp's words into 32/gcd(s, 32) banks, gcd(s, 32) "
                    "words each", "")
