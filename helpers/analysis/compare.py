"""The course against the vendor library: per operation, layer and device, the fastest course
stage recorded in results/ beside the vendor's time from the same run.

    from helpers.analysis.compare import best_vs_vendor, table, readme_section
    rows = best_vs_vendor("conv_dgrad", device="H200")   # one dict per (op, device, layer); or "nvidia-h200"
    print(table(rows))                                   # a plain-text table
    print(readme_section())                              # README's summary (a test checks it)

Only runs on a GPU with the vendor timed in the same session count (cuDNN fp32 with TF32 off,
cuBLAS fp32, PyTorch's batch norm), and only rows that matched the reference and were stored in
float32: a reduced-precision stage is compared with the vendor in its own precision, elsewhere.
The stage named is the one that ran (a fallback where the requested stage could not take the
layer). ``x_vendor`` is the vendor's median time over the stage's: above 1 the course is faster.
The vendor's time is its first kernel's start to its last kernel's end (CUPTI), as the course's
stages are timed; for batch norm's backward pass, whose vendor call is autograd's, with host work
between its two kernels, the sum of the kernels' durations where the run recorded it (``kernels_*``,
helpers/ops/vendor.py), which leaves that host work out (and is never the longer).
"""
from __future__ import annotations

from ..ops import op_module
from ..stages import OPS
from .names import slug
from .results import load
from .summary import geomean

# The ladders in results/, the tagged comparisons, and the chapter 09-11 runs in results/local/.
PATTERNS = ("*.json", "local/run*.json")


def op_name(op: str) -> str:
    """What the tables call an operation: its module's NAME (helpers/ops/<op>.py), so that a new
    operation is named where it is defined; an op the registry no longer has keeps its key."""
    return op_module(op).NAME if op in OPS else op


def _runs():
    for pattern in PATTERNS:
        for run in load(pattern):
            if (run.get("op") and isinstance(run.get("vendor"), list) and run.get("rows")
                    and run["device"].get("type") == "GPU"):
                yield run


def _vendor_name(v: dict) -> str:
    return v.get("name") or (v.get("library") or "vendor").split()[0]


# ops whose vendor call has host work between its kernels: timed by its kernels added up
KERNEL_SUM_OPS = ("batchnorm_backward",)


def vendor_ms(v: dict, op: str) -> float:
    """A vendor call's device time: first kernel to last, or for KERNEL_SUM_OPS its kernels added
    up where recorded."""
    return (op in KERNEL_SUM_OPS and v.get("kernels_median_ms")) or v["median_ms"]


def matches(device: str, name: str) -> bool:
    """Whether ``device`` names the device called ``name``: part of its name ('H200') or of its
    slug, as the result files spell it ('nvidia-h200'), in any case."""
    return device.lower() in name.lower() or (slug(device) != "" and slug(device) in slug(name))


def best_vs_vendor(op: str | None = None, device: str | None = None) -> list[dict]:
    """Per (op, device, layer, problem): the fastest recorded course stage and the vendor's time
    from that stage's run. ``op`` and ``device`` (part of the device's name, 'H200', or of its
    slug, 'nvidia-h200') narrow the list; a device no recorded run matches is refused with the
    devices that are recorded (ValueError), never answered with no rows.
    Rows: op, layer_set, layer, problem, device, stage, ms, vendor, vendor_ms, x_vendor, file."""
    runs = list(_runs())
    if op is not None and op not in OPS:
        raise ValueError(f"unknown op {op!r}; the ops are {', '.join(OPS)}")
    if device is not None and not any(matches(device, run["device"]["name"]) for run in runs):
        known = sorted({f"{run['device']['name'].strip()} ({slug(run['device']['name'])})" for run in runs})
        raise ValueError(f"no GPU run with the vendor's times is recorded in results/ on a device matching "
                         f"{device!r}; the recorded devices are {', '.join(known) or 'none'}")
    best: dict = {}
    for run in runs:
        if (op and run["op"] != op) or (device and not matches(device, run["device"]["name"])):
            continue
        # the vendor in fp32, as the rows compared (a run of chapter 13 times it per precision)
        vendor = {v["layer"]: v for v in run["vendor"] if v.get("median_ms") and v.get("precision", "fp32") == "fp32"}
        for r in run["rows"]:
            v = vendor.get(r["layer"])
            if v is None or not r.get("verified", True) or (r.get("precision") or "fp32") != "fp32":
                continue
            key = (run["op"], run["device"]["name"], r["layer"], r["problem"])
            if key not in best or r["median_ms"] < best[key]["ms"]:
                best[key] = {"op": run["op"], "layer_set": run["layer_set"], "layer": r["layer"],
                             "problem": r["problem"], "device": run["device"]["name"],
                             "stage": r.get("ran") or r["key"], "ms": r["median_ms"], "vendor": _vendor_name(v),
                             "vendor_ms": vendor_ms(v, run["op"]),
                             "x_vendor": vendor_ms(v, run["op"]) / r["median_ms"],
                             "file": run["file"]}
    return sorted(best.values(), key=lambda b: (OPS.index(b["op"]) if b["op"] in OPS else len(OPS),
                                                b["device"], b["layer_set"], b["layer"]))


def table(rows: list[dict]) -> str:
    """A plain-text table of best_vs_vendor's rows (what chapter 15's summary prints)."""
    if not rows:
        return "No GPU run with the vendor's times is recorded in results/ yet."
    out = [f"{'operation':<20} {'device':<12} {'layer':<16} {'best course stage':<22} {'ms':>8} "
           f"{'vendor':<8} {'ms':>8} {'x vendor':>9}"]
    for b in rows:
        out.append(f"{op_name(b['op']):<20} {b['device'][:12]:<12} {b['layer']:<16} {b['stage']:<22} "
                   f"{b['ms']:8.3f} {b['vendor']:<8} {b['vendor_ms']:8.3f} {b['x_vendor']:9.2f}")
    return "\n".join(out)


def readme_section() -> str:
    """README's table: per operation, layer set and device, the best course stage of each layer
    against the vendor (geometric mean and range of x vendor, layers where the course is faster)."""
    rows = best_vs_vendor()
    lines = ["| operation, layers | device | vendor | best course stage per layer, × vendor: geometric mean "
             "(range) | layers faster than the vendor | stages that were best |",
             "| --- | --- | --- | --- | --- | --- |"]
    groups = dict.fromkeys((b["op"], b["layer_set"], b["device"]) for b in rows)
    for op, layer_set, dev in groups:
        g = [b for b in rows if (b["op"], b["layer_set"], b["device"]) == (op, layer_set, dev)]
        xs = [b["x_vendor"] for b in g]
        stages = ", ".join(f"`{s}`" for s in dict.fromkeys(b["stage"] for b in g))
        lines.append(f"| {op_name(op)}, {layer_set} | {dev} | {g[0]['vendor']} | ×{geomean(xs):.2f} "
                     f"(×{min(xs):.2f} to ×{max(xs):.2f}) | {sum(x > 1 for x in xs)} of {len(xs)} | {stages} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(readme_section())
    print()
    print(table(best_vs_vendor()))
