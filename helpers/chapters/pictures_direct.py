"""Pictures of what the direct input-gradient kernels (conv_dgrad stages 03-08) read.

Each ``draw_*`` function draws on a matplotlib Axes and returns the numbers it drew (counts,
which cells are which), so tests and notebooks can check a picture without looking at it. The
``*_widget`` functions wrap them in ipywidgets sliders; the drawing stays in ``draw_*``.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from . import direct
from ..ops.reference import output_size

LANE_COLORS = ["tab:blue", "tab:purple", "tab:green", "tab:orange", "tab:red", "tab:brown",
               "tab:pink", "tab:olive"]
BLOCK_COLORS = ["#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb", "#fcbba1", "#d9d9d9"]


# ---------------------------------------------------------------------------------------------
# Chapter 03: the bounds-check table of a few work-items

def draw_valid_tables(positions, h: int, w: int, kernel: int = 3, stride: int = 1, pad: int = 1, axes=None):
    """One small panel per input position (h, x): the KHxKW table of stage 03, green where the
    weight meets an output (a multiply-add runs), grey where it is skipped. Returns the tables."""
    oh_n, ow_n = output_size(h, kernel, stride, pad), output_size(w, kernel, stride, pad)
    if axes is None:
        _, axes = plt.subplots(1, len(positions), figsize=(2.1 * len(positions), 2.4), squeeze=False)
        axes = axes[0]
    tables = []
    for ax, (hh, xx) in zip(axes, positions):
        t = direct.valid_table(hh, xx, kernel, kernel, stride, pad, oh_n, ow_n)
        tables.append(t)
        ax.imshow(t, cmap=plt.matplotlib.colors.ListedColormap(["#d9d9d9", "#74c476"]), vmin=0, vmax=1)
        for r in range(kernel):
            for s in range(kernel):
                ax.text(s, r, "✓" if t[r, s] else "·", ha="center", va="center", fontsize=10)
        ax.set_xticks(range(kernel), [f"s{s}" for s in range(kernel)], fontsize=7)
        ax.set_yticks(range(kernel), [f"r{r}" for r in range(kernel)], fontsize=7)
        ax.grid(False)
        ax.set_title(f"input ({hh}, {xx})\n{int(t.sum())} of {t.size} valid", fontsize=8)
    return tables


# ---------------------------------------------------------------------------------------------
# Chapter 04: IOHW weights over cache lines

def draw_weight_lines(ax, K: int = 64, c: int = 0, k_first: int = 0, blocks: int = 6,
                      line_bytes: int = 64, vector: bool = True, requests=None, label: str | None = None) -> dict:
    """The weights of ``blocks`` consecutive (c, k) pairs of a 3x3 IOHW tensor, one row per cache
    line of ``line_bytes``, each block in its own colour. Scalar mode: every float is its own
    request ('s'). Vector mode: a frame around each 8-wide request (red where it crosses into a
    second line) and 's' on the scalar; a red dot where a block starts. Returns the counts.

    ``requests``: other load patterns, as a list of (first float, count) over the drawn floats
    (for example 16-wide loads across output channels), described by ``label`` in the title."""
    per_line = line_bytes // direct.FLOAT_BYTES
    if requests is not None:
        requests = [{"first": f, "count": n, "lines": sorted({i // per_line for i in range(f, f + n)})}
                    for f, n in requests]
    first = direct.weight_block(c, k_first, K)
    last = direct.weight_block(c, k_first + blocks, K)            # one past the drawn floats
    line0, line1 = first // per_line, (last - 1) // per_line
    rows = line1 - line0 + 1

    def cell(i):  # float index -> (column, row) in the picture
        return i % per_line, i // per_line - line0

    reqs = []
    for b in range(blocks):
        k = k_first + b
        start = direct.weight_block(c, k, K)
        for i in range(9):
            col, row = cell(start + i)
            ax.add_patch(Rectangle((col, row), 1, 1, facecolor=BLOCK_COLORS[k % len(BLOCK_COLORS)],
                                   edgecolor="white", lw=0.8))
        col, row = cell(start)
        ax.plot(col + 0.15, row + 0.2, "o", color="red", ms=4)
        ax.text(col + 0.5, row + 0.78, f"k{k}", ha="center", va="center", fontsize=6, color="0.3")
    for b in range(blocks):
        k = k_first + b
        own = direct.weight_requests(c, k, K, line_bytes, vector) if requests is None else (
            requests if b == 0 else [])
        for q in own:
            reqs.append(q)
            if q["count"] == 1:
                col, row = cell(q["first"])
                ax.text(col + 0.5, row + 0.45, "s", ha="center", va="center", fontsize=8, weight="bold")
            else:
                crosses = len(q["lines"]) > 1
                i, n_left = q["first"], q["count"]
                while n_left:                                    # one frame per line it touches
                    col, row = cell(i)
                    span = min(n_left, per_line - col)
                    ax.add_patch(Rectangle((col + 0.05, row + 0.05), span - 0.1, 0.9, fill=False,
                                           edgecolor="red" if crosses else "black", lw=1.6))
                    i, n_left = i + span, n_left - span
    lines_touched = sum(len(q["lines"]) for q in reqs)
    straddle = sum(1 for q in reqs if len(q["lines"]) > 1)
    ax.set_xlim(0, per_line)
    ax.set_ylim(rows, 0)
    ax.set_xticks(np.arange(per_line) + 0.5, [str(i) for i in range(per_line)], fontsize=6)
    ax.set_yticks(np.arange(rows) + 0.5, [f"line {line0 + r}" for r in range(rows)], fontsize=7)
    ax.grid(False)
    ax.set_xlabel(f"float within a {line_bytes}-byte line")
    how = label or ("one 8-wide + one scalar load per k" if vector else "nine scalar loads per k")
    ax.set_title(f"{how}: {len(reqs)} requests, {lines_touched} line accesses"
                 f"{f', {straddle} cross a line' if straddle or vector else ''}", fontsize=9)
    return {"requests": len(reqs), "line_accesses": lines_touched, "straddling": straddle, "rows": rows}


def weight_lines_figure(line_bytes: int = 64, k_first: int = 0, blocks: int = 6, K: int = 64):
    """Scalar loads (stage 03) above, vector loads (stage 04) below, for the same weights."""
    fig, axes = plt.subplots(2, 1, figsize=(8, 4.8))
    a = draw_weight_lines(axes[0], K=K, k_first=k_first, blocks=blocks, line_bytes=line_bytes, vector=False)
    b = draw_weight_lines(axes[1], K=K, k_first=k_first, blocks=blocks, line_bytes=line_bytes, vector=True)
    fig.tight_layout()
    return fig, a, b


def weight_lines_widget(K: int = 64):
    """Sliders: cache-line size and the first output channel drawn."""
    import ipywidgets as W

    def show(line_bytes, k_first):
        weight_lines_figure(line_bytes, k_first, K=K)
        plt.show()

    return W.interactive(show, line_bytes=W.ToggleButtons(options=[32, 64, 128], value=64,
                                                           description="line bytes"),
                         k_first=W.IntSlider(min=0, max=K - 6, value=0, description="first k",
                                             continuous_update=False))


# ---------------------------------------------------------------------------------------------
# Chapter 05: neighbouring work-items' windows on a row of dy

def draw_input_windows(ax, w: int = 14, x0: int = 0, lanes: int = 4, kernel: int = 3, stride: int = 1,
                       pad: int = 1) -> dict:
    """One row of dy (for any kernel row r: with stride 1 every row looks the same) and, below it,
    the columns that the work-items x0 .. x0+lanes-1 (neighbouring SIMD lanes) read from it.
    A lane on the vector path gets one frame (one 3-wide request); a lane on the scalar path
    gets a dashed frame per float. Each cell names the weight column s it is multiplied with.
    Returns per lane its path and columns, and the counts of lane_reads."""
    ow_n = output_size(w, kernel, stride, pad)
    lo, hi = -pad - 1, ow_n + pad          # draw a little of the outside on both sides
    ax.add_patch(Rectangle((0, 0), ow_n, 1, facecolor="#f0f0f0", edgecolor="k"))
    for col in range(lo, hi):
        inside = 0 <= col < ow_n
        ax.add_patch(Rectangle((col, 0), 1, 1, facecolor="#f0f0f0" if inside else "white",
                               edgecolor="0.6", hatch=None if inside else "xx", lw=0.6))
        if inside:
            ax.text(col + 0.5, 0.5, str(col), ha="center", va="center", fontsize=7)
    ax.text(lo - 0.2, 0.5, "dy row", ha="right", va="center", fontsize=8)
    lanes_out = []
    for j, x in enumerate(range(x0, min(x0 + lanes, w))):
        row = 1.4 + j
        color = LANE_COLORS[j % len(LANE_COLORS)]
        vec = direct.takes_vector_path(x, ow_n, kernel, stride, pad)
        cols = []
        for s in reversed(range(kernel)):
            ow_s = x + pad - s
            if ow_s % stride:
                continue
            col = ow_s // stride
            ok = 0 <= col < ow_n
            cols.append((col, s, ok))
            ax.add_patch(Rectangle((col, row), 1, 0.8, facecolor=color if ok else "white",
                                   alpha=0.35 if ok else 1, hatch="//" if ok else "xx",
                                   edgecolor=color, lw=0.5))
            ax.text(col + 0.5, row + 0.4, f"s{s}", ha="center", va="center", fontsize=7)
            if not vec and ok:
                ax.add_patch(Rectangle((col + 0.05, row + 0.03), 0.9, 0.74, fill=False, ls="--",
                                       edgecolor="k", lw=1))
        if vec:
            first = min(c for c, _, _ in cols)
            ax.add_patch(Rectangle((first + 0.03, row + 0.03), 2.94, 0.74, fill=False, edgecolor="k", lw=2))
        ax.text(lo - 0.2, row + 0.4, f"x={x}: {'vload3' if vec else 'scalar'}", ha="right", va="center",
                fontsize=8, color=color)
        lanes_out.append({"x": x, "vector": vec, "columns": [c for c, _, ok in cols if ok]})
    counts = direct.lane_reads(x0, lanes, w, kernel, stride, pad)
    ax.set_xlim(lo - 5, hi)
    ax.set_ylim(1.4 + lanes, -0.2)
    ax.set_axis_off()
    ax.set_title(f"W={w}, stride {stride}, padding {pad}: lanes ask for {counts['asked']} floats, "
                 f"{counts['distinct']} distinct; {counts['vector_requests']} vector + "
                 f"{counts['scalar_requests']} scalar requests", fontsize=9)
    return {"lanes": lanes_out, **counts}


def input_windows_widget(w: int = 14, lanes: int = 4):
    """Sliders: the first lane's column x0 and the stride."""
    import ipywidgets as W

    def show(x0, stride):
        fig, ax = plt.subplots(figsize=(9, 0.9 + 0.55 * lanes))
        draw_input_windows(ax, w=w, x0=x0, lanes=lanes, stride=stride)
        plt.show()

    return W.interactive(show, x0=W.IntSlider(min=0, max=w - lanes, value=0, description="first lane x",
                                              continuous_update=False),
                         stride=W.ToggleButtons(options=[1, 2], value=1, description="stride"))


# ---------------------------------------------------------------------------------------------
# Every chapter: the ladder so far, this device beside the recorded GPU runs

def upto(run: dict, number: int) -> dict:
    """A benchmark run restricted to the stages numbered up to ``number``."""
    return {**run, "rows": [r for r in run["rows"] if r["number"] <= number]}


def ladder_so_far(here: dict, number: int, op: str = "conv_dgrad", layer_set: str = "resnet50"):
    """The ladder of stages up to ``number``: this device's run, then every recorded GPU run of
    ``layer_set`` (results/). Returns the figure, or None (with a sentence) if nothing is left."""
    from ..analysis.plots import ladder
    from ..analysis.results import find
    recorded = [r for r in (upto(run, number) for run in find(op, layer_set)) if r["rows"]]
    if not recorded:
        print(f"No GPU run of {op} over '{layer_set}' is recorded in results/ yet; "
              f"the panel shows this device only.")
    keys = [r["key"] for r in here["rows"] if r["number"] == number]
    return ladder(upto(here, number), *recorded, highlight=keys[0] if keys else None)


def describe_step(here: dict, number: int) -> list[str]:
    """Sentences stating what a run measured for stage ``number`` against the stage before it
    and against the first stage, layer by layer (median times); where the interquartile ranges of
    the two overlap, it says so instead of calling one faster."""
    rows = here["rows"]
    nums = sorted({r["number"] for r in rows if r["number"] < number})
    if not nums or not any(r["number"] == number for r in rows):
        return ["This run does not hold the stage and the one before it."]
    prev, first = nums[-1], nums[0]
    med = {(r["layer"], r["number"]): r["median_ms"] for r in rows}
    iqr = {(r["layer"], r["number"]): (r.get("q1_ms", r["median_ms"]), r.get("q3_ms", r["median_ms"])) for r in rows}
    key = {r["number"]: r["key"] for r in rows}
    against = key[prev] + ("" if prev == first else f" and {key[first]}")
    out = [f"On {here['device']['name'].strip()}, median times of {key[number]} against {against}:"]
    for layer in dict.fromkeys(r["layer"] for r in rows):
        t, tp, tf = med[(layer, number)], med[(layer, prev)], med[(layer, first)]
        (a1, a3), (b1, b3) = iqr[(layer, number)], iqr[(layer, prev)]
        if a1 <= b3 and b1 <= a3:   # the interquartile ranges overlap: no difference this run can show
            line = (f"  {layer}: {t:.3f} ms (IQR {a1:.3f}-{a3:.3f}) against {tp:.3f} ms (IQR {b1:.3f}-{b3:.3f}): "
                    f"within the spread of {key[prev]}")
        else:
            word = "faster than" if t < tp else "slower than"
            line = (f"  {layer}: {t:.3f} ms (IQR {a1:.3f}-{a3:.3f}), {max(t, tp) / min(t, tp):.2f}x {word} "
                    f"{key[prev]} (IQR {b1:.3f}-{b3:.3f})")
        if prev != first:
            line += f" ({tf / t:.2f}x the speed of {key[first]})"
        out.append(line)
    return out


def valid_tables_widget(h: int = 8, w: int = 8):
    """Sliders: which work-item (h, x), kernel size, stride and padding; draws its table."""
    import ipywidgets as W

    def show(row, col, kernel, stride, pad):
        if pad >= kernel or h + 2 * pad < kernel or w + 2 * pad < kernel:
            print(f"padding {pad} with a {kernel}x{kernel} kernel: choose a padding below {kernel}")
            return
        fig, ax = plt.subplots(figsize=(2.6, 2.6))
        draw_valid_tables([(row, col)], h, w, kernel, stride, pad, axes=[ax])
        plt.show()

    slider = dict(continuous_update=False)
    return W.interactive(show, row=W.IntSlider(min=0, max=h - 1, value=0, description="h", **slider),
                         col=W.IntSlider(min=0, max=w - 1, value=0, description="x", **slider),
                         kernel=W.ToggleButtons(options=[1, 3, 5], value=3, description="kernel"),
                         stride=W.ToggleButtons(options=[1, 2, 3], value=1, description="stride"),
                         pad=W.IntSlider(min=0, max=4, value=1, description="padding", **slider))


def recorded_step(number: int, op: str = "conv_dgrad", layer_sets=("resnet50", "vgg16", "edge"),
                  per_layer=("resnet50",)) -> list[str]:
    """What the GPU runs recorded in results/ measured for the stages up to ``number``: for each
    layer set, the geometric mean over its layers of each stage's speed-up over the first stage,
    over the stage before it, and against the vendor library; layer by layer (describe_step) for
    the sets in ``per_layer``. A sentence instead where no run is recorded."""
    from ..analysis.summary import geomean, summary, vendor_name
    from ..analysis.results import device_label, find
    out = []
    for ls in layer_sets:
        runs = [upto(r, number) for r in find(op, ls)]
        runs = [r for r in runs if any(row["number"] == number for row in r["rows"])]
        if not runs:
            out.append(f"No GPU run of {op} over '{ls}' with stage {number:02d} is recorded in results/ yet.")
            continue
        for run in runs:
            layers = list(dict.fromkeys(r["layer"] for r in run["rows"]))
            med = {(r["layer"], r["key"]): r["median_ms"] for r in run["rows"]}
            out.append(f"{op} over '{ls}' ({len(layers)} layers) on {device_label(run)}, geometric means:")
            prev = None
            for key, s in summary(run).items():
                first = run["rows"][0]["key"]
                line = f"  {key:<20} " + ("the baseline" if key == first else f"x{s['x_first']:.2f} over {first}")
                if prev not in (None, first):
                    step = geomean(med[(l, prev)] / med[(l, key)] for l in layers if (l, key) in med)
                    line += f", x{step:.2f} over {prev}"
                if s["x_vendor"] == s["x_vendor"]:
                    line += f", x{s['x_vendor']:.3f} {vendor_name(run)}"
                out.append(line)
                prev = key
            if ls in per_layer:
                out += describe_step(run, number)
    return out
