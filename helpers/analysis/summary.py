"""Summaries of recorded runs: geometric means over layers, per stage; the vendor's name."""
from __future__ import annotations

import math


def geomean(values) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def summary(out: dict) -> dict:
    """Per stage: geometric means over the layers of GFLOP/s and of the speed-ups."""
    res = {}
    for key in dict.fromkeys(r["key"] for r in out["rows"]):
        rows = [r for r in out["rows"] if r["key"] == key]
        res[key] = {"gflops": geomean(r["gflops"] for r in rows), "gbps": geomean(r["gbps"] for r in rows),
                    "x_first": geomean(r.get("x_first") for r in rows),
                    "x_vendor": geomean(r.get("x_vendor") for r in rows)}
    return res


def vendor_name(out: dict) -> str:
    """The vendor library a run compared with (its ``name``; cuDNN where none is given)."""
    return out["vendor"][0].get("name", "cuDNN") if out.get("vendor") else "cuDNN"


def two_modes(times, gap: float = 0.05):
    """The repetitions of one timing split at its widest gap between neighbouring sorted times,
    when that gap is more than ``gap`` of the median (a kernel that runs at one of two speeds from
    launch to launch): ((count, fastest, slowest) of the faster group, the same of the slower), or
    None when the times form one group."""
    t = sorted(times)
    if len(t) < 2:
        return None
    i = max(range(1, len(t)), key=lambda k: t[k] - t[k - 1])
    if t[i] - t[i - 1] <= gap * t[len(t) // 2]:
        return None
    return (i, t[0], t[i - 1]), (len(t) - i, t[i], t[-1])
