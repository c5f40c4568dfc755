"""The benchmark command: chosen stages of an operation over a named layer set on one device.

    python -m helpers.bench --op conv_dgrad --layers resnet50 --device nvidia
    python -m helpers.bench --layers ci --stages naive --out -        # print only, write nothing
    python -m helpers.bench --layers resnet50 --tune                  # search JIT parameters first

For each (layer, stage): build, check against the reference, time (profiling events, warm-up,
repeats, median and spread), check again, and report median ms, GFLOP/s, speed-up over the
op's first stage, % of the measured FMA peak, and speed-up over the vendor library in fp32 (cuDNN;
cuBLAS for the GEMM, PyTorch for batch norm) where PyTorch with CUDA is present. ``--tune`` keeps
what it finds in your own cache, as ``./course tune`` does; ``--tune --commit`` writes it into
results/tuned.json (recording a GPU for the course). Writes JSON (device, driver, date, package
versions, every repetition) into results/. From Python, ``run(...)`` returns the same dict (the notebooks' ladders use it).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from . import chooser
from .analysis import names
from .analysis.names import RESULTS, slug
from .analysis.summary import geomean, summary, vendor_name
from .engine.backends import require
from .engine.devices import device_info, get_context, vendor_of
from .engine.progress import progress as progress_bar
from .engine.tensor import STORAGE
from .engine.timing import default_flush_bytes, time_plan, time_steps
from .ops import op_module
from .ops.layers import layer_set, op_layers
from .ops.user_layers import user_layers
from .peak import roofline
from .engine.plan import DeviceLimitError
from .runner import CannotRun, check_plan, plan_problem, prepare, reference_for
from .stages import get_stage, stage_names
from .tuning_trials import search
from .tuned_values import TUNED, ignored as tuned_ignored, mode as tuning_mode, record as write_tuned, user_cache
from .tuned_values import summary as tuning_summary


def versions() -> dict:
    import pyopencl
    from .ops.vendor import versions as vendor_versions
    return {"python": platform.python_version(), "numpy": np.__version__,
            "pyopencl": pyopencl.VERSION_TEXT, **vendor_versions()}


def run(op: str = "conv_dgrad", stages=None, layers=None, ctx=None, *, activation: str = "none",
        warmup: int = 3, repeats: int = 20, vendor: bool = True, peak: bool = True, tune: bool = False,
        progress: bool = True, verbose: bool = False, record_tuned: Path | None = None, tag: str | None = None,
        defines: dict | None = None, tune_only: list | None = None, on_row=None, on_layer=None) -> dict:
    """Benchmark ``stages`` (names/numbers, default all OpenCL stages) of ``op`` over a layer set
    (a name, default the op's small set, or a list of layers); returns a dict. ``tune_only``:
    parameter names; the search covers only those (implies ``tune``). ``record_tuned``: the
    tuned-values file the search writes (tuned_values.user_cache(), or results/tuned.json), None: none.

    A stage that cannot run a layer (its requirement unmet, the device's limits) gives a refused
    entry (``out["refused"]``: layer, stage, reason) and the run goes on. ``on_row(row, out)`` is
    called as each row (or refusal: a dict with ``refused``) is finished, ``on_layer(done, total,
    seconds)`` after each layer. Ctrl-C (KeyboardInterrupt) ends the run early: the finished rows
    are kept and ``out["partial"]`` says how far it got."""
    mod = op_module(op)
    layers = layers or op_layers(mod)[1]
    lays = layer_set(layers, op) if isinstance(layers, str) else list(layers)
    if warmup < 0 or repeats < 1:
        raise ValueError(f"warmup {warmup} and repeats {repeats}: warm-up launches are 0 or more, repeats 1 or more")
    ctx = get_context(ctx)
    stages = list({st.key: st for st in (get_stage(op, s) for s in (stages or stage_names(op)))}.values())
    for s in stages:
        require(s.backend, f"stage {s.name} of {op}")
    for s in stages:                  # wrong JIT parameters: refused before any launch
        from .runner import check_define_values
        check_define_values(s, defines or {})
    unknown = sorted(set(defines or {}) - {k for s in stages for k in s.defines})
    if unknown:                       # a run tagged for a switch that no stage builds with
        raise ValueError(f"--defines {', '.join(unknown)}: no selected stage of {op} declares "
                         f"{'it' if len(unknown) == 1 else 'them'} (stages: {', '.join(s.name for s in stages)})")
    if tune_only:
        unknown = sorted(set(tune_only) - {n for s in stages for n in s.tune})
        if unknown:
            raise ValueError(f"--tune-only {', '.join(unknown)}: no selected stage of {op} tunes "
                             f"{'it' if len(unknown) == 1 else 'them'} (stages: {', '.join(s.name for s in stages)})")
        missing = [s.name for s in stages if s.tune and not set(tune_only) & set(s.tune)]
        if missing:
            raise ValueError(f"--tune-only {','.join(tune_only)}: stage(s) {', '.join(missing)} tune none of them")
        tune = True
    info = device_info(ctx)
    flush = default_flush_bytes(ctx)
    out = {"schema": 1, "kind": "bench", "op": op, "layer_set": layers if isinstance(layers, str) else "custom",
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "device": info,
           "host": {"machine": platform.machine(), "system": platform.system()}, "versions": versions(),
           "settings": {"warmup": warmup, "repeats": repeats, "flush_bytes": flush, "activation": activation,
                        "tuned_parameters": ("none: the registry's defaults (COURSE_TUNED=none)" if tuned_ignored()
                                             else "")},
           "rows": [], "refused": [], "vendor": [], "tuned": {}}
    if tag:
        out["tag"] = tag          # a run for one comparison (e.g. cuda_twins), apart from the ladders
    if vendor and hasattr(mod, "vendor_time") and vendor_of(ctx.devices[0]) != "nvidia":
        # cuDNN and cuBLAS run on an NVIDIA GPU through CUDA: timed beside another device's rows, they
        # would compare two machines (a CPU run on a machine that also has an NVIDIA GPU)
        vendor = False
        out["vendor_skipped"] = (f"the vendor library runs on an NVIDIA GPU through CUDA, and this run's "
                                 f"device ({info['name']}) is not one")
    if peak:
        out["roofline"] = roofline(ctx)
    bar = progress_bar(len(lays) * len(stages), progress)
    if tune:
        out["tuned"] = {s.key: search(op, s, lays, ctx, activation, warmup, repeats, bar, tune_only)
                        for s in stages if s.tune}
        if record_tuned is not None:
            save_tuned(out, record_tuned)           # kept even if the timing below is interrupted
    problem, started = None, time.perf_counter()
    if on_layer:
        on_layer(0, len(lays), 0.0)           # checked, about to build the first kernels
    try:
        for done, lay in enumerate(lays, 1):
            problem = _bench_layer(out, mod, op, lay, stages, ctx, activation, warmup, repeats, flush, vendor, peak,
                                   defines, bar, verbose, on_row) or problem
            if on_layer:
                on_layer(done, len(lays), time.perf_counter() - started)
    except KeyboardInterrupt:
        out["partial"] = (f"interrupted (Ctrl-C) after {len({r['layer'] for r in out['rows']})} of {len(lays)} "
                          f"layers: the rows here are those that finished")
    bar.close()
    if not tuned_ignored():             # where each row's parameters came from (helpers/tuned_values.py)
        out["settings"]["tuned_parameters"] = ("COURSE_TUNED=fresh: this device's recorded values left out; "
                                               if tuning_mode() == "fresh" else "") + \
            tuning_summary({r["key"]: r["tuned_from"] for r in out["rows"]}.values())
    half = any(STORAGE[s.precision] != "float32" for s in stages)
    problem = problem or prepare(op, **mod.layer_args(lays[0], activation=activation))
    out["formulas"] = {"gflops": problem.flops_formula,
                       "gbps": problem.bytes_formula + ("; 2 bytes per value for the fp16 and bf16 rows" if half else ""),
                       "speedup": "median time of the op's first stage / median time of this stage"}
    _relative(out)
    return out


def _choice(ctx, problem) -> dict:
    """Where auto's first call on this layer spent its time (the chooser's cached record): the
    reference and the candidates' builds side by side, then each candidate checked and timed."""
    record = chooser.cached(ctx.devices[0].name).get(chooser.shape_key(problem, None), {})
    keep = ("stage", "mode", "times_ms", "failed", "seconds", "warm_seconds", "warm_sides", "candidate_seconds")
    return {k: record[k] for k in keep if k in record}


def _bench_layer(out, mod, op, lay, stages, ctx, activation, warmup, repeats, flush, vendor, peak, defines, bar,
                 verbose, on_row):
    """One layer of ``run``: every stage built, checked, timed and checked again; then the vendor.
    Returns the layer's problem (None where no stage could take it)."""
    args = mod.layer_args(lay, activation=activation)
    problem = prepare(op, **args)
    expected = {}                  # per precision: the reference of what the stage reads
    for s in stages:
        bar.set_description(f"{lay['name']} {s.key}")
        given = {k: v for k, v in (defines or {}).items() if k in s.defines}
        chosen = {**(out["tuned"].get(s.key, {}).get("defines") or {}), **given} or None
        started = time.perf_counter()
        try:
            plan = plan_problem(op, s.name, problem, ctx, chosen, guard=False)
        except (CannotRun, DeviceLimitError) as err:   # this layer only: the run goes on
            refused = {"layer": lay["name"], "problem": problem.label, "stage": s.name, "key": s.key,
                       "refused": str(err)}
            out["refused"].append(refused)
            bar.update()
            if on_row:
                on_row(refused, out)
            continue
        plan.enqueue()
        if s.choose:                  # auto's first call: its choice (builds and timings), then one run
            plan.queue.finish()
            first_call = time.perf_counter() - started
        if plan.stage.precision not in expected:
            expected[plan.stage.precision] = reference_for(plan)
        verdict = _check(plan, expected[plan.stage.precision])            # before timing ...
        timing = time_plan(plan, warmup=warmup, repeats=repeats, flush_bytes=flush)
        verdict_after = _check(plan, expected[plan.stage.precision])      # ... and after
        sec = timing.median_ms * 1e-3
        row = {"layer": lay["name"], "shape": lay, "problem": problem.label, "stage": s.name,
               "key": s.key, "number": s.number, "ran": plan.stage.key,
               "backend": plan.stage.backend, "precision": plan.stage.precision, "path": plan.path, "defines": plan.jit_defines,
               **timing.summary(), "times_ms": timing.times_ms,
               "gflops": problem.flops / sec / 1e9, "gbps": problem.bytes_moved(plan.stage.precision) / sec / 1e9,
               "flops": problem.flops, "min_bytes": problem.bytes_moved(plan.stage.precision),
               "verified": verdict and verdict_after, "tuned_from": plan.tuned_source}
        if s.choose:
            row["first_call_s"] = first_call
            row["choice"] = _choice(ctx, problem)
        if len(plan.steps) > 1:          # which kernel of the stage takes the time
            row["steps_ms"] = [[name, t.median_ms] for name, t in
                               time_steps(plan, warmup=1, repeats=max(3, repeats // 2), flush_bytes=flush)]
        if peak:
            row["pct_fma_peak"] = 100 * row["gflops"] / out["roofline"]["fma_gflops"]
            row["pct_copy"] = 100 * row["gbps"] / out["roofline"]["copy_gbps"]
        out["rows"].append(row)
        bar.update()
        if verbose:
            bar.write(_line(row, out))
        if on_row:
            on_row(row, out)
    if not vendor:
        out.setdefault("vendor_skipped", "--no-vendor was given")
    elif not hasattr(mod, "vendor_time"):
        out["vendor_skipped"] = f"{op} has no vendor reference"
    if vendor and hasattr(mod, "vendor_time"):
        for precision in dict.fromkeys(s.precision for s in stages):   # each stage's, in order
            given = {} if precision == "fp32" else {"precision": precision}
            v = mod.vendor_time(problem, warmup=max(warmup, 5), repeats=repeats, flush_bytes=flush, **given)
            if v is not None:
                v.setdefault("precision", "fp32")
                v.update(layer=lay["name"], gflops=problem.flops / (v["median_ms"] * 1e-3) / 1e9,
                         gbps=problem.bytes_moved(v["precision"]) / (v["median_ms"] * 1e-3) / 1e9)
                out["vendor"].append(v)
    if hasattr(mod, "library_times"):          # other libraries on the same OpenCL device (CLBlast)
        for v in mod.library_times(problem, ctx, warmup=warmup, repeats=repeats, flush_bytes=flush):
            v.update(layer=lay["name"], gflops=problem.flops / (v["median_ms"] * 1e-3) / 1e9,
                     gbps=problem.min_bytes / (v["median_ms"] * 1e-3) / 1e9)
            out.setdefault("libraries", []).append(v)
    return problem


def _check(plan, expected) -> bool:
    """The one check (runner.check_plan) against a reference computed once per layer."""
    check_plan(plan, expected)
    return True


def _relative(out: dict) -> None:
    """Speed-ups over the first stage of the op (same layer) and over the vendor library."""
    base = {}
    first = stage_names(out["op"])[0]
    for r in out["rows"]:
        if r["stage"] == first:
            base[r["layer"]] = r["median_ms"]
    # each row against the vendor in its own precision (runs before chapter 13: fp32 only)
    vend = {(v["layer"], v.get("precision", "fp32")): v["median_ms"] for v in out["vendor"]}
    libs = {(v["name"], v["layer"]): v["median_ms"] for v in out.get("libraries", [])}
    for r in out["rows"]:
        for (name, layer), ms in libs.items():
            if layer == r["layer"]:
                r[f"x_{slug(name)}"] = ms / r["median_ms"]
        if r["layer"] in base:
            r["x_first"] = base[r["layer"]] / r["median_ms"]
        key = (r["layer"], r.get("precision", "fp32"))
        if key in vend:
            r["x_vendor"] = vend[key] / r["median_ms"]




def _line(row: dict, out: dict) -> str:
    """One printed row: a timed stage (with the stage that ran, where a fallback ran it), or a refusal."""
    if "refused" in row:
        return f"{row['layer']:>16} {row['key']:<22} refused: {row['refused']}"
    ran = row.get("ran", row["key"])
    how = "chosen" if "first_call_s" in row or get_stage(out["op"], row["stage"]).choose else "fallback"
    label = row["key"] if ran == row["key"] else f"{row['key']} -> {ran} ({how})"
    parts = [f"{row['layer']:>16} {label:<22} {row['median_ms']:10.4f} ms  "
             f"(IQR {row['q1_ms']:.4f}-{row['q3_ms']:.4f})  {row['gflops']:9.1f} GFLOP/s  {row['gbps']:8.1f} GB/s"]
    if "x_first" in row:
        parts.append(f"x{row['x_first']:.2f} first")
    if "pct_fma_peak" in row:
        parts.append(f"{row['pct_fma_peak']:.1f}% FMA peak")
    if "pct_copy" in row:
        parts.append(f"{row['pct_copy']:.1f}% copy")
    if "x_vendor" in row:
        parts.append(f"x{row['x_vendor']:.2f} {vendor_name(out)}")
    if "first_call_s" in row:
        parts.append(f"first call {row['first_call_s']:.2f} s")
    return "  ".join(parts)


def report(out: dict, rows: bool = True) -> str:
    """The run as text: header, roofline, the rows (unless ``rows`` is False: the command line
    printed each as it finished), refusals, the vendor's times and the geometric means."""
    lines = [f"{out['op']} over '{out['layer_set']}' on {out['device']['name']} ({out['device']['platform']}, "
             f"driver {out['device']['driver']})",
             f"tuned parameters: {out['settings']['tuned_parameters'] or 'none of the stages has any'}"]
    if out.get("partial"):
        lines.append(f"PARTIAL RUN: {out['partial']}")
    if "roofline" in out:
        r = out["roofline"]
        lines.append(f"measured copy {r['copy_gbps']:.1f} GB/s, FMA {r['fma_gflops']:.1f} GFLOP/s")
        if out["device"].get("type") == "CPU":
            lines.append("(a CPU: its measured peak varies between runs, so '% FMA peak' and '% copy' below "
                         "are relative to this run's one measurement; chapter 00 shows the spread)")
    if rows:
        lines += [_line(r, out) for r in out["rows"]]
    lines += [_line(r, out) for r in out.get("refused", [])]
    for v in out["vendor"]:
        lines.append(f"{v['layer']:>16} {vendor_name(out):<22} {v['median_ms']:10.4f} ms  {v['gflops']:9.1f} "
                     f"GFLOP/s  {v['gbps']:8.1f} GB/s")
    if not out["vendor"]:
        why = out.get("vendor_skipped") or "needs PyTorch with CUDA on an NVIDIA GPU, not found here"
        lines.append(f"vendor column ({vendor_name(out)}) skipped: {why}")
    for v in out.get("libraries", []):
        lines.append(f"{v['layer']:>16} {v['name']:<22} {v['median_ms']:10.4f} ms  {v['gflops']:9.1f} "
                     f"GFLOP/s  {v['gbps']:8.1f} GB/s")
    lines.append("geometric means per stage:")
    for key, s in summary(out).items():
        extra = f"  x{s['x_vendor']:.2f} {vendor_name(out)}" if not math.isnan(s["x_vendor"]) else ""
        copy = f"  {100 * s['gbps'] / out['roofline']['copy_gbps']:.1f}% copy" if "roofline" in out else ""
        for name in dict.fromkeys(v["name"] for v in out.get("libraries", [])):
            x = geomean(r.get(f"x_{slug(name)}") for r in out["rows"] if r["key"] == key)
            extra += f"  x{x:.2f} {name}" if not math.isnan(x) else ""
        first = f"  x{s['x_first']:.2f} first" if not math.isnan(s["x_first"]) else ""   # not in the run
        lines.append(f"  {key:<22} {s['gflops']:9.1f} GFLOP/s  {s['gbps']:8.1f} GB/s{copy}{first}{extra}")
    lines.append(f"({out['formulas']['gflops']}; {out['formulas']['gbps']}; {out['formulas']['speedup']})")
    return "\n".join(lines)


def refuse_overwrite(path, stages: list, op: str | None = None, layer_set: str | None = None) -> None:
    """Before any work: the file at ``path`` may be replaced only by a run of the same kind, a
    benchmark file of the same op, layer set and stages (the same run recorded again). Anything
    else there, a learner's own file, another op's or set's run, or a recording of other stages
    (a tag used twice), is refused with one line that says what the file holds."""
    path = Path(path)
    if not path.is_file():
        return
    try:
        held = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"{path} exists and is not a benchmark file (not JSON); the benchmark never overwrites "
                         f"it: choose another --out") from None
    if not isinstance(held, dict) or held.get("kind") != "bench":
        raise ValueError(f"{path} exists and holds other data, not a benchmark file; the benchmark never "
                         f"overwrites it: choose another --out")
    for what, mine in (("op", op), ("layer_set", layer_set)):
        if mine is not None and held.get(what) != mine:
            raise ValueError(f"{path} holds a benchmark of {held.get('op')} over '{held.get('layer_set')}', not of "
                             f"{op} over '{layer_set}'; choose another --out")
    recorded = list(dict.fromkeys(r["stage"] for r in held.get("rows", [])))
    if recorded and set(recorded) != set(stages):
        raise ValueError(f"{path} holds a recorded run of {', '.join(recorded)}; this run would replace it with "
                         f"{', '.join(stages)}. Choose another --tag (or --out), or delete the file to record it anew.")


def save_tuned(out: dict, path: Path) -> None:
    """The searched values into a tuned-values file (the learner's cache, or results/tuned.json
    with --commit), under the device's name and description."""
    entries = {}
    for key, found in out["tuned"].items():
        entry = {"defines": found["defines"], "layer_set": out["layer_set"], "date": out["date"]}
        if "searched" in found:  # --tune-only: these were searched here, the others kept as recorded
            entry["searched"] = found["searched"]
        entries.setdefault(out["op"], {})[key] = entry
    write_tuned(path, out["device"]["describe"], entries)  # stage auto, later in the run, builds with them


def parse_defines(text: str | None) -> dict | None:
    """'WG=128,CPW=8' -> {'WG': 128, 'CPW': 8}; a value that is not an integer is refused."""
    if not text:
        return None
    out = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        if not eq or not name.strip():
            raise ValueError(f"--defines takes NAME=INTEGER pairs separated by commas (e.g. WG=128,CPW=8); got {part!r}")
        try:
            out[name.strip()] = int(value)
        except ValueError:
            raise ValueError(f"--defines {name.strip()}={value!r}: JIT parameters are integers (e.g. WG=128)") from None
    return out


def _epilog() -> str:
    from .ops.layers import LAYER_SETS
    from .stages import REGISTRY
    lines = ["operations and their stages (number name [backend]):"]
    for op, stages in REGISTRY.items():
        lines.append(f"  {op}: " + ", ".join(f"{s.number} {s.name}" + (f" [{s.backend}]" if s.backend != "opencl" else "")
                                           for s in stages))
    lines.append("layer sets: " + ", ".join(LAYER_SETS))
    lines.append("devices: python -m helpers lists them ('P:D' or part of a name)")
    return "\n".join(lines)


def main(argv=None) -> int:
    """The command line: one line on stderr for a mistake (exit status 2), never a traceback."""
    from .engine.backends import BackendUnavailable
    from .engine.devices import NoDeviceError
    try:
        return _main(argv)
    except (ValueError, TypeError, NoDeviceError, BackendUnavailable) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C) before any layer finished: nothing written", file=sys.stderr)
        return 130


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m helpers.bench", description=__doc__.split("\n")[0],
                                 epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--op", default="conv_dgrad")
    ap.add_argument("--stages", default=None, help="comma-separated names or numbers (default: all)")
    ap.add_argument("--layers", default=None, help="layer set (helpers/ops/layers.py; default: the op's small set, "
                                                  "ci for the convolutions), or FILE.json: a list of your own layers "
                                                  "(helpers/ops/user_layers.py)")
    ap.add_argument("--layer", default=None, help="one layer of your own, e.g. "
                                                 "\"n=32,c=96,h=35,w=35,k=96,kernel=3,stride=1,padding=1\"")
    ap.add_argument("--device", default=None, help="'P:D' or part of a name (default: COURSE_DEVICE, else a GPU)")
    ap.add_argument("--activation", default="none")
    ap.add_argument("--defines", default=None, help="JIT parameters for every stage that has them, e.g. WG=128,CPW=8")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--tune", action="store_true", help="search the stages' JIT parameters first; keep them in your "
                                                        "own cache, as ./course tune does")
    ap.add_argument("--commit", action="store_true", help="with --tune: write the values into results/tuned.json "
                                                          "instead (recording a GPU for the course)")
    ap.add_argument("--tune-only", default=None, help="comma-separated parameter names: --tune over just these, "
                                                      "the others as recorded for the device")
    ap.add_argument("--no-vendor", action="store_true", help="skip the vendor library's reference timing (cuDNN; cuBLAS for gemm, PyTorch for batch norm)")
    ap.add_argument("--tag", default=None, help="name a run made for one comparison (e.g. cuda_twins); "
                                               "chapters read tagged runs only where they ask for the tag")
    ap.add_argument("--out", default=None, help="JSON path (default results/<op>_<layers>[_<activation>]_<device>.json); "
                                               "'-': none")
    return ap


def checked_args(argv=None) -> tuple:
    """The command line parsed and checked before any device is opened: (arguments, stages, defines).
    A wrong op, stage, layer set or define is refused here (helpers/record.py checks its plan so)."""
    a = parser().parse_args(argv)
    stages = [int(s) if s.isdigit() else s for s in a.stages.split(",")] if a.stages else None
    if stages:
        keys = [get_stage(a.op, s).key for s in stages]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            print(f"note: --stages names {', '.join(twice)} more than once; each stage runs once", file=sys.stderr)
            stages = [s for i, s in enumerate(stages) if keys.index(keys[i]) == i]
    defines = parse_defines(a.defines)
    kind, default = op_layers(op_module(a.op))
    if (a.layer is not None or (a.layers or "").endswith(".json")) and kind not in ("conv", "batchnorm"):
        raise ValueError(f"--layer/--layers FILE.json take convolution and batch-norm layers; {a.op} takes {kind} "
                         f"layers: choose a named set")
    own = user_layers(a.layers, a.layer, "bn" if kind == "batchnorm" else "conv")
    a.own = own[1] if own else None
    a.layers = own[0] if own else (a.layers or default)
    if own is None:
        layer_set(a.layers, a.op)                         # a wrong name or kind: refused before any work
    for s in stages or stage_names(a.op):
        get_stage(a.op, s)
    if a.warmup < 0:
        raise ValueError(f"--warmup {a.warmup}: the warm-up launches are 0 or more (default 3)")
    if a.repeats < 3:
        raise ValueError(f"--repeats {a.repeats}: the timed repetitions are 3 or more, for a median and a spread "
                         f"(default 20)")
    if a.out is not None and a.out != "-":
        out_path(a.out)
    return a, stages, defines


def out_path(text: str) -> Path:
    """--out checked before any work: a file in a folder that exists, that this process can
    really write ('-': write nothing). An existing file is opened for appending (nothing is
    written to it); a new one is created and removed again."""
    if not text.strip():
        raise ValueError("--out names no file: give a path for the JSON, or '-' to print only")
    path = Path(text)
    if path.is_dir():
        raise ValueError(f"--out {text}: that is a folder; name the JSON file to write (e.g. {path / 'run.json'})")
    if not path.parent.is_dir():
        raise ValueError(f"--out {text}: the folder {path.parent} does not exist; create it or choose another path")
    try:
        if path.exists():
            open(path, "a").close()
        else:
            open(path, "x").close()
            path.unlink()
    except OSError as err:
        raise ValueError(f"--out {text}: cannot write there ({err.strerror or err}); choose another path") from None
    return path


def write_json(out: dict, path) -> Path:
    """The run into ``path`` (a partial run beside it, as NAME.partial.json, so an interrupted
    run never replaces a whole recording); written to a temporary file first, then renamed."""
    path = Path(path)
    if out.get("partial"):
        path = path.with_name(path.name.removesuffix(".json") + ".partial.json")
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    tmp.replace(path)
    return path


def _main(argv=None) -> int:
    a, stages, defines = checked_args(argv)
    if tuned_ignored() and (a.tune or a.tune_only):
        raise ValueError("COURSE_TUNED=none runs the registry's defaults; a search (--tune) would record "
                         "tuned values: unset COURSE_TUNED to tune")
    tune_only = a.tune_only.split(",") if a.tune_only else None
    tune = a.tune or bool(tune_only)
    chosen = [get_stage(a.op, s).name for s in stages or stage_names(a.op)]
    if a.commit and not tune:
        raise ValueError("--commit writes what --tune finds into results/tuned.json: give --tune (or --tune-only) too")
    tuned_file = (TUNED if a.commit else user_cache()) if tune and a.out != "-" else None
    path = None
    ctx = get_context(a.device)
    if a.out != "-":
        name = device_info(ctx)["name"]
        own_file = names.bench(a.op, a.layers, name, a.activation, a.tag)      # a learner's layers: here, not results/
        path = a.out or (own_file if a.own else str(names.path(own_file)))
        refuse_overwrite(path, chosen, a.op, a.layers)
        out_path(path)
    lays = a.own or layer_set(a.layers, a.op)
    first = (f"{a.op} over '{a.layers}' ({len(lays)} layers) on {device_info(ctx)['name']}: "
             f"building and checking the kernels of {len(chosen)} stage{'s' if len(chosen) != 1 else ''} (each is "
             f"compiled on its first layer, so the first layer takes longest) ...")
    out = run(a.op, stages, a.own or a.layers, ctx, activation=a.activation, warmup=a.warmup,
              repeats=a.repeats, vendor=not a.no_vendor, tune=tune, defines=defines, progress=False,
              verbose=False, record_tuned=tuned_file, tag=a.tag, tune_only=tune_only,
              on_row=lambda row, o: print(_line(row, o), flush=True), on_layer=lambda done, total, seconds: _layer_done(done, total, seconds, first))
    out["layer_set"] = a.layers
    # the command that wrote the file: results/ is re-recorded by running it again
    out["settings"]["command"] = ((f"COURSE_TUNED={tuning_mode()} " if tuning_mode() else "") + "python -m helpers.bench "
                                  + shlex.join(sys.argv[1:] if argv is None else argv))
    print(report(out, rows=False))
    if path is not None and (out["rows"] or not out.get("partial")):
        written = write_json(out, path)
        print(f"wrote {written}" + (" (a partial run: the rows that finished)" if out.get("partial") else ""))
    elif out.get("partial"):
        print("nothing written: no layer had finished", file=sys.stderr)
    if tuned_file is not None:
        print(f"recorded the tuned parameters in {tuned_file}")
    return 130 if out.get("partial") else 0


def _layer_done(done: int, total: int, seconds: float, first: str) -> None:
    """The progress line after each layer: how many are done and about how long the rest takes
    (before the first, ``first``: what is about to happen)."""
    if done == 0:
        print(first, file=sys.stderr, flush=True)
        return
    left = seconds / done * (total - done)
    eta = f", about {left / 60:.1f} min left" if left >= 60 else (f", about {left:.0f} s left" if done < total else "")
    print(f"[{done}/{total} layers, {seconds:.0f} s{eta}]", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
