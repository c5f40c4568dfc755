"""Chapter 13's pictures: the fragments of one mma (which lane holds which element), the boxes of
dy' the TMA copies for a block, and the recorded runs: each tensor-core stage's rate per layer,
beside cuDNN in each precision and the CUDA cores' measured FMA rate (the ceiling of chapters
02-12).

    from helpers.chapters.pictures_tensor_cores import recorded_bars
    recorded_bars(run, stages)          # run: a recorded conv_dgrad run of the tensor-core stages
"""
from __future__ import annotations

import numpy as np

from ..engine.fragments import fragment_owner
from .tensor_core_layouts import tma_boxes
from .tensor_cores import recorded_rows

PRECISIONS = ("tf32", "fp16", "bf16")


def bar_heights(run: dict, stages) -> tuple[list[str], dict]:
    """The layers in the run's order and {label: TFLOP/s per layer}: each stage, then cuDNN in each
    precision (a layer a stage did not run is NaN, a gap in its row of bars)."""
    rows = recorded_rows(run)
    layers = list(dict.fromkeys(r["layer"] for r in rows))
    bars = {}
    for s in stages:
        got = {r["layer"]: r["tflops"] for r in rows if r["stage"] == s}
        bars[s] = [got.get(lay, float("nan")) for lay in layers]
    for p in PRECISIONS:
        got = {v["layer"]: v["gflops"] / 1e3 for v in run["vendor"] if v["precision"] == p}
        if got:
            bars[f"cuDNN {p}"] = [got.get(lay, float("nan")) for lay in layers]
    return layers, bars


def recorded_bars(run: dict, stages, ax=None, title: str = "ResNet-50 input gradients on the H200 (batch 64)"):
    """Grouped bars, one group per layer; cuDNN's hatched; the FMA rate as a dashed line."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4))
    layers, bars = bar_heights(run, stages)
    width = 0.8 / len(bars)
    x = np.arange(len(layers))
    for i, (label, heights) in enumerate(bars.items()):
        vendor = label.startswith("cuDNN")
        ax.bar(x + i * width, heights, width, label=label, hatch="//" if vendor else None, alpha=0.6 if vendor else 1)
    ax.axhline(run["roofline"]["fma_gflops"] / 1e3, color="k", ls="--", lw=1, label="CUDA-core FMA rate (measured)")
    ax.set_xticks(x + 0.4 - width / 2)
    ax.set_xticklabels(layers)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=3)
    return ax


def draw_fragments(axes=None):
    """The three operands of one m16n8k8 TF32 mma, each element labelled lane/register, coloured
    by lane: what each of the warp's 32 lanes holds in its registers."""
    import matplotlib.pyplot as plt
    shapes = {"A": (16, 8, "A (16 x 8): dy' rows = positions, columns = k"),
              "B": (8, 8, "B (8 x 8): w, rows = k, columns = channels"),
              "C": (16, 8, "C (16 x 8): fp32 sums, positions x channels")}
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(13, 6.5), gridspec_kw={"height_ratios": [1]})
    cmap = plt.get_cmap("tab20")
    for ax, (op, (rows, cols, title)) in zip(axes, shapes.items()):
        top = (16 + rows) / 2                     # an 8-row operand centred beside the 16-row ones
        for r in range(rows):
            for c in range(cols):
                lane, reg = fragment_owner(op, r, c)
                ax.add_patch(plt.Rectangle((c, top - 1 - r), 1, 1, color=cmap(lane % 20), alpha=0.35 + 0.4 * (lane // 20 % 2)))
                ax.text(c + 0.5, top - 0.5 - r, f"{lane}\n{op.lower()}{reg}", ha="center", va="center", fontsize=6.5)
        ax.set_xlim(0, cols)
        ax.set_ylim(0, 16)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=9, y=top / 16)
    return axes


def draw_tma_boxes(ax, h0: int = 0, w0: int = 0, ph: int = 8, pw: int = 8, size: tuple = (56, 56),
                   taps=((0, 0), (1, 1), (2, 2))):
    """dy' around a block's patch: the image's corner, the patch (dx positions), and the boxes of
    a few taps, each one copy instruction; the part of a box outside the image is hatched (zeros)."""
    import matplotlib.pyplot as plt
    boxes = {b["tap"]: b for b in tma_boxes(h0, w0, ph, pw, size)}
    lo, hi = min(h0, w0) - 2, max(h0 + ph, w0 + pw) + 2
    ax.add_patch(plt.Rectangle((0, 0), size[1], size[0], facecolor="0.93", edgecolor="0.3", lw=1.5))
    ax.add_patch(plt.Rectangle((w0, h0), pw, ph, facecolor="none", edgecolor="k", lw=2.5, ls="--"))
    for (r, s), color in zip(taps, ("tab:blue", "tab:orange", "tab:red")):
        b = boxes[r, s]
        ax.add_patch(plt.Rectangle((b["col"] + 0.08 * r, b["row"] + 0.08 * r), pw, ph, facecolor=color, alpha=0.18,
                                   edgecolor=color, lw=2, label=f"tap ({r}, {s}): box from ({b['row']}, {b['col']}), "
                                   f"{b['zeros']} zero-filled"))
    ax.add_patch(plt.Rectangle((lo, lo), -lo, hi - lo, facecolor="none", hatch="//", edgecolor="0.6", lw=0))
    ax.add_patch(plt.Rectangle((0, lo), hi, -lo, facecolor="none", hatch="//", edgecolor="0.6", lw=0))
    ax.set_xlim(lo, hi)
    ax.set_ylim(hi, lo)
    ax.set_aspect("equal")
    ax.set_xlabel("column of dy' (ow)")
    ax.set_ylabel("row of dy' (oh)")
    ax.set_title(f"dashed: the block's {ph} x {pw} positions of dx (per image); hatched: outside the image")
    ax.legend(loc="lower right", fontsize=8)
    return ax
