"""Chapter 09's exercise checks (local memory)."""
from __future__ import annotations

import numpy as np

from .verdict import _verdict, exercise, _compare


@exercise(closes=("launch.local:tile_facts", "launch.local:fitted", "chapters.local:reuse", "chapters.local:global_reads",
                   "chapters.local:tile_fmas"))
def check_tile_reuse(answer_fn) -> bool:
    """Chapter 09: (TX, TY, CB, KH, KW) -> how many times 09_local_tile's work-group reads each dy
    value it copied into local memory, on average (reads from local memory / values copied)."""
    from ..local import tile_facts
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
