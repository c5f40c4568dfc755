"""Chapter 13's figure of the recorded runs: each tensor-core stage's rate per layer, beside
cuDNN in each precision and the CUDA cores' measured FMA rate (the ceiling of chapters 02-12).

    from helpers.chapters.pictures_tensor_cores import recorded_bars
    recorded_bars(run, stages)          # run: a recorded conv_dgrad run of the tensor-core stages
"""
from __future__ import annotations

import numpy as np

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
