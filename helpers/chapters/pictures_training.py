"""Chapter 15's tables and charts: the weight gradient's ladder (its GEMM view, one Winograd tile,
the recorded run against cuDNN), the chooser's stages per layer, where a step's time goes, the loss
curves of the course and PyTorch."""
from __future__ import annotations

import re

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
    """A step's median wall time split into the kernels (sum of the device medians) and the rest
    (transfers, gaps between launches, Python); a run recorded with the earlier step, whose head,
    loss and SGD ran in NumPy on the host, also shows that host part (its SGD is in the rest)."""
    wall = float(np.median(record["step_ms"]))
    kernels = sum(r["median_ms"] for r in record["ops"] if r["where"] == "device")
    host = sum(r["median_ms"] for r in record["ops"] if r["where"] == "host")
    rest = 100 * max(wall - kernels - host, 0) / wall
    from ..train.run import host_step
    if not host_step(record):
        return (f"of a step's median wall time: kernels {100 * kernels / wall:.0f} %, the rest (the transfers, "
                f"gaps between launches, Python) {rest:.0f} %")
    return (f"of a step's median wall time: kernels {100 * kernels / wall:.0f} %, host NumPy (head, loss) "
            f"{100 * host / wall:.0f} %, the rest (transfers, gaps between launches, the host's SGD, Python) {rest:.0f} %")


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


# The weight gradient's ladder (section 1): its GEMM view, one Winograd tile, the recorded run.

def wgrad_gemm_view(layers) -> str:
    """Per layer: the outputs and the terms behind each, for the weight gradient and the input
    gradient (on average: K*R*S*OH*OW / (H*W), fewer with a stride); the weight gradient as one GEMM (M = K, N = C*R*S, reduction N*OH*OW) and how many
    of stage 03's tiles (registry defaults) it has, before and after its reduction is split."""
    from ..ops.reference import output_size
    from ..stages import get_stage
    d = get_stage("conv_wgrad", "igemm").defines
    tm, tn, sl = d["TM"], d["TN"], d["SLICE"]
    lines = [f"{'layer':<14}{'dw outputs':>11}{'terms each':>12}{'dx outputs':>12}{'terms each':>11}"
             f"{'GEMM M=K':>10}{'N=C*R*S':>9}{'reduction':>11}{f'{tm}x{tn} tiles':>12}{'+ split':>9}"]
    for lay in layers:
        n, c, k, r = lay["n"], lay["c"], lay["k"], lay["kernel"]
        oh = output_size(lay["h"], r, lay["stride"], lay["padding"])
        ow = output_size(lay["w"], r, lay["stride"], lay["padding"])
        depth = n * oh * ow
        tiles = -(-k // tm) * -(-(c * r * r) // tn)
        lines.append(f"{lay['name']:<14}{c * k * r * r:>11,}{depth:>12,}{n * c * lay['h'] * lay['w']:>12,}"
                     f"{round(k * r * r * oh * ow / (lay['h'] * lay['w'])):>11,}{k:>10,}{c * r * r:>9,}{depth:>11,}{tiles:>12,}{tiles * -(-depth // sl):>9,}")
    lines.append(f"(+ split: work-groups once the reduction is cut into slices of SLICE = {sl:,} positions, "
                 f"stage 03's default)")
    return "\n".join(lines)


def draw_wgrad_tile(h: int = 8, w: int = 8, tile: tuple = (1, 0)):
    """One tile's contribution to dw[c][k]: the 6x6 patch of x (channel c, padding 1) under the
    4x4 tile of dy' (channel k), and the 3x3 taps they add to (chapter 12's tile picture, m = 4)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    from .pictures_winograd import draw_tiles
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [4, 1]})
    draw_tiles(a, h=h, w=w, padding=1, tile=tile, m=4, names=("x, channel c,", "dy', channel k,"))
    for i in range(3):
        for j in range(3):
            b.add_patch(Rectangle((j, i), 1, 1, fc="tab:green", alpha=0.35, ec="k", lw=1))
    b.text(1.5, -0.4, "dw[c][k]: 3x3 taps", ha="center", va="bottom", fontsize=8)
    b.text(1.5, 3.4, "from this tile:\n9 x 16 = 144 products direct,\n6 x 6 = 36 through Winograd",
           ha="center", va="top", fontsize=8)
    b.set_xlim(-0.8, 3.8)
    b.set_ylim(5.2, -1.6)
    b.set_aspect("equal")
    b.axis("off")
    fig.tight_layout()
    return fig


def _vendor_algorithm(names) -> str:
    """cuDNN's algorithm, read from the names of the kernels it launched."""
    text = " ".join(names).lower()
    return "Winograd 4x4" if "winograd" in text else "FFT" if "fft" in text else "direct or GEMM"


def wgrad_recorded(run: dict) -> str:
    """A recorded conv_wgrad run per layer: what stage 04 ran, stages 03 and 04 against cuDNN, and
    cuDNN's own rate counted as a direct convolution against the measured FMA peak."""
    peak = run["roofline"]["fma_gflops"]
    rows = {(r["layer"], r["key"]): r for r in run["rows"]}
    vendor = {v["layer"]: v for v in run["vendor"]}
    lines = [f"measured FMA peak {peak / 1e3:.1f} TFLOP/s; rates count 2*N*K*OH*OW*C*R*S flops (a direct convolution)",
             f"{'layer':<14}{'04 ran':<14}{'02 x naive':>11}{'03 x cuDNN':>11}{'04 x cuDNN':>11}{'04 % peak':>10}"
             f"{'cuDNN TFLOP/s':>15}{'% peak':>8}  cuDNN's kernels"]
    for layer, v in vendor.items():
        r2, r3, r4 = rows[(layer, "02_split_reduction")], rows[(layer, "03_igemm")], rows[(layer, "04_winograd")]
        lines.append(f"{layer:<14}{r4['ran']:<14}{r2['x_first']:>11.2f}{r3['x_vendor']:>11.2f}{r4['x_vendor']:>11.2f}"
                     f"{r4['pct_fma_peak']:>10.1f}{v['gflops'] / 1e3:>15.1f}{100 * v['gflops'] / peak:>8.1f}"
                     f"  {_vendor_algorithm(v.get('kernel_names', []))}")
    lines.append("the kernels cuDNN launched per call (PyTorch's profiler):")
    for layer, v in vendor.items():
        names = dict.fromkeys(re.sub(r"^void |[<(].*$|_tilesize.*$", "", n).strip() for n in v.get("kernel_names", []))
        lines.append(f"  {layer:<14}{', '.join(names)}")
    return "\n".join(lines)


def wgrad_stages_against_vendor(run: dict, stages=("03_igemm", "04_winograd", "06_igemm_blocked")) -> str:
    """A recorded conv_wgrad run side by side: each stage's median ms (what ran, where it handed the
    layer on), its share of the FMA peak, and each against the vendor timed in the same run."""
    rows = {(r["layer"], r["key"]): r for r in run["rows"]}
    vendor = {v["layer"]: v for v in run["vendor"]}
    head = f"{'layer':<14}" + "".join(f"{s:>24}" for s in stages) + f"{'cuDNN ms':>10}"
    lines = ["median ms (x cuDNN, % of the FMA peak); a stage that handed the layer on names the stage that ran", head]
    for layer, v in vendor.items():
        cells = []
        for s in stages:
            r = rows.get((layer, s))
            ran = "" if r is None or r["ran"] == s else f" {r['ran'][:2]}"
            cells.append("-".rjust(24) if r is None else
                         f"{r['median_ms']:.3f} (x{r['x_vendor']:.2f},{r['pct_fma_peak']:4.0f}%){ran}".rjust(24))
        lines.append(f"{layer:<14}" + "".join(cells) + f"{v['median_ms']:>10.3f}")
    return "\n".join(lines)
