"""Chapter 15's tables and charts: the chooser's stages per layer, where a step's time goes, the
loss curves of the course and PyTorch."""
from __future__ import annotations

import numpy as np

OP_ORDER = ("conv_forward", "batchnorm_forward", "relu_pool", "pool_backward", "batchnorm_backward", "conv_wgrad",
            "conv_dgrad")


def choices_table(record: dict) -> str:
    """Which stage ran each op of each layer, and who chose it."""
    lines = [f"{'layer':<7}{'op':<20}{'stage':<18}chosen by"]
    for c in record["choices"]:
        how = {"auto": "stage auto", "chooser": "the chooser (runner.choose_stage)"}.get(c["how"], c["how"])
        lines.append(f"{c['layer']:<7}{c['op']:<20}{c['stage']:<18}{how}")
    return "\n".join(lines)


def time_table(record: dict, twin: dict | None = None) -> str:
    """Median device time per layer and op (profiling events), host time, and the step's wall time."""
    rows = sorted(record["ops"], key=lambda r: (r["layer"], OP_ORDER.index(r["op"]) if r["op"] in OP_ORDER else 9))
    lines = [f"{'layer':<7}{'op':<28}{'stage':<18}{'median ms':>10}{'IQR ms':>18}"]
    for r in rows:
        lines.append(f"{r['layer']:<7}{r['op']:<28}{r['stage']:<18}{r['median_ms']:>10.3f}"
                     f"{r['q1_ms']:>9.3f}-{r['q3_ms']:<8.3f}")
    device = sum(r["median_ms"] for r in rows if r["where"] == "device")
    lines.append(f"sum of the device medians: {device:.3f} ms; median wall time of a step: "
                 f"{np.median(record['step_ms']):.3f} ms; median epoch: {np.median(record['epoch_ms']) / 1e3:.3f} s")
    if twin:
        lines.append(f"PyTorch ({twin['device']}, {twin.get('threads', '?')} threads): median step "
                     f"{np.median(twin['step_ms']):.3f} ms, median epoch {np.median(twin['epoch_ms']) / 1e3:.3f} s; "
                     f"the course's step takes x{np.median(record['step_ms']) / np.median(twin['step_ms']):.2f} PyTorch's")
    return "\n".join(lines)


def step_split(record: dict) -> str:
    """A step's median wall time split into the kernels (sum of the device medians), the host's
    NumPy part, and the rest (transfers, gaps between launches, SGD, Python)."""
    wall = float(np.median(record["step_ms"]))
    kernels = sum(r["median_ms"] for r in record["ops"] if r["where"] == "device")
    host = sum(r["median_ms"] for r in record["ops"] if r["where"] == "host")
    return (f"of a step's median wall time: kernels {100 * kernels / wall:.0f} %, host NumPy {100 * host / wall:.0f} %, "
            f"the rest (transfers, gaps between launches, SGD, Python) {100 * max(wall - kernels - host, 0) / wall:.0f} %")


def plot_breakdown(record: dict, title: str):
    """One horizontal bar per layer and op (stage in the label), device ops and the host's part."""
    import matplotlib.pyplot as plt
    rows = sorted(record["ops"], key=lambda r: -r["median_ms"])
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.2))
    labels = [f"{r['layer']} {r['op']} ({r['stage']})" if r["layer"] != "host" else f"host: {r['op']}" for r in rows]
    colors = ["tab:blue" if r["where"] == "device" else "tab:gray" for r in rows]
    med = np.array([r["median_ms"] for r in rows])
    err = np.array([[r["median_ms"] - r["q1_ms"], r["q3_ms"] - r["median_ms"]] for r in rows]).T
    ax.barh(labels, med, xerr=err, color=colors)
    ax.invert_yaxis()
    ax.set_xlabel("median ms per step (bars: interquartile range); blue: device, grey: host")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_losses(course: dict, twin: dict | None, title: str, twin_label: str = "PyTorch"):
    """Both loss curves over the steps, and their relative difference."""
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.4))
    a.plot(course["losses"], label="course stages", lw=2)
    if twin:
        a.plot(twin["losses"], "--", label=twin_label, lw=1.5)
        n = min(len(course["losses"]), len(twin["losses"]))
        c, t = np.array(course["losses"][:n]), np.array(twin["losses"][:n])
        b.semilogy(np.abs(c - t) / np.abs(t) + 1e-12)
        b.set_xlabel("step")
        b.set_ylabel("|course - PyTorch| / PyTorch")
    a.set_xlabel("step")
    a.set_ylabel("training loss (cross-entropy)")
    a.legend()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
