"""Stage ``auto`` on layers nobody tuned for: the zoo runs (``./course bench --layers zoo --stages
auto``, recorded per convolution op) beside the vendor timed in the same run.

    from helpers.analysis.zoo import auto_rows, verdict, worst
    rows = auto_rows("conv_wgrad", "zoo", "NVIDIA H200")   # one dict per layer
    print(verdict(rows))                                     # layers at x1.0, geomean, slowest layer, slowest first call

Each row: layer, the stage auto ran, its median ms, the vendor's, ``x_vendor`` (the vendor's time
over auto's: above 1 the course is faster) and ``first_call_s``, the seconds auto's first call on
that layer took in a fresh process with no choice cached (kernel builds, the model's ranking and
the timing of its short list included).
"""
from __future__ import annotations

from collections import Counter

from .compare import vendor_ms
from .results import load
from .summary import geomean


def auto_rows(op: str, layer_set: str = "zoo", device: str = "NVIDIA H200") -> list[dict]:
    """auto's rows of the untagged run of ``op`` over ``layer_set`` on ``device``, with the vendor's
    fp32 time of the same run; [] where no such run is recorded."""
    runs = [r for r in load() if r.get("kind") == "bench" and r.get("op") == op and r.get("layer_set") == layer_set
            and not r.get("tag") and r["device"]["name"].strip() == device]
    if not runs:
        return []
    run = max(runs, key=lambda r: r["date"])
    vendor = {v["layer"]: v for v in run.get("vendor") or [] if v.get("median_ms") and v.get("precision", "fp32") == "fp32"}
    out = []
    for r in run["rows"]:
        if r["stage"] != "auto" or r["layer"] not in vendor:
            continue
        v_ms = vendor_ms(vendor[r["layer"]], op)
        out.append({"layer": r["layer"], "problem": r["problem"], "shape": r["shape"], "ran": r.get("ran", r["key"]), "ms": r["median_ms"],
                    "vendor": vendor[r["layer"]].get("name", "vendor"), "vendor_ms": v_ms,
                    "x_vendor": v_ms / r["median_ms"], "first_call_s": r.get("first_call_s"), "file": run["file"],
                    "date": run["date"][:10]})
    return out


def verdict(rows: list[dict]) -> str:
    """The layers at or above the vendor, the geometric mean of x vendor, the slowest layer against
    the vendor, and the slowest first call."""
    if not rows:
        return "no run recorded"
    xs = [r["x_vendor"] for r in rows]
    slow = min(rows, key=lambda r: r["x_vendor"])
    calls = [r for r in rows if r["first_call_s"] is not None]
    first = max(calls, key=lambda r: r["first_call_s"]) if calls else None
    within = sum(r["first_call_s"] <= 3.0 for r in calls)
    return (f"{sum(x >= 1.0 for x in xs)} of {len(xs)} layers at x1.0 or better, geomean x{geomean(xs):.2f}; "
            f"slowest x{slow['x_vendor']:.2f} ({slow['layer']}); "
            + (f"first calls within 3 s: {within} of {len(calls)}, slowest {first['first_call_s']:.1f} s ({first['layer']})"
               if first else "no first-call times recorded"))


def worst(rows: list[dict], count: int = 5) -> list[dict]:
    """The ``count`` layers where auto is furthest behind the vendor, the furthest first."""
    return sorted(rows, key=lambda r: r["x_vendor"])[:count]


def kind(row: dict) -> str:
    """A layer's kind: the kernel's size and the stride ("3x3 s1", "1x7 s1", "7x7 s2")."""
    pair = lambda v: tuple(v) if isinstance(v, (list, tuple)) else (v, v)
    kh, kw = pair(row["shape"]["kernel"])
    sh, sw = pair(row["shape"]["stride"])
    return f"{kh}x{kw} s{sh}" + (f",{sw}" if sw != sh else "")


def by_kind(rows: list[dict]) -> dict:
    """x vendor's geometric mean per kind of layer (the kernel's size and the stride): {"3x3 s1":
    (layers, geomean)}, the kind furthest behind the vendor first."""
    groups: dict = {}
    for r in rows:
        groups.setdefault(kind(r), []).append(r["x_vendor"])
    return {k: (len(v), geomean(v)) for k, v in sorted(groups.items(), key=lambda kv: geomean(kv[1]))}


def ran(rows: list[dict], of_kind: str) -> dict:
    """{stage: layers} that auto ran on the layers of one kind, the most used first."""
    return dict(Counter(r["ran"] for r in rows if kind(r) == of_kind).most_common())
