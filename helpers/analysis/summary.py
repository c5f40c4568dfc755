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
