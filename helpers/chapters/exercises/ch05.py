"""Chapter 05's exercise checks (input vectorization)."""
from __future__ import annotations

from .verdict import _verdict, exercise, _compare, calls_reference, reference_refused


@exercise
def check_vector_columns(answer_fn) -> bool:
    """Chapter 05: (W, pad) -> how many of the W work-items of a row take stage 05's 3-wide path
    for a 3x3 kernel with stride 1."""
    from ..direct import takes_vector_path
    if (name := calls_reference(answer_fn, ("takes_vector_path", "vector_fraction", "divergent_warps"))):
        return reference_refused(name)
    from ...ops.reference import output_size
    for w, p in [(56, 1), (7, 1), (1, 1), (2, 1), (3, 0), (5, 0), (8, 2), (3, 2), (1, 2), (224, 1)]:
        ow = output_size(w, 3, 1, p)
        want = sum(takes_vector_path(x, ow, 3, 1, p) for x in range(w))
        got = answer_fn(w, p)
        if got != want:
            why = ("it can never be negative" if got < 0 else
                   f"{_compare(got, want)}; the path needs all three columns of the window inside 0 .. OW-1, "
                   f"and 0 <= x < W")
            return _verdict(False, "", f"W={w}, padding {p} (so OW={ow}): you give {got}: {why}")
    return _verdict(True, "the vector path covers max(0, 2-pad) <= x <= min(W-1, OW-1-pad)", "")
