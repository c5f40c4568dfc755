"""Chapter 14's readings of benchmark runs of the batch norm (this device's and the recorded ones in
results/): one sentence per run, the chapter's target, where a recorded ladder stops, stage 05 layer
by layer against the copy bandwidth and PyTorch, and stage 02 against stage 01 by whether a slab
fits one work-group.

    from helpers.analysis import batchnorm as bn
    runs = bn.recorded("batchnorm_backward", "relu")      # the recorded GPU ladders over 'bn'
    print(bn.summary_line(run)); print(bn.target_line(run)); print(bn.per_layer_table(run))
"""
from __future__ import annotations

from ..stages import get_stage, stage_names
from . import results
from .summary import summary

TARGET_LAYER = "bn256@56"      # N32 C256 56x56, the chapter's target shape
TARGET_COPY = 80               # % of the measured copy bandwidth, stage 05, forward and backward


def recorded(op: str, activation: str = "none", tag: str | None = None) -> list[dict]:
    """The recorded GPU runs of ``op`` over the 'bn' layers with this activation (and tag)."""
    return [r for r in results.find(op, "bn", tag=tag) if r["settings"].get("activation", "none") == activation]


def summary_line(run: dict) -> str:
    """One sentence from a run's numbers: its fastest stage, its share of copy bandwidth, PyTorch."""
    s = summary(run)
    best = max(s, key=lambda k: s[k]["gbps"])
    line = (f"{run['device']['name']}: fastest stage {best} at {s[best]['gbps']:.1f} GB/s, "
            f"{100 * s[best]['gbps'] / run['roofline']['copy_gbps']:.0f}% of the measured copy bandwidth")
    if run.get("vendor"):
        line += f", x{s[best]['x_vendor']:.2f} the speed of PyTorch"
    return line + "."


def target_line(run: dict) -> str:
    """The chapter's GPU target on N32 C256 56x56, stage 05, from a run's numbers: met or not."""
    rows = [r for r in run["rows"] if r["layer"] == TARGET_LAYER and r["stage"] == "fused"]
    if not rows:
        return f"{run['device']['name']}: the run has no {TARGET_LAYER} row for stage 05."
    r = rows[0]
    line = (f"{run['device']['name']}, {run['op']} N32 C256 56x56, stage 05: {r['pct_copy']:.0f}% of the "
            f"measured copy bandwidth (target {TARGET_COPY}%: {'met' if r['pct_copy'] >= TARGET_COPY else 'not met'})")
    if "x_vendor" in r:
        line += f", x{r['x_vendor']:.2f} PyTorch's speed (target x1.00: {'met' if r['x_vendor'] >= 1 else 'not met'})"
    return line + "."


def panel_note(run: dict) -> str | None:
    """A recorded ladder that lacks the op's later stages: a line that says where its panel ends and
    why; None when the run has every stage."""
    have = {r["stage"] for r in run["rows"]}
    missing = [get_stage(run["op"], s).key for s in stage_names(run["op"])
               if s not in have and not get_stage(run["op"], s).choose]
    if not missing:
        return None
    return (f"{run['device']['name']}: the recorded ladder has no {', '.join(missing)} (it was recorded before that "
            f"stage existed), so its panel ends at {max(summary(run))}; section 8b shows stage 06 on that GPU, "
            f"beside stage 05 and PyTorch.")


def per_layer_table(run: dict) -> str:
    """Stage 05 layer by layer: tensor size, time, the time its counted bytes take at the measured
    copy bandwidth ("at copy"), the rest, % of copy bandwidth, PyTorch's time and kernels per call,
    and stage 04 against stage 03 on the same layer; then the geometric means."""
    vend = {v["layer"]: v for v in run["vendor"]}
    rows = {(x["layer"], x["stage"]): x for x in run["rows"]}
    act = run["settings"].get("activation", "none")
    out = [f"{run['device']['name']}, {run['op']}{'' if act == 'none' else ' + ' + act}, stage 05 (times in us):",
           f"{'layer':>10} {'x (MB)':>7} {'stage 05':>9} {'at copy':>8} {'rest':>6} {'% copy':>7} "
           f"{'PyTorch':>8} {'kernels':>7} {'x PyTorch':>9}   stage 04 x stage 03"]
    for name in dict.fromkeys(x["layer"] for x in run["rows"]):
        r, v = rows[(name, "fused")], vend[name]
        sh = r["shape"]
        at_copy = r["min_bytes"] / run["roofline"]["copy_gbps"] / 1e3
        us = 1e3 * r["median_ms"]
        out.append(f"{name:>10} {4 * sh['n'] * sh['c'] * sh['h'] * sh['w'] / 1e6:7.1f} {us:9.1f} {at_copy:8.1f} "
                   f"{us - at_copy:6.1f} {r['pct_copy']:6.0f}% {1e3 * v['median_ms']:8.1f} {v['kernels_per_call']:7d} "
                   f"{r['x_vendor']:8.2f}x   x{rows[(name, 'welford')]['median_ms'] / rows[(name, 'vec4')]['median_ms']:.2f}")
    s = summary(run)["05_fused"]
    out.append(f"geometric means over the {len(vend)} layers: {100 * s['gbps'] / run['roofline']['copy_gbps']:.0f}% "
               f"of the measured copy bandwidth, x{s['x_vendor']:.2f} PyTorch")
    return "\n".join(out)


def stage02_lines(run: dict) -> list[str]:
    """Stage 02 (its defaults) against stage 01, layer by layer, in two groups: the layers whose slab
    fits one work-group (both settings of COALESCED read the same addresses there) and the others."""
    rows = {(r["layer"], r["stage"]): r for r in run["rows"]}
    wg = next(r for r in run["rows"] if r["stage"] == "local_two_pass")["defines"]["WG"]
    layers = list(dict.fromkeys(r["layer"] for r in run["rows"]))
    ratio = {L: rows[(L, "naive")]["median_ms"] / rows[(L, "local_two_pass")]["median_ms"] for L in layers}
    hw = {L: rows[(L, "naive")]["shape"]["h"] * rows[(L, "naive")]["shape"]["w"] for L in layers}
    split = " and the pass per sum" if run["op"] == "batchnorm_backward" else ""
    out = [f"{run['op']}, {results.device_label(run)}: stage 02 x stage 01, WG = {wg}"]
    for fits, what in ((True, f"slab <= WG, the settings read the same addresses: idea 1{split or ' alone'}"),
                       (False, f"slab > WG: both ideas together{split}")):
        out.append(f"  {what}: " + ", ".join(f"{L} x{r:.1f}" for L, r in ratio.items() if (hw[L] <= wg) == fits))
    return out

