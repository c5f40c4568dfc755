"""The course's two charts: the speed-up ladder across stages, and the roofline.

Both take the dicts that helpers.bench.run returns (or that results/ holds), so a chapter plots
this device's run beside the recorded GPU runs with the same call. Every panel is titled with
the device it came from.
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt

from .summary import geomean, summary
from .results import device_label


def ladder(*runs, metric: str = "gflops", title: str | None = None, highlight: str | None = None):
    """One panel per run: geometric-mean GFLOP/s (``metric="gbps"``: GB/s) of each stage over the run's layers.

    Whiskers show the interquartile range of the timed runs (the geometric mean taken at each
    layer's first and third quartile of time). Bars are annotated with the speed-up over the op's first stage; a dashed line marks the
    vendor library (cuDNN fp32, or the run's vendor ``name``, one line per precision) where the run timed it. With
    ``metric="gbps"`` a dotted line marks the run's measured copy bandwidth. ``highlight``
    colours one stage.
    """
    runs = [r for r in runs if r]
    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 3.8), squeeze=False)
    for ax, run in zip(axes[0], runs):
        s = summary(run)
        keys = list(s)
        vals = [s[k][metric] for k in keys]
        colors = ["tab:orange" if highlight and k.endswith(highlight) else "tab:blue" for k in keys]
        bars = ax.bar(range(len(keys)), vals, color=colors)
        # whiskers: the same geometric mean at each layer's first and third quartile of time
        lo, hi = [], []
        for k, v in zip(keys, vals):
            rows = [r for r in run["rows"] if r["key"] == k and r.get("q1_ms") and r.get("q3_ms")]
            lo.append(v - geomean(r[metric] * r["median_ms"] / r["q3_ms"] for r in rows) if rows else 0.0)
            hi.append(geomean(r[metric] * r["median_ms"] / r["q1_ms"] for r in rows) - v if rows else 0.0)
        ax.errorbar(range(len(keys)), vals, yerr=[lo, hi], fmt="none", ecolor="black", elinewidth=1, capsize=3)
        for b, k, up in zip(bars, keys, hi):
            x = s[k]["x_first"]
            if not math.isnan(x):                 # above the whisker, so the two never overlap
                ax.annotate(f"x{x:.1f}", (b.get_x() + b.get_width() / 2, b.get_height() + up),
                            ha="center", va="bottom", fontsize=8, zorder=5,   # over the lines below
                            bbox=dict(fc="white", ec="none", alpha=0.85, pad=0.6))
        # one dashed line per precision the vendor was timed in (chapter 13's runs have several)
        for precision in dict.fromkeys(r.get("precision", "fp32") for r in run.get("vendor", [])):
            rows = [r for r in run["vendor"] if r.get("precision", "fp32") == precision]
            v = geomean(r[metric] for r in rows)
            name = rows[0].get("name", "cuDNN fp32") + (f" {precision}" if "precision" in rows[0] else "")
            ax.axhline(v, ls="--", color="k", lw=1)
            ax.annotate(name, (1.0, v), xycoords=("axes fraction", "data"), xytext=(2, 0),
                        textcoords="offset points", ha="left", va="center", fontsize=8)
        if metric == "gbps" and "roofline" in run:
            bw = run["roofline"]["copy_gbps"]
            ax.axhline(bw, ls=":", color="tab:red", lw=1.5)
            ax.annotate(f"measured copy {bw:.0f} GB/s", (-0.5, bw), xytext=(0, 2), textcoords="offset points",
                        ha="left", va="bottom", fontsize=8, color="tab:red")
        if vals and min(vals) > 0 and max(vals) / min(vals) > 30:   # one bar would vanish: log scale
            ax.set_yscale("log")
            ax.set_title("log scale", loc="right", fontsize=7)
            ax.set_ylim(top=ax.get_ylim()[1] * 2.0)               # room for the labels at the top
        else:
            ax.set_ylim(top=ax.get_ylim()[1] * 1.1)
        ax.set_xticks(range(len(keys)), keys, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel({"gflops": "GFLOP/s (geometric mean)", "gbps": "GB/s (geometric mean)"}.get(metric, metric)
                      + "\nwhiskers: interquartile range", fontsize=8)
        ax.set_title(f"{device_label(run).replace(' (', chr(10) + '(', 1)}\n{run['op']} on '{run['layer_set']}'",
                     fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def roofline(run: dict, ax=None, stages=None):
    """Each (stage, layer) as a point at its arithmetic intensity under the measured roofs."""
    roof = run["roofline"]
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    bw, peak = roof["copy_gbps"], roof["fma_gflops"]
    xs = [2**i for i in range(-4, 12)]
    ax.loglog(xs, [min(peak, bw * x) for x in xs], "k-", lw=1.5, label=f"roofline: {bw:.0f} GB/s, {peak:.0f} GFLOP/s")
    keys = list(dict.fromkeys(r["key"] for r in run["rows"]))
    for key in stages or keys:
        rows = [r for r in run["rows"] if r["key"] == key]
        ax.loglog([r["flops"] / r["min_bytes"] for r in rows], [r["gflops"] for r in rows], "o", label=key, alpha=0.8)
    ax.set_xlabel("arithmetic intensity (FLOP per minimal byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(device_label(run), fontsize=9)
    ax.legend(fontsize=7)
    return ax
