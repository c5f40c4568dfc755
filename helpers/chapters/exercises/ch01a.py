"""Chapter 01a's exercise check (the execution model)."""
from __future__ import annotations

from .verdict import _verdict, exercise, named_mistake

# (N, C, H, W, WG): a plane that WG divides, one it does not, one smaller than a work-group
CASES = [(2, 16, 13, 9, 64), (1, 3, 8, 8, 64), (4, 5, 7, 5, 32), (1, 1, 1, 1, 256), (3, 2, 10, 10, 16)]


def _right(n, c, h, w, wg):
    g0 = -(-h * w // wg) * wg
    return (g0, c, n), (g0 - h * w) * c * n, g0 // wg * c * n


MISTAKES = [
    ("the first dimension is not rounded up: the global size must be a multiple of the work-group size",
     lambda n, c, h, w, wg: ((h * w, c, n), 0, -(-h * w // wg) * c * n)),
    ("the idle work-items are counted in one (channel, image) plane only: every plane has them",
     lambda n, c, h, w, wg: (_right(n, c, h, w, wg)[0], _right(n, c, h, w, wg)[0][0] - h * w, _right(n, c, h, w, wg)[2])),
    ("the work-groups are counted along dimension 0 only: dimensions 1 and 2 hold C x N rows of them",
     lambda n, c, h, w, wg: (_right(n, c, h, w, wg)[0], _right(n, c, h, w, wg)[1], _right(n, c, h, w, wg)[0][0] // wg)),
]


@exercise(closes=("runner:plan_stage", "runner:prepare", "launch.direct:per_input_element",
                   "launch.direct_nd:per_input_element", "launch:round_up", "chapters.exercises.ch01a:_right"))
def check_launch(answer_fn) -> bool:
    """Chapter 01a: (N, C, H, W, WG) -> (global size, work-items that return at once, work-groups)
    of the naive kernel's launch (one work-item per input element, work-groups of (WG, 1, 1))."""
    for n, c, h, w, wg in CASES:
        want, got = _right(n, c, h, w, wg), answer_fn(n, c, h, w, wg)
        try:
            size, idle, groups = got
            size = tuple(int(v) for v in size)
        except (TypeError, ValueError):
            return _verdict(False, "", "return three things: the global size as a tuple of three numbers, "
                            "the work-items that return at once, and the number of work-groups")
        if (size, idle, groups) != want:
            which = "global size" if size != want[0] else "idle work-items" if idle != want[1] else "work-groups"
            why = named_mistake(lambda *a: (tuple(answer_fn(*a)[0]), *answer_fn(*a)[1:]), CASES, MISTAKES,
                                same=lambda a, b: a == b) or f"the {which} is wrong"
            return _verdict(False, "", f"N={n} C={c} {h}x{w}, WG={wg}: your {which} is off: {why}")
    return _verdict(True, "the launch rounds dimension 0 up to whole work-groups; the rest return at once", "")
