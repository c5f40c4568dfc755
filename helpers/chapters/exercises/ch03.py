"""Chapter 03's exercise checks (memoized bounds)."""
from __future__ import annotations

import numpy as np

from .verdict import _verdict, exercise


@exercise(closes=("chapters.direct:valid_table", "chapters.direct:count_checks", "chapters.direct:checks_formula",
                   "chapters.direct:rows_reached"))
def check_valid_table(answer_fn) -> bool:
    """Chapter 03: (h, x, kernel, stride, pad, H, W) -> the kernel x kernel table of booleans
    saying which weights (r, s) meet an output position for input (h, x)."""
    from ..direct import valid_table
    from ...ops.reference import output_size
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
                            f"padding {p}: your table {what}, at (r={r}, s={c}): does that row and that "
                            f"column each reach an output position?")
    return _verdict(True, "your table agrees with stage 03's for every position tried", "")
