"""Chapter 01's exercise checks (the mathematics of backprop)."""
from __future__ import annotations

import numpy as np

from .verdict import _verdict, exercise, _compare, named_mistake

SIZE_CASES = [(7, 3, 1, 1), (7, 3, 2, 1), (8, 3, 2, 0), (5, 5, 3, 4), (1, 1, 1, 0), (28, 2, 3, 1)]
SIZE_MISTAKES = [
    ("the padding is added on both sides of the input", lambda s, k, st, p: (s + p - k) // st + 1),
    ("one position short: does your count include the first position?", lambda s, k, st, p: (s + 2 * p - k) // st),
    ("one position too many: the last window must end inside the padded input",
     lambda s, k, st, p: (s + 2 * p - k) // st + 2),
    ("rounded up: a window that does not fit at the end is no output position (floor division)",
     lambda s, k, st, p: -(-(s + 2 * p - k) // st) + 1),
    ("the stride divides the whole count: only the positions after the first are stride apart",
     lambda s, k, st, p: (s + 2 * p - k + 1) // st),
]


# the course computes output sizes, and convolutions whose shape gives them away
SIZES = ("ops.reference:output_size", "ops.reference:output_sizes", "ops.reference:conv2d_forward",
         "ops.reference:conv2d_dgrad", "ops.reference:conv_forward_nd", "ops.reference:conv_dgrad_nd",
         "runner:prepare", "chapters.any_shape:out_size", "chapters.any_shape:geometry")


@exercise(closes=SIZES)
def check_output_size(answer_fn) -> bool:
    """Chapter 01: a function (size, kernel, stride, padding) -> output size."""
    from ...ops.reference import output_size
    for args in SIZE_CASES:
        got, want = answer_fn(*args), output_size(*args)
        if got != want:
            if not isinstance(got, (int, np.integer)):
                why = "it should be a whole number of positions (floor division)"
            else:
                why = named_mistake(answer_fn, SIZE_CASES, SIZE_MISTAKES, same=lambda a, b: a == b) or (
                    f"{_compare(got, want)}; count where the window can start, then step by the stride")
            return _verdict(False, "", f"for (size, kernel, stride, padding) = {args} you give {got}: {why}")
    return _verdict(True, "the output size matches for every case tried", "")


@exercise(closes=("chapters.pictures:touched_outputs", "chapters.pictures:draw_touch_map") + SIZES)
def check_touched_outputs(answer_fn) -> bool:
    """Chapter 01: (h, kernel, stride, padding, out_size) -> the output rows input row h reaches."""
    for h, k, s, p in [(0, 3, 1, 1), (4, 3, 2, 1), (5, 3, 2, 0), (2, 5, 1, 2), (6, 3, 3, 2), (8, 3, 1, 1)]:
        size = 9
        oh_n = (size + 2 * p - k) // s + 1
        want = {o for o in range(oh_n) if 0 <= h + p - o * s < k}
        got = list(answer_fn(h, k, s, p, oh_n))
        if len(got) != len(set(got)):
            return _verdict(False, "", f"input row {h}, kernel {k}, stride {s}, padding {p}: your list "
                            f"names an output row twice")
        if set(got) != want:
            outside = [o for o in got if not 0 <= o < oh_n]
            why = ("it names rows outside 0 .. out_size-1" if outside else
                   "it misses a row that reads this input" if set(got) < want else
                   "it names a row whose window does not cover this input" if set(got) > want else
                   "some rows are wrong: write down which input rows output row o reads, then turn it around")
            return _verdict(False, "", f"input row {h}, kernel {k}, stride {s}, padding {p}: you give "
                            f"{sorted(got)}; {why}")
    return _verdict(True, "every input row reaches the right output rows", "")
