"""Pictures for chapters 06-08 (combining output depth, input depth and width).

Each ``draw_*`` function draws on a matplotlib axis and returns a dict of what it drew, so a
test or an NBVAL-checked cell can state it; each ``*_widget`` wraps one in ipywidgets sliders.
"""
from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from ..launch.unrolled import BLOCK, TAPS, fast_block

DEPTH_COLORS = plt.get_cmap("tab20")(np.linspace(0, 1, 20))[:BLOCK]


# ------------------------------------------------------------------------------------------
# Chapter 06: the 16 x 9 weight block, nine 16-wide loads, ping and pong

def weight_block_loads(load: int) -> dict:
    """After 16-wide load ``load`` (0..8) of a 16-depth block: which register it fills, which
    depths are complete, which depths straddle it and the previous load."""
    if not 0 <= load < TAPS:
        raise ValueError(f"load must be 0..8 (nine 16-wide loads), got {load}")
    complete = [i for i in range(BLOCK) if (TAPS * i + 8) // 16 <= load]
    straddle = [i for i in range(BLOCK) if (TAPS * i) // 16 == load - 1 and (TAPS * i + 8) // 16 == load]
    return {"load": load, "register": "ping" if load % 2 == 0 else "pong",
            "floats": (16 * load, 16 * load + 15), "complete_depths": complete,
            "straddling_depths": straddle}


def draw_weight_block(ax, load: int = 8) -> dict:
    """The 144 weights of (c, k0..k0+15) as nine rows of 16 floats (one 64-byte line, one
    16-wide load each), coloured by output depth; loads after ``load`` are greyed out."""
    info = weight_block_loads(load)
    for e in range(BLOCK * TAPS):
        v, lane = divmod(e, 16)
        i, t = divmod(e, TAPS)
        done = v <= load
        ax.add_patch(Rectangle((lane, -v), 1, -1, facecolor=DEPTH_COLORS[i] if done else "0.92",
                               edgecolor="white", lw=1))
        ax.text(lane + 0.5, -v - 0.5, f"{i}.{t}", ha="center", va="center", fontsize=6,
                color="black" if done else "0.6")
    for v in range(TAPS):
        reg = "ping" if v % 2 == 0 else "pong"
        ax.text(-0.3, -v - 0.5, f"load {v} → {reg}", ha="right", va="center", fontsize=8,
                fontweight="bold" if v == load else "normal")
    ax.add_patch(Rectangle((0, -load), 16, -1, fill=False, edgecolor="black", lw=2.5))
    ax.set_xlim(-5.5, 16.2)
    ax.set_ylim(-TAPS - 0.2, 0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    done = info["complete_depths"]
    ax.set_title(f"after load {load}: depths {done[0]}..{done[-1]} complete"
                 if done else f"after load {load}: no depth complete yet", fontsize=9)
    return info


def weight_requests_per_16_depths(line_bytes: int = 64) -> dict:
    """Requests and cache lines for the weights of 16 depths of one input channel (an aligned
    block, K % 16 == 0): stage 04/05 (8-wide + scalar per depth) against stage 06 (nine 16-wide)."""
    per_line = line_bytes // 4
    # stage 04: per depth an 8-wide load (1 or 2 lines) and a scalar (1 line)
    lines04 = sum(len({(TAPS * i) // per_line, (TAPS * i + 7) // per_line}) + 1 for i in range(BLOCK))
    # stage 06: nine 16-wide loads, each a span of 16 floats starting at a multiple of 16
    lines06 = sum(len({(16 * v) // per_line, (16 * v + 15) // per_line}) for v in range(TAPS))
    return {"stage 04-05": {"requests": 2 * BLOCK, "line visits": lines04},
            "stage 06": {"requests": TAPS, "line visits": lines06}}


def weight_block_widget():
    import ipywidgets as widgets

    def show(load):
        fig, ax = plt.subplots(figsize=(8, 4))
        draw_weight_block(ax, load)
        plt.show()
    return widgets.interact(show, load=widgets.IntSlider(value=3, min=0, max=8, continuous_update=False,
                                                          description="16-wide load"))


# ------------------------------------------------------------------------------------------
# Chapter 07: weights live in registers, split against unsplit

def live_weights(cpw: int, split: int) -> np.ndarray:
    """Weight floats live (loaded, still to be used) after each line of the generated block."""
    lines = fast_block(cpw, 1, split).splitlines()
    first, last = {}, {}
    for n, line in enumerate(lines):
        for name in re.findall(r"const float4 (w\d+_\d+) =", line):
            first[name] = n
        for name in re.findall(r"(w\d+_\d+)\.s", line):
            last[name] = n
    live = np.zeros(len(lines), dtype=int)
    for v, a in first.items():
        live[a:last.get(v, a) + 1] += 4
    return live


def draw_live_weights(ax, cpw: int = 8, splits=(16, 8, 4, 1), budget: int = 255) -> dict:
    """Live weight floats through one generated 16-depth block, for several SPLITs, against a
    register budget (255 per work-item on NVIDIA; accumulators and addresses need some too)."""
    peaks = {}
    for split in splits:
        live = live_weights(cpw, split)
        ax.plot(np.linspace(0, 1, len(live)), live, label=f"SPLIT={split}", lw=1.5)
        peaks[split] = int(live.max())
    ax.axhline(budget, color="k", ls="--", lw=1)
    ax.annotate(f"{budget} registers", (0.0, budget), va="bottom", fontsize=8)
    ax.set_xlabel("position in the generated code of one 16-depth block")
    ax.set_ylabel("weight floats live")
    ax.set_title(f"CPW={cpw}: weights loaded but not yet used", fontsize=9)
    ax.legend(fontsize=8)
    return {"cpw": cpw, "peak_live": peaks, "accumulators": cpw}


def live_weights_widget():
    import ipywidgets as widgets

    def show(cpw):
        fig, ax = plt.subplots(figsize=(7, 3.5))
        draw_live_weights(ax, cpw)
        plt.show()
    return widgets.interact(show, cpw=widgets.SelectionSlider(options=[1, 2, 4, 8, 16], value=8,
                                                              continuous_update=False, description="CPW"))


def reuse_per_block(cpw: int = 1, xpw: int = 1) -> dict:
    """Per work-item and 16 output depths of a 3x3 layer, inside the tensor (stride 1): dy
    floats loaded, weight floats loaded, multiply-adds, and how many multiply-adds each loaded
    dy float and each loaded weight float feeds. (Stage 05 reads a dy float once per tap, so 3
    rows x 3 columns per depth; from stage 07 on a row of XPW + 2 columns serves every tap.)"""
    dy = BLOCK * 3 * (xpw + 2)
    wts = BLOCK * TAPS * cpw
    fmas = BLOCK * TAPS * cpw * xpw
    return {"dy floats": dy, "weight floats": wts, "multiply-adds": fmas,
            "per dy float": fmas / dy, "per weight float": fmas / wts}


# ------------------------------------------------------------------------------------------
# Chapter 08: several x positions per work-item, their column table

def width_columns(x0: int, xpw: int, w: int, stride: int = 1, pad: int = 1, kernel: int = 3) -> list[dict]:
    """The column table of the work-item starting at x0: column u (0..xpw+kernel-2) has
    ow*STRIDE = x0 + pad - (kernel-1) + u; it exists if that is >= 0, divisible by the stride,
    and < OW. Returns one dict per column: u, ow (or None) and the (position, tap) pairs using it."""
    ow_n = (w + 2 * pad - kernel) // stride + 1
    cols = []
    for u in range(xpw + kernel - 1):
        ow_s = x0 + pad - (kernel - 1) + u
        ok = ow_s >= 0 and ow_s % stride == 0 and ow_s // stride < ow_n
        users = [(p, p + kernel - 1 - u) for p in range(xpw) if 0 <= p + kernel - 1 - u < kernel]
        cols.append({"u": u, "ow": ow_s // stride if ok else None, "users": users})
    return cols


def draw_width_tables(ax, w: int = 14, x0: int = 0, xpw: int = 4, stride: int = 1, pad: int = 1) -> dict:
    """One row of the input (top) and of dy (bottom): the XPW positions of one work-item, its
    XPW + 2 columns of dy (crossed where they do not exist) and the taps that connect them."""
    kernel = 3
    ow_n = (w + 2 * pad - kernel) // stride + 1
    cols = width_columns(x0, xpw, w, stride, pad)
    for x in range(w):
        mine = x0 <= x < x0 + xpw
        ax.add_patch(Rectangle((x, 1.6), 0.9, 0.6, facecolor="tab:orange" if mine else "0.9", edgecolor="0.5"))
        ax.text(x + 0.45, 1.9, str(x), ha="center", va="center", fontsize=7)
    for x in range(x0, x0 + xpw):
        if x >= w:
            ax.add_patch(Rectangle((x, 1.6), 0.9, 0.6, facecolor="white", edgecolor="tab:orange", ls="--"))
            ax.text(x + 0.45, 1.9, "tail", ha="center", va="center", fontsize=6, color="tab:orange")
    scale = stride  # draw dy column ow under input x = ow*stride - pad + 1 (the centre tap)
    for o in range(ow_n):
        ax.add_patch(Rectangle((o * scale - pad + 1, 0), 0.9, 0.6, facecolor="0.85", edgecolor="0.5"))
        ax.text(o * scale - pad + 1 + 0.45, 0.3, str(o), ha="center", va="center", fontsize=7)
    used = 0
    for c in cols:
        xpos = x0 + pad - 2 + c["u"] - pad + 1  # the input x under which ow*stride sits
        if c["ow"] is None:
            ax.plot([xpos + 0.1, xpos + 0.8], [0.05, 0.55], color="tab:red", lw=1.5)
            ax.plot([xpos + 0.1, xpos + 0.8], [0.55, 0.05], color="tab:red", lw=1.5)
            continue
        used += 1
        ax.add_patch(Rectangle((xpos, 0), 0.9, 0.6, fill=False, edgecolor="tab:blue", lw=2))
        for p, s in c["users"]:
            if x0 + p < w:
                ax.plot([x0 + p + 0.45, xpos + 0.45], [1.6, 0.6], color="tab:blue", lw=0.8, alpha=0.6)
    inside = stride == 1 and all(c["ow"] is not None for c in cols)
    ax.text(-1.2, 1.9, "input x", ha="right", va="center", fontsize=8)
    ax.text(-1.2, 0.3, "dy ow", ha="right", va="center", fontsize=8)
    ax.set_xlim(-4.5, max(w, x0 + xpw) + 1)
    ax.set_ylim(-0.3, 2.5)
    ax.axis("off")
    ax.set_title(f"work-item x0={x0}, XPW={xpw}, stride {stride}: {len(cols)} columns in the table, "
                 f"{used} exist; " + ("one span of wide loads" if inside else "masked scalar loads"), fontsize=9)
    return {"x0": x0, "xpw": xpw, "columns": len(cols), "existing": used, "inside": inside,
            "ow": [c["ow"] for c in cols]}


def width_tables_widget(w: int = 14):
    import ipywidgets as widgets

    def show(group, xpw, stride):
        fig, ax = plt.subplots(figsize=(9, 2.6))
        draw_width_tables(ax, w, group * xpw, xpw, stride)
        plt.show()
    return widgets.interact(show,
                            group=widgets.IntSlider(value=0, min=0, max=w - 1, continuous_update=False,
                                                    description="group"),
                            xpw=widgets.IntSlider(value=4, min=1, max=8, continuous_update=False, description="XPW"),
                            stride=widgets.ToggleButtons(options=[1, 2], description="stride"))


# ------------------------------------------------------------------------------------------
# Ladder helpers for the chapters

def time_against(here_rows: list[dict], param: str, ax=None):
    """Median time against one JIT parameter, one line per layer (rows: dicts with 'layer',
    'defines' and 'median_ms', and 'q1_ms', 'q3_ms' for the spread, drawn as bars)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    spread = all("q1_ms" in r and "q3_ms" in r for r in here_rows)
    for layer in dict.fromkeys(r["layer"] for r in here_rows):
        rows = sorted((r for r in here_rows if r["layer"] == layer), key=lambda r: r["defines"][param])
        xs, ys = [r["defines"][param] for r in rows], [r["median_ms"] for r in rows]
        line, = ax.plot(xs, ys, "o-", label=layer)
        if spread:
            ax.errorbar(xs, ys, yerr=[[y - r["q1_ms"] for y, r in zip(ys, rows)],
                                      [r["q3_ms"] - y for y, r in zip(ys, rows)]],
                        fmt="none", ecolor=line.get_color(), elinewidth=1, capsize=3)
    ax.set_xscale("log", base=2)
    values = sorted({r["defines"][param] for r in here_rows})
    ax.set_xticks(values, [str(v) for v in values])
    ax.minorticks_off()
    ax.set_xlabel(param)
    ax.set_ylabel("median time (ms)" + (", bars: IQR" if spread else ""))
    ax.legend(fontsize=8)
    return ax


def tuning_tables(op: str = "conv_dgrad", layer_set: str = "resnet50", stage_key: str = "07_input_depth") -> list[dict]:
    """The tuning searches recorded with GPU runs in results/: per run, device and every
    (defines, geometric-mean time or error) tried for ``stage_key``."""
    from ..analysis.results import find
    out = []
    for run in find(op, layer_set):
        t = run.get("tuned", {}).get(stage_key)
        if t:
            out.append({"device": run["device"]["name"], "date": run["date"][:10], "best": t["defines"],
                        "tried": t.get("tried", [])})
    return out


# ------------------------------------------------------------------------------------------
# The recorded GPU runs, as numbers the chapters print

def recorded_steps(number: int, op: str = "conv_dgrad", layer_sets=("resnet50", "vgg16", "edge"),
                   per_layer: bool = True) -> list[str]:
    """Lines stating what the recorded GPU runs (results/) measured for stage ``number``: per
    layer set, the geometric means over its layers of GFLOP/s and of the speed-ups over the first
    stage, over the stage before and against the vendor library, for the stages from the one
    before ``number`` up to it; then (``per_layer``) each layer's speed-ups of stage ``number``."""
    from ..analysis.summary import geomean
    from ..analysis.results import find
    out = []
    for ls in layer_sets:
        for run in find(op, ls):
            rows = [r for r in run["rows"] if r["number"] <= number]
            nums = sorted({r["number"] for r in rows})
            if number not in nums or len(nums) < 2:
                continue
            prev, first = nums[-2], nums[0]
            key = {r["number"]: r["key"] for r in rows}
            med = {(r["layer"], r["number"]): r for r in rows}
            layers = list(dict.fromkeys(r["layer"] for r in rows))
            peak = run.get("roofline", {}).get("fma_gflops")
            out.append(f"{run['device']['name']}, {op} over '{ls}' ({len(layers)} layers, {run['date'][:10]}); "
                       f"geometric means:")
            for n in nums[max(0, nums.index(prev) - 1):]:
                rs = [med[(l, n)] for l in layers]
                before = [n2 for n2 in nums if n2 < n]
                step = (f", x{geomean(med[(l, before[-1])]['median_ms'] / med[(l, n)]['median_ms'] for l in layers):.2f} "
                        f"over {key[before[-1]][:2]}" if before else "")
                pct = f" ({100 * geomean(r['gflops'] for r in rs) / peak:.0f}% of FMA peak)" if peak else ""
                out.append(f"   {key[n]:<18} {geomean(r['gflops'] for r in rs) / 1000:5.2f} TFLOP/s{pct}, "
                           f"x{geomean(r['x_first'] for r in rs):.2f} over {key[first][:2]}{step}, "
                           f"x{geomean(r.get('x_vendor') for r in rs):.2f} of cuDNN")
            if per_layer:
                out.append(f"   {key[number]} per layer (over {key[first][:2]}, over {key[prev][:2]}):")
                for l in layers:
                    r, rp = med[(l, number)], med[(l, prev)]
                    out.append(f"      {l:<16} x{r['x_first']:.2f}, x{rp['median_ms'] / r['median_ms']:.2f}")
    if not out:
        out.append(f"No GPU run of {op} with stage {number:02d} is recorded in results/ yet.")
    return out


def work_groups(stage_key: str, lay: dict, defines: dict) -> dict:
    """Launch size of stage 07 or 08 for a layer (dict from helpers.ops.layers) and its defines:
    work-groups, work-items launched, and the fraction of them that have positions to compute."""
    from types import SimpleNamespace
    from ..launch.direct import channel_tiles, channel_width_tiles
    p = SimpleNamespace(dims={"N": lay["n"], "C": lay["c"], "H": lay["h"], "W": lay["w"]})
    geometry = channel_width_tiles if stage_key.startswith("08") else channel_tiles
    (g0, g1), (l0, _) = geometry(p, defines)
    xpw = defines.get("XPW", 1)
    real = lay["n"] * lay["h"] * -(-lay["w"] // xpw)
    return {"groups": g0 // l0 * g1, "work_items": g0 * g1, "used": real / g0}
