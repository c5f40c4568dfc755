"""Chapter 00's exercise checks (devices and timing)."""
from __future__ import annotations

import numpy as np

from .verdict import _verdict, exercise, _compare, named_mistake

CASES = [(64, 64, 56, 64, 3, 1, 1), (1, 512, 7, 512, 3, 1, 1), (8, 128, 56, 128, 3, 2, 1)]


def _parts(n, c, size, k, r, st, p, o=None):
    """FLOPs and minimal bytes of the input gradient; ``o`` overrides the output size (a mistake)."""
    from ...ops.reference import output_size
    o = output_size(size, r, st, p) if o is None else o
    return 2 * n * k * o * o * c * r * r, 4 * (n * k * o * o + c * k * r * r + n * c * size * size)


def _right(*a):
    flops, nbytes = _parts(*a)
    return flops / nbytes


MISTAKES = [
    ("half the FLOPs: a multiply-add is 2", lambda *a: _right(*a) / 2),
    ("4 times too many: count bytes (4 per float), not floats", lambda *a: _right(*a) * 4),
    ("the FLOPs of the stride-2 layer use the input's H x W positions; the multiply-adds follow the "
     "output gradient's OH x OW", lambda *a: _parts(*a, o=a[2])[0] / _parts(*a)[1]),
    ("the stride-2 layer's grad_output is counted as H x W; it has OH x OW positions",
     lambda *a: np.divide(*_parts(*a, o=a[2]))),
]


@exercise(closes=("runner:prepare", "runner:plan_stage", "ops.conv_dgrad:prepare", "ops.problem:Problem.bytes_moved",
                   "chapters.exercises.ch00:_parts", "chapters.exercises.ch00:_right"))
def check_intensity(answer_fn) -> bool:
    """Chapter 00: FLOPs per minimal byte of the input gradient of a layer (no activation)."""
    for n, c, size, k, r, st, p in CASES:
        want, got = _right(n, c, size, k, r, st, p), answer_fn(n, c, size, k, r, st, p)
        if not np.isclose(got, want, rtol=1e-6):
            why = named_mistake(answer_fn, CASES, MISTAKES) or (
                "the stride-2 layer differs: grad_output has OH x OW positions, the input H x W" if st == 2 else
                f"{_compare(got, want)}; FLOPs = 2·N·K·OH·OW·C·R·S, bytes = 4·(|dy| + |w| + |dx|)")
            return _verdict(False, "", f"for N={n} C={c} {size}x{size} K={k} {r}x{r} stride {st} you give "
                            f"{got:.4g}: {why}")
    return _verdict(True, "FLOPs divided by the bytes of grad_output, weights and grad_input", "")


# -- honest timing: the median and inter-quartile range of the launches after the warm-up --------

def _events(durations_ms, gaps_ns=(3_000, 41_000, 7_000)):
    """Profiling events (start_ns, end_ns) of launches of these durations, one after another on a
    device clock that started long ago, with idle gaps between them (the host's launch overhead)."""
    start, end, t = [], [], 5_283_194_017_000
    for i, ms in enumerate(durations_ms):
        t += gaps_ns[i % len(gaps_ns)]
        start.append(t)
        t += int(round(ms * 1e6))
        end.append(t)
    return start, end


# (start_ns, end_ns, warmup): a slow first launch and warm-up, one slow repetition that pulls the
# mean, an odd and an even number of repetitions, no warm-up at all, a long skewed run
_RNG_MS = [0.4 + 0.05 * ((7 * i) % 11) + (0.6 if i % 9 == 4 else 0.0) for i in range(23)]
TIMING_CASES = [(*_events([12.0, 3.1, 2.9, 0.52, 0.50, 0.55, 0.49, 0.51, 0.90, 0.50, 0.53]), 3),
                (*_events([4.0, 1.25, 1.5, 1.0, 1.75, 1.1]), 1),
                (*_events([0.2, 0.8, 0.3, 0.25]), 0),
                (*_events(_RNG_MS), 5)]


def _durations(start_ns, end_ns, warmup):
    """Each timed launch's own end minus its own start, in ms."""
    return (np.asarray(end_ns) - np.asarray(start_ns))[warmup:] / 1e6


def _stats(ms):
    """(median, first quartile, third quartile): np.percentile's default method."""
    return float(np.median(ms)), float(np.percentile(ms, 25)), float(np.percentile(ms, 75))


def _summary(start_ns, end_ns, warmup):
    return _stats(_durations(start_ns, end_ns, warmup))


TIMING_MISTAKES = [
    ("the warm-up launches are in your statistics: leave out the first `warmup` launches",
     lambda s, e, w: _summary(s, e, 0)),
    ("the mean is pulled by one slow launch; report the median",
     lambda s, e, w: (lambda d: (float(d.mean()), *_stats(d)[1:]))(_durations(s, e, w))),
    ("a nanosecond is 1e-6 of a millisecond (1e-3 gives microseconds)",
     lambda s, e, w: tuple(v * 1000 for v in _summary(s, e, w))),
    ("a launch's time is its own end minus its own start: the gap before the next launch is the host's, "
     "not the kernel's",
     lambda s, e, w: _stats(np.diff(np.append(np.asarray(s), e[-1]))[w:] / 1e6)),
    ("the spread is the inter-quartile range, the 25th and 75th percentiles, not the fastest and slowest launch",
     lambda s, e, w: (lambda d: (float(np.median(d)), float(d.min()), float(d.max())))(_durations(s, e, w))),
    ("the quartiles are of the launches' times, not the median plus or minus a standard deviation",
     lambda s, e, w: (lambda d: (float(np.median(d)), float(np.median(d) - d.std()), float(np.median(d) + d.std())))(
         _durations(s, e, w))),
]


@exercise(closes=("engine.timing:Timing", "chapters.exercises.ch00:_summary", "chapters.exercises.ch00:_durations",
                   "chapters.exercises.ch00:_stats"))
def check_timing_summary(answer_fn) -> bool:
    """Chapter 00: (start_ns, end_ns, warmup) of every launch's profiling events -> (median, first
    quartile, third quartile) of the launches after the warm-up, in milliseconds."""
    same = lambda a, b: len(a) == 3 and bool(np.allclose(np.asarray(a, dtype=float), b, rtol=1e-9, atol=0))
    for start, end, warmup in TIMING_CASES:
        want, got = _summary(start, end, warmup), answer_fn(list(start), list(end), warmup)
        try:
            good = same(got, want)
        except (TypeError, ValueError):
            return _verdict(False, "", f"return three numbers, (median, q1, q3) in milliseconds; you return {got!r}")
        if not good:
            why = named_mistake(lambda *a: answer_fn(list(a[0]), list(a[1]), a[2]), TIMING_CASES, TIMING_MISTAKES,
                                same=same)
            n = len(start) - warmup
            return _verdict(False, "", f"{len(start)} launches, {warmup} of them warm-up: " + (why or (
                f"your median is {_compare(got[0], want[0])}" if not np.isclose(got[0], want[0], rtol=1e-9) else
                f"the quartiles of the {n} timed launches are np.percentile's 25th and 75th (its default method)")))
    return _verdict(True, "the durations end - start of the launches after the warm-up, in ms: their median and "
                    "quartiles", "")
