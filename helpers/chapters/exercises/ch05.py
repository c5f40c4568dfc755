"""Chapter 05's exercise checks (input vectorization)."""
from __future__ import annotations

import sys

from .verdict import _verdict, exercise, _compare

# columns of a row that no loop over its columns gets through; an array of it (8 EB of int64, 1 EB of
# bools) is more than any 64-bit address space maps, so building one fails at once with MemoryError
# (a row of 10^13 would be 80 TB: a machine that overcommits memory grants it, then kills the
# process as the array fills, taking the learner's kernel down with it)
HUGE = 10**18
STEPS = 10_000         # Python lines a closed formula stays far below, however it is written


class _TooManySteps(Exception):
    pass


def _stepped(fn, *args):
    """fn(*args) with every Python line it runs counted: (result, None), or (None, why) where it
    took more than STEPS lines (a loop, a comprehension, a recursion) or ran out of memory."""
    count = [0]

    def local(frame, event, arg):
        if event == "line":
            count[0] += 1
            if count[0] > STEPS:
                raise _TooManySteps()
        return local

    before = sys.gettrace()
    sys.settrace(lambda frame, event, arg: local)
    try:
        result = fn(*args)
    except (_TooManySteps, RecursionError):
        result, count[0] = None, STEPS + 1
    except MemoryError:
        return None, "memory"
    finally:
        sys.settrace(before)
    return (None, "steps") if count[0] > STEPS else (result, None)


def _columns(w: int, p: int) -> int:
    """The closed formula (3x3 kernel, stride 1): columns max(0, 2-p) .. min(W-1, OW-1-p)."""
    ow = w + 2 * p - 2
    return max(0, min(w - 1, ow - 1 - p) - max(0, 2 - p) + 1)


@exercise(closes=("chapters.direct:takes_vector_path", "chapters.direct:vector_fraction",
                  "chapters.direct:divergent_warps", "chapters.direct:window_columns", "chapters.direct:lane_reads",
                  "chapters.exercises.ch05:_columns"))
def check_vector_columns(answer_fn) -> bool:
    """Chapter 05: (W, pad) -> how many of the W work-items of a row take stage 05's 3-wide path
    for a 3x3 kernel with stride 1, as a closed formula: checked on small rows against stage 05's
    test, then on a row of 10^18 columns, where any loop over the columns is stopped."""
    from ..direct import takes_vector_path
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
    for p in (0, 1, 2):
        got, why = _stepped(answer_fn, HUGE, p)
        if why == "steps":
            return _verdict(False, "", f"right on the rows tried, but your function takes a step per column: on a row "
                            f"of 10^18 columns (padding {p}) it was stopped after {STEPS:,} Python lines. The task "
                            f"asks for a closed formula: count the columns from the two ends of their range, "
                            f"without visiting them")
        if why == "memory":
            return _verdict(False, "", f"right on the rows tried, but on a row of 10^18 columns (padding {p}) your "
                            f"function runs out of memory: it builds something per column. The task asks for a "
                            f"closed formula, from the two ends of the range")
        want = _columns(HUGE, p)
        if got != want:
            return _verdict(False, "", f"right on the rows tried, but on a row of 10^18 columns with padding {p} your "
                            f"count is {_compare(got, want)}: does your formula hold for every width?")
    return _verdict(True, "the vector path covers max(0, 2-pad) <= x <= min(W-1, OW-1-pad)", "")
