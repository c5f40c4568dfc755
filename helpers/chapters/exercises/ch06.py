"""Chapter 06's exercise checks (combining output depth)."""
from __future__ import annotations

from .verdict import _verdict, exercise


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
