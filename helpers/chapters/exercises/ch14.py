"""Chapter 14's exercise checks (batch normalization)."""
from __future__ import annotations

import numpy as np

from .verdict import _verdict, exercise, _compare


# the course's statistics of data: an answer could make up two samples with the given counts, means and
# m2 and ask them for the statistics of the union
@exercise(closes=("ops.reference:batchnorm_stats", "ops.reference:batchnorm_forward", "runner:run_stage",
                  "runner:plan_stage", "runner:prepare"))
def check_chan_merge(merge_fn) -> bool:
    """Chapter 14: merge(n_a, mean_a, m2_a, n_b, mean_b, m2_b) -> (n, mean, m2) of the union.

    m2 is the sum of squared deviations from the mean. Tried on splits of data with a large mean,
    with one empty side, and in float32 (the merge must not form E[x^2] - E[x]^2)."""
    rng = np.random.default_rng(14)

    def stats(v):
        v = np.asarray(v, dtype=np.float64)
        return (len(v), float(v.mean()) if len(v) else 0.0, float(((v - v.mean()) ** 2).sum()) if len(v) else 0.0)

    for trial, (offset, scale, na, nb) in enumerate([(0, 1, 5, 7), (1000, 0.01, 64, 64), (-3, 2, 1, 9),
                                                      (5, 1, 0, 6), (5, 1, 6, 0), (1e4, 0.1, 300, 17)]):
        data = offset + scale * rng.standard_normal(na + nb)
        a, b, whole = stats(data[:na]), stats(data[na:]), stats(data)
        try:
            got = merge_fn(*a, *b)
        except ZeroDivisionError:
            return _verdict(False, "", f"sizes {na} and {nb}: your merge divides by zero; an empty side "
                            f"has n = 0")
        try:
            n, mean, m2 = (float(v) for v in got)
        except (TypeError, ValueError):
            return _verdict(False, "", f"merge must return three numbers (n, mean, m2), got {got!r}")
        if n != whole[0]:
            return _verdict(False, "", f"sizes {na} and {nb}: the count is wrong")
        if not np.isclose(mean, whole[1], rtol=1e-12, atol=1e-12 * abs(offset)):
            return _verdict(False, "", f"sizes {na} and {nb}, data around {offset}: the mean is "
                            f"{_compare(mean, whole[1])} (weight each side's mean by its count)")
        if not np.isclose(m2, whole[2], rtol=1e-6, atol=1e-9):
            why = ("m2_a + m2_b misses the spread between the two means" if np.isclose(m2, a[2] + b[2]) else
                   f"m2 is {_compare(m2, whole[2])}")
            return _verdict(False, "", f"sizes {na} and {nb}, data around {offset}: {why}")
        # in float32 too: the same formula must keep the small variance of data around 1000
        if trial == 1:
            a32 = [np.float32(v) for v in a]
            b32 = [np.float32(v) for v in b]
            m2_32 = float(merge_fn(*a32, *b32)[2])
            if not np.isclose(m2_32, whole[2], rtol=1e-2):
                return _verdict(False, "", "in float32, data 1000 + noise of 0.01: m2 loses its digits; "
                                "avoid subtracting large squares")
    return _verdict(True, "Chan's merge: the count, mean and m2 of the union, stable for large means", "")
