"""Chapter 06's exercise checks (combining output depth)."""
from __future__ import annotations

from .verdict import _compare, _verdict, exercise, named_mistake

# (depths, taps, width): stage 06's block in 16-wide loads, in 8-wide ones, in float4s (chapter 07),
# 5x5 taps, and blocks whose depths never straddle
CASES = [(16, 9, 16), (16, 9, 8), (16, 9, 4), (4, 25, 16), (8, 1, 16), (6, 4, 8), (5, 16, 16), (7, 3, 2)]


def _right(depths, taps, width):
    return [i for i in range(depths) if (taps * i) // width != (taps * i + taps - 1) // width]


MISTAKES = [
    ("a depth's last weight is float taps·i + taps - 1, not taps·i + taps",
     lambda d, t, w: [i for i in range(d) if (t * i) // w != (t * i + t) // w]),
    ("the depths are counted from 1: depth 0 starts at float 0",
     lambda d, t, w: [i + 1 for i in _right(d, t, w)]),
    ("a depth whose weights fill exactly one load, or part of one, needs no second load",
     lambda d, t, w: list(range(d))),
]


@exercise(closes=("chapters.pictures_combining:weight_block_loads", "chapters.pictures_combining:draw_weight_block",
                   "launch.unrolled:weight_vectors", "chapters.exercises.ch06:_right"))
def check_straddling_depths(answer_fn) -> bool:
    """Chapter 06: (depths, taps, width) -> the depths of a block (taps weights per depth, stored
    one depth after another) whose weights arrive in more than one load of ``width`` floats."""
    for depths, taps, width in CASES:
        want, got = _right(depths, taps, width), sorted(answer_fn(depths, taps, width))
        if got != want:
            why = named_mistake(lambda *a: sorted(answer_fn(*a)), CASES, MISTAKES, same=lambda a, b: a == b)
            if why is None:
                extra, missing = sorted(set(got) - set(want)), sorted(set(want) - set(got))
                why = (f"depth {extra[0]} lies inside one load" if extra else
                       f"depth {missing[0]} starts in one load and ends in the next")
            return _verdict(False, "", f"{depths} depths of {taps} weights in loads of {width} floats: {why}")
    return _verdict(True, "depth i straddles when its first float taps·i and its last taps·i + taps - 1 lie in different loads", "")


# -- how many load registers take turns: the most loads one depth's weights span ------------------

def _live(depths, taps, width):
    return max((taps * i + taps - 1) // width - (taps * i) // width + 1 for i in range(depths))


LIVE_MISTAKES = [
    ("where a depth starts matters: depth i's first weight is float taps·i, so a depth of at most `width` "
     "weights can still arrive in two loads", lambda d, t, w: -(-t // w)),
    ("ping and pong are what 16-wide loads of 9 weights need; count the loads a depth spans for other widths",
     lambda d, t, w: 2),
    ("a spare register beyond ceil(taps / width) is needed only where a depth crosses into an extra load; "
     "count the loads each depth spans", lambda d, t, w: -(-t // w) + 1),
    ("count the loads one depth spans, not the loads of the whole block",
     lambda d, t, w: -(-(d * t) // w)),
]


@exercise(closes=("chapters.pictures_combining:weight_block_loads", "chapters.pictures_combining:draw_weight_block",
                   "chapters.exercises.ch06:_live", "chapters.exercises.ch06:_right"))
def check_live_loads(answer_fn) -> bool:
    """Chapter 06: (depths, taps, width) -> how many load registers must take turns so that every
    depth's weights are all still in registers when the load that completes them arrives."""
    for depths, taps, width in CASES:
        want, got = _live(depths, taps, width), answer_fn(depths, taps, width)
        if got != want:
            why = named_mistake(answer_fn, CASES, LIVE_MISTAKES, same=lambda a, b: a == b) or (
                f"{_compare(got, want)}: find the depth whose weights span the most loads")
            return _verdict(False, "", f"{depths} depths of {taps} weights in loads of {width} floats: {why}")
    return _verdict(True, "the most loads one depth spans: (taps·i + taps - 1) // width - taps·i // width + 1 at "
                    "its largest", "")
