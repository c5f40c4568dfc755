"""The analyses of chapters 07 and 08 (combining input depth and width): parameter sweeps on this
device whose statements say what their spread allows, and the recorded GPU's register counts,
searches and launch sizes set beside each other.

    rows = sweep("input_depth", layer, [{"CPW": 1}, {"CPW": 4}], ctx)   # timed in interleaved rounds
    print("\\n".join(sweep_lines(rows, "CPW")))                          # which settings the spread separates
    print("\\n".join(register_cost_lines("input_depth", "07_input_depth")))  # chapter 07's register table
"""
from __future__ import annotations

from ..analysis.results import find
from ..analysis.summary import geomean
from ..engine.timing import Timing, time_plan
from ..ops.layers import args as layer_args, layer_set
from ..registers import groups_per_unit, recorded_registers
from ..runner import plan_stage
from .pictures_combining import tuning_tables, work_groups

# NVIDIA Hopper (compute capability 9.0), from NVIDIA's CUDA programming guide: warps an SM holds
# at most, registers per work-item at most, work-items per warp (the registers per SM and the step
# in which they are handed out are helpers/registers.py's, which groups_per_unit uses)
MAX_WARPS, MAX_REGS, WARP = 64, 255, 32


def sweep(stage: str, layer: dict, settings: list[dict], ctx, repeats: int = 5, rounds: int = 3,
          op: str = "conv_dgrad") -> list[dict]:
    """Each setting (JIT parameters) of a stage on one layer, checked, then timed in ``rounds``
    interleaved rounds of ``repeats`` runs (every setting once per round, so a busy spell of a shared
    machine falls on all of them): the median and interquartile range of all its runs, and the
    median of each round."""
    plans = [plan_stage(op, stage, ctx=ctx, defines=d, **layer_args(layer)) for d in settings]
    runs = [[] for _ in plans]
    for _ in range(rounds):
        for i, plan in enumerate(plans):
            runs[i].append(list(time_plan(plan, warmup=2, repeats=repeats).times_ms))
    out = []
    for plan, per_round in zip(plans, runs):
        t = Timing([x for r in per_round for x in r])
        out.append({"layer": layer["name"], "defines": plan.defines, "median_ms": t.median_ms,
                    "q1_ms": t.q1_ms, "q3_ms": t.q3_ms, "runs": len(t.times_ms),
                    "round_ms": [Timing(r).median_ms for r in per_round]})
    return out


def sweep_lines(rows: list[dict], param: str) -> list[str]:
    """One line per setting against the fastest: its median and range, each round's median, and
    whether it is told apart from the fastest: slower in every round and beyond both ranges. The
    settings not told apart are listed: their order is noise in this run."""
    best = min(rows, key=lambda r: r["median_ms"])
    lines, tied = [], []
    for r in rows:
        v = r["defines"][param]
        apart = r["q1_ms"] > best["q3_ms"] and all(a > b for a, b in zip(r["round_ms"], best["round_ms"]))
        if r is best:
            verdict = "the fastest median"
        elif apart:
            verdict = f"x{r['median_ms'] / best['median_ms']:.2f} the fastest's time, slower in every round"
        else:
            verdict = "not told apart from the fastest"
            tied.append(v)
        rounds = ", ".join(f"{m:.2f}" for m in r["round_ms"])
        lines.append(f"{param}={v:>2}: median {r['median_ms']:7.3f} ms (IQR {r['q1_ms']:.3f}-{r['q3_ms']:.3f}; "
                     f"rounds {rounds}): {verdict}")
    if tied:
        lines.append(f"{param} = {', '.join(str(v) for v in [best['defines'][param]] + tied)}: their ranges overlap or "
                     f"their order changes between rounds, so the order among them is noise in this run")
    return lines


def warps_that_fit(registers: int, wg: int) -> int:
    """Warps of a kernel with ``registers`` per work-item that fit one Hopper SM, in whole
    work-groups of ``wg`` (helpers/registers.py: groups_per_unit)."""
    return groups_per_unit(registers, wg) * wg // WARP


def _searched(stage_key: str, wg: int, keys=("CPW", "SPLIT")) -> dict:
    """{(device, *values of keys): geometric-mean ms} of a recorded search, at one work-group size."""
    out = {}
    for t in tuning_tables(stage_key=stage_key):
        for x in t["tried"]:
            if "geomean_ms" in x and x["defines"].get("WG") == wg:
                out[(t["device"], *(x["defines"][k] for k in keys))] = x["geomean_ms"]
    return out


def register_cost_lines(stage: str = "input_depth", stage_key: str = "07_input_depth", wg: int = 64) -> list[str]:
    """Chapter 07: the recorded register and spill counts of each CPW and SPLIT, the weights the
    generated code keeps live, the warps that fit an SM, and the searched time beside them."""
    from ..launch.unrolled import code_stats
    times, records = _searched(stage_key, wg), recorded_registers()
    if not records:
        return ["No register counts are recorded in results/, so there is nothing to set against the times."]
    lines = []
    for rec in records:
        dev = rec["device"]["name"]
        lines += [f"{dev}, stage 07 ({rec['layer']} for the counts, resnet50 for the times):",
                  f"{'CPW':>5} {'SPLIT':>5} {'live weights':>12} {'registers':>9} {'spill st/ld B':>13} "
                  f"{'warps/CU':>8} {'occupancy':>9} {'time':>9}"]
        for r in (r for r in rec["rows"] if r["stage"] == stage):
            d = r["defines"]
            live = code_stats(d["CPW"], 1, d["SPLIT"])["peak_live_weight_floats"]
            warps, t = warps_that_fit(r["registers"], wg), times.get((dev, d["CPW"], d["SPLIT"]))
            mark = "*" if r["registers"] >= MAX_REGS else " "
            lines.append(f"{d['CPW']:5d} {d['SPLIT']:5d} {live:12d} {r['registers']:8d}{mark} "
                         f"{str(r['spill_stores']) + '/' + str(r['spill_loads']):>13} {warps:8d} "
                         f"{warps / MAX_WARPS:9.0%} " + (f"{t:6.2f} ms" if t else "  not searched"))
        lines.append(f"(* at the limit of {MAX_REGS} registers per work-item)")
        mine = {k: v for k, v in times.items() if k[0] == dev}
        if mine:
            best_t, best_k = min((v, k) for k, v in mine.items())
            for cpw, split in ((8, 4), (4, 16), (8, 16), (16, 4), (16, 16)):
                if (dev, cpw, split) in mine:
                    lines.append(f"CPW={cpw} SPLIT={split} takes {mine[(dev, cpw, split)] / best_t:.2f} times as long "
                                 f"as the best, CPW={best_k[1]} SPLIT={best_k[2]}")
    return lines


def width_search_lines(wg: int = 128) -> list[str]:
    """Chapter 08: the recorded register counts of stage 08 beside its searched times, and which
    searched XPW divide the resnet50 widths."""
    times = _searched("08_width", wg, keys=("CPW", "XPW"))
    records = recorded_registers()
    if not records:
        return ["No register counts from an NVIDIA GPU are recorded in results/ yet (python -m helpers.registers)."]
    lines = []
    for rec in records:
        dev = rec["device"]["name"]
        lines.append(f"{dev}, stage 08 at SPLIT=4 ({rec['layer']} for the counts, resnet50 for the times):")
        seen = set()
        for r in (r for r in rec["rows"] if r["stage"] == "width"):
            d = r["defines"]
            seen.add((d["CPW"], d["XPW"]))
            t = times.get((dev, d["CPW"], d["XPW"]))
            lines.append(f"   CPW={d['CPW']} XPW={d['XPW']}: {r['registers']:3d} registers, spill stores/loads "
                         f"{r['spill_stores']:3d}/{r['spill_loads']:3d} B, " + (f"{t:.2f} ms" if t else "not searched"))
        for (d, c, x), t in sorted(times.items()):
            if d == dev and (c, x) not in seen:
                lines.append(f"   CPW={c} XPW={x}: not in the register records, {t:.2f} ms")
    widths = [lay["w"] for lay in layer_set("resnet50")]
    for xpw in sorted({k[2] for k in times}):
        lines.append(f"XPW={xpw} divides {sum(w % xpw == 0 for w in widths)} of the {len(widths)} resnet50 input "
                     f"widths {widths}")
    return lines


def edge_launch_lines() -> list[str]:
    """Chapter 08: for the edge layers, the work-groups stages 07 and 08 launch with their recorded
    values, stage 08's work-items that have positions to compute, and its time over stage 07's."""
    runs = find("conv_dgrad", "edge")
    if not runs:
        return ["No GPU run over 'edge' is recorded in results/ yet."]
    lays = {lay["name"]: lay for lay in layer_set("edge")}
    lines = []
    for run in runs:
        rows = {(r["layer"], r["key"]): r for r in run["rows"]}
        lines += [f"{run['device']['name']}, conv_dgrad over 'edge':",
                  f"   {'layer':<16} {'07 groups':>9} {'08 groups':>9} {'08 work-items':>14} {'of them useful':>15} "
                  f"{'08 over 07':>10}"]
        for name, lay in lays.items():
            r7, r8 = rows[(name, "07_input_depth")], rows[(name, "08_width")]
            g7, g8 = work_groups("07", lay, r7["defines"]), work_groups("08", lay, r8["defines"])
            useful = round(g8["work_items"] * g8["used"])
            lines.append(f"   {name:<16} {g7['groups']:9d} {g8['groups']:9d} {g8['work_items']:14,d} {useful:15,d} "
                         f"{'x' + format(r7['median_ms'] / r8['median_ms'], '.2f'):>10}")
        lines.append(f"   compute units: {run['device']['compute_units']}")
        over = lambda key: geomean(rows[(n, key)]["x_first"] for n in lays)
        lines.append(f"   geometric means: 08 over 07 x{over('08_width') / over('07_input_depth'):.2f}, "
                     f"08 over 02 x{over('08_width'):.2f}, 07 over 02 x{over('07_input_depth'):.2f}")
    return lines


def direct_goal_lines(target: float = 15) -> list[str]:
    """Chapter 08: the direct stages' goal (the best stage `target` times the naive one over
    resnet50) against the recorded run, and against the FMA peak, which bounds any direct kernel."""
    runs = find("conv_dgrad", "resnet50")
    if not runs:
        return ["No GPU run over 'resnet50' is recorded in results/ yet, so the goal cannot be checked."]
    lines = []
    for run in runs:
        peak = run["roofline"]["fma_gflops"]
        layers = list(dict.fromkeys(r["layer"] for r in run["rows"]))
        by = {(r["layer"], r["number"]): r for r in run["rows"]}
        nums = sorted({r["number"] for r in run["rows"]})
        key = {r["number"]: r["key"] for r in run["rows"]}
        first = nums[0]
        naive = geomean(by[(l, first)]["gflops"] for l in layers)
        x = {n: geomean(by[(l, n)]["x_first"] for l in layers) for n in nums}
        best = max((n for n in nums if n <= 8), key=x.get)
        best_gf = geomean(by[(l, best)]["gflops"] for l in layers)
        lines += [f"{run['device']['name']} over resnet50 ({len(layers)} layers): measured FMA peak {peak / 1000:.1f} TFLOP/s",
                  f"   naive stage ({key[first]}): {naive / 1000:.2f} TFLOP/s (geometric mean)",
                  f"   best direct stage: {key[best]}, x{x[best]:.2f} over naive, {best_gf / 1000:.1f} TFLOP/s = "
                  f"{best_gf / peak:.0%} of the FMA peak -> goal x{target} {'met' if x[best] >= target else 'not met'}",
                  f"   x{target} over naive would be {target * naive / 1000:.1f} TFLOP/s = {target * naive / peak:.0%} "
                  f"of the FMA peak",
                  f"   a direct fp32 kernel at the FMA peak on every layer: x{peak / naive:.2f} over naive (geometric mean)",
                  f"   per layer, TFLOP/s of the naive stage, of {key[best]} and of cuDNN; bound = the FMA peak over "
                  f"the naive stage:",
                  f"   {'layer':<14} {'naive':>7} {'bound':>7} {key[best]:>10} {'cuDNN':>7}"]
        vend = {v["layer"]: v for v in run["vendor"]}
        for l in layers:
            n8, v = by[(l, best)], vend.get(l)
            fft = v and any("fft" in k for k in v.get("kernel_names", []))
            line = (f"   {l:<14} {by[(l, first)]['gflops'] / 1000:7.2f} "
                    f"{'x' + format(peak / by[(l, first)]['gflops'], '.1f'):>7} {n8['gflops'] / 1000:10.2f}")
            if v:
                line += (f" {v['gflops'] / 1000:7.1f}  cuDNN at {v['gflops'] / peak:.0%} of the FMA peak"
                         + (", runs FFT kernels" if fft else ""))
            lines.append(line)
        for n in (n for n in nums if n > 8):
            gf = geomean(by[(l, n)]["gflops"] for l in layers)
            xv = geomean(by[(l, n)]["x_vendor"] for l in layers)
            lines.append(f"   later stage {key[n]} (not a direct algorithm): x{x[n]:.2f} over naive, {gf / 1000:.1f} "
                         f"TFLOP/s by the direct formula, x{xv:.2f} of cuDNN")
    return lines

