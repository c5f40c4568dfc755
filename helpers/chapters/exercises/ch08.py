"""Chapter 08's exercise checks (combining width)."""
from __future__ import annotations

from .verdict import _verdict, exercise


@exercise(closes=("chapters.pictures_combining:width_columns", "chapters.pictures_combining:draw_width_tables"))
def check_width_columns(answer_fn) -> bool:
    """Chapter 08: (x0, xpw, W, stride, pad) -> for a 3x3 kernel, the list of the work-item's
    xpw + 2 columns: ow of each (an int), or None where that output does not exist."""
    from ..pictures_combining import width_columns
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
