"""The benchmark command: chosen stages of an operation over a named layer set on one device.

    python -m helpers.bench --op conv_dgrad --layers resnet50 --device nvidia
    python -m helpers.bench --layers ci --stages naive --out -        # print only, write nothing
    python -m helpers.bench --layers resnet50 --tune                  # search JIT parameters first

For each (layer, stage): build, check against the reference, time (profiling events, warm-up,
repeats, median and spread), check again, and report median ms, GFLOP/s, speed-up over the
op's first stage, % of the measured FMA peak, and speed-up over cuDNN fp32 where PyTorch with
CUDA is present. Writes JSON (device, driver, date, package versions, every repetition) into
results/. From Python, ``run(...)`` returns the same dict (the notebooks' ladders use it).
"""
from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import platform
import re
import sys

import numpy as np

from .devices import device_info, get_context
from .layers import layer_set
from .ops import op_module
from .peak import roofline
from .results import RESULTS
from .runner import Plan, prepare
from .stages import get_stage, stage_names
from .timing import default_flush_bytes, time_plan
from .tuning import TUNED


def versions() -> dict:
    import pyopencl
    from .vendor import versions as vendor_versions
    return {"python": platform.python_version(), "numpy": np.__version__,
            "pyopencl": pyopencl.VERSION_TEXT, **vendor_versions()}


def _progress(total, enabled):
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    if tqdm is None or not enabled:
        class _Null:
            def update(self, n=1): pass
            def set_description(self, d): pass
            def close(self): pass
            def write(self, s): print(s, flush=True)
        return _Null()
    return tqdm(total=total, leave=False)


def geomean(values) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def run(op: str = "conv_dgrad", stages=None, layers="ci", ctx=None, *, activation: str = "none",
        warmup: int = 3, repeats: int = 20, vendor: bool = True, peak: bool = True, tune: bool = False,
        progress: bool = True, verbose: bool = False, record_tuned: bool = False) -> dict:
    """Benchmark ``stages`` (names/numbers, default all) of ``op`` over a layer set; returns a dict."""
    ctx = get_context(ctx)
    mod = op_module(op)
    stages = [get_stage(op, s) for s in (stages or stage_names(op))]
    lays = layer_set(layers) if isinstance(layers, str) else list(layers)
    info = device_info(ctx)
    flush = default_flush_bytes(ctx)
    out = {"schema": 1, "kind": "bench", "op": op, "layer_set": layers if isinstance(layers, str) else "custom",
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "device": info,
           "host": {"machine": platform.machine(), "system": platform.system()}, "versions": versions(),
           "settings": {"warmup": warmup, "repeats": repeats, "flush_bytes": flush, "activation": activation},
           "rows": [], "vendor": [], "tuned": {}}
    if peak:
        out["roofline"] = roofline(ctx)
    bar = _progress(len(lays) * len(stages), progress)
    if tune:
        out["tuned"] = {s.key: search(op, s, lays, ctx, activation, warmup, repeats, bar) for s in stages if s.tune}
        if record_tuned:
            save_tuned(out)           # kept even if the timing below is interrupted
    for lay in lays:
        args = mod.layer_args(lay, activation=activation)
        problem = prepare(op, **args)
        expected = None
        for s in stages:
            bar.set_description(f"{lay['name']} {s.key}")
            defines = out["tuned"].get(s.key, {}).get("defines")
            plan = Plan(op, s.name, problem, ctx, defines, guard=False)
            plan.enqueue()
            if expected is None:
                expected = mod.reference(problem)
            verdict = _check(plan, expected)                      # before timing ...
            timing = time_plan(plan, warmup=warmup, repeats=repeats, flush_bytes=flush)
            verdict_after = _check(plan, expected)                # ... and after
            sec = timing.median_ms * 1e-3
            row = {"layer": lay["name"], "shape": lay, "problem": problem.label, "stage": s.name,
                   "key": s.key, "number": s.number, "ran": plan.stage.key, "defines": plan.jit_defines,
                   **timing.summary(), "times_ms": timing.times_ms,
                   "gflops": problem.flops / sec / 1e9, "gbps": problem.min_bytes / sec / 1e9,
                   "flops": problem.flops, "min_bytes": problem.min_bytes,
                   "verified": verdict and verdict_after}
            if peak:
                row["pct_fma_peak"] = 100 * row["gflops"] / out["roofline"]["fma_gflops"]
                row["pct_copy"] = 100 * row["gbps"] / out["roofline"]["copy_gbps"]
            out["rows"].append(row)
            bar.update()
            if verbose:
                bar.write(_line(row, out))
        if vendor and hasattr(mod, "vendor_time"):
            v = mod.vendor_time(problem, warmup=max(warmup, 5), repeats=repeats, flush_bytes=flush)
            if v is not None:
                v.update(layer=lay["name"], gflops=problem.flops / (v["median_ms"] * 1e-3) / 1e9,
                         gbps=problem.min_bytes / (v["median_ms"] * 1e-3) / 1e9)
                out["vendor"].append(v)
    bar.close()
    out["formulas"] = {"gflops": problem.flops_formula, "gbps": problem.bytes_formula,
                       "speedup": "median time of the op's first stage / median time of this stage"}
    _relative(out)
    return out


def _check(plan, expected) -> bool:
    from .check import check_close
    got = plan.outputs()
    mod = op_module(plan.op)
    exp, mag = expected
    for name in plan.problem.outputs:
        check_close(got[name], exp[name], magnitude=mag[name], rtol=mod.rtol(plan.problem), name=name)
    return True


def _relative(out: dict) -> None:
    """Speed-ups over the first stage of the op (same layer) and over the vendor library."""
    base = {}
    first = stage_names(out["op"])[0]
    for r in out["rows"]:
        if r["stage"] == first:
            base[r["layer"]] = r["median_ms"]
    vend = {v["layer"]: v["median_ms"] for v in out["vendor"]}
    for r in out["rows"]:
        if r["layer"] in base:
            r["x_first"] = base[r["layer"]] / r["median_ms"]
        if r["layer"] in vend:
            r["x_vendor"] = vend[r["layer"]] / r["median_ms"]


def summary(out: dict) -> dict:
    """Per stage: geometric means over the layers of GFLOP/s and of the speed-ups."""
    res = {}
    for key in dict.fromkeys(r["key"] for r in out["rows"]):
        rows = [r for r in out["rows"] if r["key"] == key]
        res[key] = {"gflops": geomean(r["gflops"] for r in rows), "gbps": geomean(r["gbps"] for r in rows),
                    "x_first": geomean(r.get("x_first") for r in rows),
                    "x_vendor": geomean(r.get("x_vendor") for r in rows)}
    return res


def search(op, stage, lays, ctx, activation, warmup, repeats, bar=None) -> dict:
    """Try every combination of the stage's tune candidates; keep the best geometric-mean time."""
    mod = op_module(op)
    names = sorted(stage.tune)
    tried = []
    for values in itertools.product(*(stage.tune[n] for n in names)):
        defines = dict(zip(names, values))
        times = []
        try:
            for lay in lays:
                plan = Plan(op, stage.name, prepare(op, **mod.layer_args(lay, activation=activation)),
                            ctx, defines, guard=False)
                times.append(time_plan(plan, warmup=warmup, repeats=max(5, repeats // 4)).median_ms)
        except Exception as err:  # a combination the device cannot run (too many registers, ...)
            tried.append({"defines": defines, "error": str(err).splitlines()[0]})
            continue
        tried.append({"defines": defines, "geomean_ms": geomean(times)})
        if bar is not None:
            bar.set_description(f"tuning {stage.key} {defines}")
    ok = [t for t in tried if "geomean_ms" in t]
    if not ok:
        raise RuntimeError(f"no tuning candidate of {stage.key} ran: {tried}")
    best = min(ok, key=lambda t: t["geomean_ms"])
    return {"defines": best["defines"], "geomean_ms": best["geomean_ms"], "tried": tried}


def vendor_name(out: dict) -> str:
    """The vendor library a run compared with (its ``name``; cuDNN where none is given)."""
    return out["vendor"][0].get("name", "cuDNN") if out.get("vendor") else "cuDNN"


def _line(row: dict, out: dict) -> str:
    parts = [f"{row['layer']:>16} {row['key']:<22} {row['median_ms']:10.4f} ms  "
             f"(IQR {row['q1_ms']:.4f}-{row['q3_ms']:.4f})  {row['gflops']:9.1f} GFLOP/s  {row['gbps']:8.1f} GB/s"]
    if "x_first" in row:
        parts.append(f"x{row['x_first']:.2f} first")
    if "pct_fma_peak" in row:
        parts.append(f"{row['pct_fma_peak']:.1f}% FMA peak")
    if "pct_copy" in row:
        parts.append(f"{row['pct_copy']:.1f}% copy")
    if "x_vendor" in row:
        parts.append(f"x{row['x_vendor']:.2f} {vendor_name(out)}")
    return "  ".join(parts)


def report(out: dict) -> str:
    lines = [f"{out['op']} over '{out['layer_set']}' on {out['device']['name']} ({out['device']['platform']}, "
             f"driver {out['device']['driver']})"]
    if "roofline" in out:
        r = out["roofline"]
        lines.append(f"measured copy {r['copy_gbps']:.1f} GB/s, FMA {r['fma_gflops']:.1f} GFLOP/s")
        if "CPU" in str(out["device"].get("type", "")) or "pthread" in out["device"]["name"]:
            lines.append("(a CPU: its measured peak varies between runs, so '% FMA peak' and '% copy' below "
                         "are relative to this run's one measurement; chapter 00 shows the spread)")
    lines += [_line(r, out) for r in out["rows"]]
    for v in out["vendor"]:
        lines.append(f"{v['layer']:>16} {vendor_name(out):<22} {v['median_ms']:10.4f} ms  {v['gflops']:9.1f} "
                     f"GFLOP/s  {v['gbps']:8.1f} GB/s")
    lines.append("geometric means per stage:")
    for key, s in summary(out).items():
        extra = f"  x{s['x_vendor']:.2f} {vendor_name(out)}" if not math.isnan(s["x_vendor"]) else ""
        copy = f"  {100 * s['gbps'] / out['roofline']['copy_gbps']:.1f}% copy" if "roofline" in out else ""
        lines.append(f"  {key:<22} {s['gflops']:9.1f} GFLOP/s  {s['gbps']:8.1f} GB/s{copy}  "
                     f"x{s['x_first']:.2f} first{extra}")
    lines.append(f"({out['formulas']['gflops']}; {out['formulas']['gbps']}; {out['formulas']['speedup']})")
    return "\n".join(lines)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def save_tuned(out: dict) -> None:
    TUNED.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(TUNED.read_text()) if TUNED.is_file() else {"devices": {}}
    dev = data["devices"].setdefault(out["device"]["name"], {})
    for key, t in out["tuned"].items():
        dev.setdefault(out["op"], {})[key] = {"defines": t["defines"], "layer_set": out["layer_set"],
                                              "date": out["date"]}
    TUNED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--op", default="conv_dgrad")
    ap.add_argument("--stages", default=None, help="comma-separated names or numbers (default: all)")
    ap.add_argument("--layers", default="ci", help="layer set (helpers/layers.py)")
    ap.add_argument("--device", default=None, help="'P:D' or part of a name (default: COURSE_DEVICE, else a GPU)")
    ap.add_argument("--activation", default="none")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--tune", action="store_true", help="search the stages' JIT parameters first; record them")
    ap.add_argument("--no-vendor", action="store_true", help="skip the cuDNN reference timing")
    ap.add_argument("--out", default=None, help="JSON path (default results/<op>_<layers>[_<activation>]_<device>.json); "
                                               "'-': none")
    a = ap.parse_args(argv)
    stages = [int(s) if s.isdigit() else s for s in a.stages.split(",")] if a.stages else None
    out = run(a.op, stages, a.layers, a.device, activation=a.activation, warmup=a.warmup,
              repeats=a.repeats, vendor=not a.no_vendor, tune=a.tune, progress=sys.stderr.isatty(),
              verbose=not sys.stderr.isatty(), record_tuned=a.tune and a.out != "-")
    print(report(out))
    if a.out != "-":
        act = f"_{a.activation}" if a.activation != "none" else ""
        path = a.out or str(RESULTS / f"{a.op}_{a.layers}{act}_{slug(out['device']['name'])}.json")
        RESULTS.mkdir(exist_ok=True)
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        print(f"wrote {path}")
        if a.tune:
            print(f"recorded the tuned parameters in {TUNED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
