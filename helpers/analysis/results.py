"""Recorded benchmark runs in results/: JSON files written by `python -m helpers.bench`."""
from __future__ import annotations

import json

from . import names
from .names import RESULTS


def load(pattern: str = "*.json") -> list[dict]:
    """Every recorded run whose file name matches ``pattern``: not tuned.json (the searched
    parameters), record_<device>.json (the recorder's log of its tasks, helpers/record.py) nor
    a benchmark cut short by Ctrl-C (NAME.partial.json: some of its rows only)."""
    runs = []
    for path in sorted(RESULTS.glob(pattern)):
        if path.name == "tuned.json" or path.name.startswith("record_") or path.name.endswith(".partial.json"):
            continue
        data = json.loads(path.read_text())
        data["file"] = path.name
        runs.append(data)
    return runs


def find(op: str, layer_set: str, device_type: str | None = "GPU", tag: str | None = None) -> list[dict]:
    """Recorded runs of an op over a layer set (by default only those from GPUs), untagged
    (the ladders) unless a ``tag`` is asked for (runs made for one comparison, e.g. cuda_twins)."""
    return [r for r in load() if r.get("op") == op and r.get("layer_set") == layer_set
            and r.get("tag") == tag
            and (device_type is None or r["device"].get("type") == device_type)]


def best_row(op: str, layer_set: str, layer: str, device: str, precision: str = "fp32", skip=(),
             until: str | None = None) -> dict:
    """The fastest row on ``layer`` in ``precision`` over every recorded run of the op and layer set
    on the device named (the ladder and the tagged runs), stages in ``skip`` left out; with the
    file it came from. ``until``: a run's date; only runs recorded then or before count."""
    rows = [dict(r, file=run["file"]) for run in load() if run.get("kind") == "bench"
            and run.get("op") == op and run.get("layer_set") == layer_set
            and run["device"]["name"].strip() == device and (until is None or run["date"] <= until)
            for r in run["rows"] if r["layer"] == layer and r.get("precision", "fp32") == precision
            and r["stage"] not in skip]
    return min(rows, key=lambda r: r["median_ms"])


def untuned(run: dict) -> bool:
    """A run made with the tuned values left out (COURSE_TUNED=none): the registry's defaults."""
    return run.get("settings", {}).get("tuned_parameters", "").startswith("none")


def fresh(run: dict) -> bool:
    """A run made after a fresh `./course tune` (COURSE_TUNED=fresh: the device's recorded values
    left out, its own search's in their place)."""
    return run.get("settings", {}).get("tuned_parameters", "").startswith("COURSE_TUNED=fresh")


def tuning_effect(layer_set: str = "resnet50", device: str = "NVIDIA H200") -> list[dict]:
    """Stage auto on each layer, each beside cuDNN timed in its own run: with the registry's
    defaults (the untuned run), after a fresh ten-minute `./course tune`, and with the values
    recorded in results/tuned.json (the auto run). {'layer', 'untuned', 'fresh', 'recorded'}: each
    {'ms', 'x_vendor', 'ran'} or None where that run is missing."""
    runs = {"untuned": "untuned", "fresh": "fresh", "recorded": "auto"}
    rows: dict = {}
    for key, tag in runs.items():
        for run in find("conv_dgrad", layer_set, tag=tag):
            if run["device"]["name"].strip() != device:
                continue
            for r in run["rows"]:
                if r["stage"] == "auto":
                    rows.setdefault(r["layer"], {"layer": r["layer"], **dict.fromkeys(runs)})[key] = {
                        "ms": r["median_ms"], "x_vendor": r.get("x_vendor"), "ran": r.get("ran", "")}
    return list(rows.values())


def tune_record(device: str = names.RECORDED) -> dict:
    """The fresh `./course tune` kept for a device (results/tune/tune_fresh_<slug>.json): minutes
    searched over all its sittings, candidates tried, and per stage its values and time."""
    path = names.path(names.tune_fresh(device))
    data = json.loads(path.read_text())
    (name, dev), = data["devices"].items()
    stages = {f"{op} {key}": e for op, entries in dev.items() if op != "describe" for key, e in entries.items()}
    history = data["runs"][name]["history"]
    return {"device": name, "minutes": sum(h["spent_s"] for h in history) / 60, "sittings": len(history),
            "budget_minutes": history[0]["budget_s"] / 60, "candidates": sum(len(e.get("tried", {})) for e in stages.values()),
            "stages": stages}


def chooser_rows(layer_set: str = "resnet50", device: str = "NVIDIA H200") -> list[dict]:
    """Each recorded row of conv_dgrad's stage ``auto`` on the device, beside the fastest other
    fp32 stage recorded on that layer in any run up to and including auto's own (a stage changed
    later is not one the chooser could have picked): how close the chooser comes to the best
    single stage (its time over that stage's). Where the run also timed the stage auto picked,
    the fastest other stage of that run on the layer too (``run_best``, ``run_ratio``): the same
    comparison without the drift between runs. Runs with the tuned values left out (COURSE_TUNED=none,
    chapter 10) or searched afresh (COURSE_TUNED=fresh) are not the chooser's own comparison and
    are left out."""
    out = []
    for run in load():
        if (run.get("kind"), run.get("op"), run.get("layer_set")) != ("bench", "conv_dgrad", layer_set) \
                or run["device"]["name"].strip() != device or untuned(run) or fresh(run):
            continue
        for r in run["rows"]:
            if r["stage"] == "auto":
                best = best_row("conv_dgrad", layer_set, r["layer"], device, skip=("auto",), until=run["date"])
                same = [o for o in run["rows"] if o["layer"] == r["layer"] and o["stage"] != "auto"
                        and o.get("precision", "fp32") == "fp32"]
                picked = any(o["key"] == r.get("ran") for o in same)
                mine = min(same, key=lambda o: o["median_ms"]) if picked else None
                out.append({"layer": r["layer"], "file": run["file"], "ran": r.get("ran", ""), "ms": r["median_ms"],
                            "best": best["stage"], "best_ms": best["median_ms"], "best_file": best["file"],
                            "ratio": r["median_ms"] / best["median_ms"],
                            "run_best": mine["stage"] if mine else None,
                            "run_ratio": r["median_ms"] / mine["median_ms"] if mine else None})
    return out


def device_label(run: dict) -> str:
    d = run["device"]
    return f"{d['name']} ({d['platform']}, driver {d['driver']}, {run['date'][:10]})"


def _geo(rows, key):
    from .summary import geomean
    return geomean(r.get(key) for r in rows)


def _stage_rows(run, stage):
    return [r for r in run["rows"] if r["stage"] == stage]


def headline() -> str:
    """The README's table of what the recorded GPU runs show, computed from results/ (a test
    checks that README.md holds exactly this text, so the two cannot drift apart)."""
    lines = ["| operation, layers | device | result |", "| --- | --- | --- |"]
    for run in find("conv_dgrad", "resnet50"):
        naive = _stage_rows(run, "naive")
        direct = [s for s in dict.fromkeys(r["stage"] for r in run["rows"]) if 3 <= _stage_rows(run, s)[0]["number"] <= 8]
        best = max(direct, key=lambda s: _geo(_stage_rows(run, s), "x_first"), default=None)
        wino = _stage_rows(run, "winograd")
        text = f"naive {_geo(naive, 'gflops') / 1e3:.1f} TFLOP/s"
        if best:
            b = _stage_rows(run, best)
            text += f"; best direct stage ({b[0]['number']:02d}) ×{_geo(b, 'x_first'):.1f} the naive"
        if wino:
            text += f"; Winograd stage ×{_geo(wino, 'x_first'):.1f} the naive, ×{_geo(wino, 'x_vendor'):.2f} cuDNN fp32"
        lines.append(f"| input gradient, ResNet-50 3×3 layers (batch 64) | {run['device']['name']} | {text} |")
    for run in find("conv_dgrad", "vgg16"):
        wino = _stage_rows(run, "winograd")
        if wino:
            lines.append(f"| input gradient, VGG-16 (batch 32) | {run['device']['name']} | Winograd stage "
                         f"×{_geo(wino, 'x_first'):.1f} the naive, ×{_geo(wino, 'x_vendor'):.2f} cuDNN fp32 |")
    for run in find("conv_forward", "winograd6"):
        blocked, naive = _stage_rows(run, "wino_blocked"), _stage_rows(run, "wino_naive")
        if blocked and naive:
            lines.append(f"| forward, the Winograd article's six shapes | {run['device']['name']} | register-blocked "
                         f"Winograd ×{_geo(blocked, 'x_first'):.1f} the direct kernel, "
                         f"×{_geo(blocked, 'gflops') / _geo(naive, 'gflops'):.0f} the naive Winograd, "
                         f"×{_geo(blocked, 'x_vendor'):.2f} cuDNN fp32 |")
    for op, what in (("batchnorm_forward", "forward"), ("batchnorm_backward", "backward with ReLU")):
        for run in find(op, "bn"):
            if op == "batchnorm_backward" and run["settings"]["activation"] != "relu":
                continue
            first = run["rows"][0]["layer"]
            rows = [r for r in run["rows"] if r["layer"] == first]
            best = max(rows, key=lambda r: r["gbps"])
            lines.append(f"| batch norm {what}, {' '.join(best['problem'].split()[:3])} | {run['device']['name']} | "
                         f"stage {best['key']}: {best['pct_copy']:.0f} % of the measured copy bandwidth, "
                         f"×{best['x_vendor']:.2f} PyTorch |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(headline())


MEMORY_BOUND = ("batchnorm_forward", "batchnorm_backward")


def course_summary() -> list[dict]:
    """Every stage of every op on every recorded device, from results/: per recorded run (op, layer
    set, device), each stage's geometric means over the run's layers of GFLOP/s (GB/s for the
    memory-bound batch norm), % of the device's measured FMA peak (copy bandwidth for batch norm),
    x the run's first stage and x the vendor library where it was timed."""
    from .summary import geomean, summary, vendor_name
    rows = []
    for run in load():
        if run.get("kind") != "bench":        # accuracy, training, register and tuning files
            continue
        op, memory = run["op"], run["op"] in MEMORY_BOUND
        for key, s in summary(run).items():   # the bench's own geometric means per stage
            rs = [r for r in run["rows"] if r["key"] == key]
            act = run.get("settings", {}).get("activation", "none")
            label = run["layer_set"] + (f", {act}" if act != "none" else "") + (f" ({run['tag']})" if run.get("tag") else "")
            rows.append({"op": op, "layers": label,
                         "device": run["device"]["name"].strip(), "stage": key,
                         "rate": s["gbps" if memory else "gflops"], "unit": "GB/s" if memory else "GFLOP/s",
                         "pct_peak": geomean(r.get("pct_copy" if memory else "pct_fma_peak") for r in rs),
                         "peak": "copy" if memory else "FMA", "x_first": s["x_first"], "x_vendor": s["x_vendor"],
                         "vendor": vendor_name(run) if run.get("vendor") else None})
    return rows


def course_summary_text() -> str:
    """course_summary() as a fixed-width table, one block per recorded run."""
    def num(v, fmt):
        return "-" if v != v else format(v, fmt)      # NaN: not recorded
    lines, last = [], None
    for r in course_summary():
        head = (r["op"], r["layers"], r["device"])
        if head != last:
            lines += ["", f"{r['op']} over {r['layers']} on {r['device']}"
                      + (f" (vendor: {r['vendor']})" if r["vendor"] else ""),
                      f"  {'stage':<28}{r['unit']:>10}{'% ' + r['peak'] + ' peak':>15}{'x first':>9}{'x vendor':>10}"]
            last = head
        lines.append(f"  {r['stage']:<28}{num(r['rate'], ',.0f'):>10}{num(r['pct_peak'], '.1f'):>15}"
                     f"{num(r['x_first'], '.2f'):>9}{num(r['x_vendor'], '.2f'):>10}")
    return "\n".join(lines[1:])
