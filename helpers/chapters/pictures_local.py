"""Pictures for chapters 09-10 (local memory, bank conflicts): which bytes a work-group copies, how
often each global value is read (the model in helpers/chapters/local.py) against the roofline, a
tile-size explorer, the bank map of a warp's access, and the recorded runs of the chapters' stages.
(Nsight Compute's counts beside the bank model: helpers/chapters/bank_evidence.py.)"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from . import local

# A Hopper SM (H100, H200): what limits how many work-groups share it. NVIDIA's published limits.
HOPPER = {"local_bytes_per_cu": 228 * 1024, "local_bytes_per_group": 48 * 1024,
          "work_items_per_cu": 2048, "groups_per_cu": 32}


def draw_tile_loads(ax, h: int = 14, w: int = 14, tx: int = 8, ty: int = 4, kh: int = 3, kw: int = 3,
                    pad: int = 1, tile=(1, 0)):
    """dy (stride 1, 'same' padding) with one work-group's tile of dx drawn on it: the patch it
    copies (the tile grown by the kernel's halo), and the part of the patch outside the tensor
    (stored as zeros, never read from global memory)."""
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    ty0, tx0 = tile[0] * ty, tile[1] * tx
    r0, c0 = ty0 + pad - (kh - 1), tx0 + pad - (kw - 1)
    ph, pw = ty + kh - 1, tx + kw - 1
    for i in range(-2, oh + 2):
        for j in range(-2, ow + 2):
            inside = 0 <= i < oh and 0 <= j < ow
            in_patch = r0 <= i < r0 + ph and c0 <= j < c0 + pw
            color = ("tab:blue" if inside else "mistyrose") if in_patch else ("whitesmoke" if inside else "white")
            ax.add_patch(Rectangle((j, -i), 1, 1, facecolor=color, edgecolor="lightgray", lw=0.5))
    # the tile of dx this group computes, drawn where its positions sit (x + pad - (kw-1)//2 for 'same')
    ax.add_patch(Rectangle((tx0 + pad - (kw - 1) // 2, -(ty0 + pad - (kh - 1) // 2 + ty - 1)), tx, ty,
                           fill=False, edgecolor="tab:orange", lw=2.5))
    ax.add_patch(Rectangle((0, -(oh - 1)), ow, oh, fill=False, edgecolor="black", lw=1.2))
    ax.set_xlim(-2.5, ow + 2.5)
    ax.set_ylim(-(oh + 2.5), 3.5)
    ax.set_aspect("equal")
    ax.axis("off")
    copied = sum(0 <= i < oh and 0 <= j < ow for i in range(r0, r0 + ph) for j in range(c0, c0 + pw))
    ax.set_title(f"dy {oh}x{ow}: a {ty}x{tx} tile of dx (orange) copies a {ph}x{pw} patch,\n"
                 f"{copied} values from global memory (blue), {ph * pw - copied} zeros (pink)", fontsize=8)
    return {"patch": ph * pw, "from_global": copied, "zeros": ph * pw - copied}


def groups_per_cu(facts: dict, limits: dict = HOPPER) -> dict:
    """How many work-groups of a tile fit on one compute unit, and which limit decides it."""
    by = {"local memory": limits["local_bytes_per_cu"] // max(facts["local_bytes"], 1),
          "work-items": limits["work_items_per_cu"] // facts["LS"],
          "groups": limits["groups_per_cu"]}
    limit = min(by, key=by.get)
    return {"groups": by[limit], "limit": limit, "by": by}


def explain_tile(d: dict, dims: dict) -> list[str]:
    """The explorer's text: local memory, work-items, groups per compute unit, reuse."""
    f = local.tile_facts(d, dims["KH"], dims["KW"])
    g = groups_per_cu(f)
    naive, tiled = local.reuse(dims), local.reuse(dims, d)
    fit = "fits" if f["local_bytes"] <= local.LOCAL_LIMIT and f["LS"] <= local.GROUP_LIMIT else "does not fit"
    return [f"tile {d['TY']}x{d['TX']} positions x {d['CB']} channels, chunks of {d['KC']} output channels, "
            f"{d.get('XPW', 1)}x{d.get('CPW', 1)} per work-item",
            f"local memory {f['local_bytes']:,} B ({fit} the course's {local.LOCAL_LIMIT:,} B), "
            f"{f['LS']} work-items, {f['accumulators']} sums each",
            f"on a Hopper SM: {g['groups']} groups at once (limited by {g['limit']}: {g['by']})",
            f"each dy value read {tiled['dy']:.2f} times from global memory (one per element: {naive['dy']:.0f}), "
            f"each weight {tiled['w']:.1f} times (one per element: {naive['w']:.0f})",
            f"FLOP per byte read from global memory: {tiled['flops_per_byte']:.1f} "
            f"(one per element: {naive['flops_per_byte']:.2f})"]


def tile_explorer(dims: dict | None = None):
    """ipywidgets sliders for the tile; prints explain_tile for a layer (default res64@56, N=64)."""
    import ipywidgets as widgets
    dims = dims or dict(N=64, C=64, H=56, W=56, K=64, OH=56, OW=56, KH=3, KW=3)
    opts = dict(continuous_update=False)

    def show(TX, TY, CB, KC, XPW, CPW, buffers):
        d = {"TX": TX, "TY": TY, "CB": CB, "KC": KC, "XPW": XPW, "CPW": CPW, "BUFFERS": buffers}
        try:
            local.check_params({k: v for k, v in d.items()}, dims["KH"], dims["KW"])
        except ValueError as err:
            print("not a valid tile for the kernels:", err)
        print("\n".join(explain_tile(d, dims)))

    return widgets.interact(show, TX=widgets.SelectionSlider(options=[8, 16, 32, 64], value=32, **opts),
                            TY=widgets.SelectionSlider(options=[1, 2, 4, 8], value=4, **opts),
                            CB=widgets.SelectionSlider(options=[4, 8, 16, 32, 64], value=32, **opts),
                            KC=widgets.SelectionSlider(options=[2, 4, 8, 16], value=4, **opts),
                            XPW=widgets.SelectionSlider(options=[1, 2, 4, 8], value=8, **opts),
                            CPW=widgets.SelectionSlider(options=[1, 2, 4, 8], value=4, **opts),
                            buffers=widgets.SelectionSlider(options=[1, 2], value=2, **opts))


def reuse_on_roofline(run: dict, layers: list[dict], stages: dict, ax=None):
    """Each layer's intensity counted from the model (FLOPs per byte the stage reads from global
    memory: one element per work-item without a tile, the tile's copies with one) under the
    recorded device's roofline, at the speed the run measured for it (stages: key -> tile or None)."""
    roof = run["roofline"]
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4))
    bw, peak = roof["copy_gbps"], roof["fma_gflops"]
    xs = [2**i for i in range(-3, 9)]
    ax.loglog(xs, [min(peak, bw * x) for x in xs], "k-", lw=1.2, label=f"roofline {bw:.0f} GB/s, {peak / 1000:.0f} TFLOP/s")
    rows = {(r["layer"], r["key"]): r for r in run["rows"]}
    points = []
    for key, tile in stages.items():
        xy = []
        for lay in layers:
            row = rows.get((lay["name"], key))
            if row is None or lay["stride"] != 1:
                continue
            dims = layer_dims(lay)
            d = None if tile is None else local.params({**tile, **row.get("defines", {})})
            xy.append((local.reuse(dims, d)["flops_per_byte"], row["gflops"], lay["name"]))
        ax.loglog([p[0] for p in xy], [p[1] for p in xy], "o", label=key)
        points += [(key, *p) for p in xy]
    ax.set_xlabel("FLOP per byte read from global memory (model)")
    ax.set_ylabel("GFLOP/s (measured)")
    ax.legend(fontsize=7)
    return points


def layer_dims(lay: dict) -> dict:
    """conv_dgrad's named sizes for a layer of helpers/ops/layers.py."""
    k, s, p = lay["kernel"], lay["stride"], lay["padding"]
    oh, ow = (lay["h"] + 2 * p - k) // s + 1, (lay["w"] + 2 * p - k) // s + 1
    return dict(N=lay["n"], C=lay["c"], H=lay["h"], W=lay["w"], K=lay["k"], OH=oh, OW=ow, KH=k, KW=k)


def recorded_runs(pattern: str = "run*_conv_dgrad_*.json") -> list[dict]:
    """GPU runs in results/local/ that hold chapter 09 or 10 stages, oldest first."""
    import json
    from ..analysis.results import RESULTS
    runs = []
    for path in sorted((RESULTS / "local").glob(pattern)):
        run = json.loads(path.read_text())
        if run["device"].get("type") == "GPU" and any(r["number"] in (9, 10) for r in run["rows"]):
            run["file"] = path.name
            runs.append(run)
    return runs


def recorded_local(min_pct: float = 50.0, over_08: float = 4.0, show=("02", "08", "09"), ours: str = "09",
                   pattern: str = "run*_conv_dgrad_resnet50_*.json") -> list[str]:
    """Per recorded run: each layer's times of stages 08 and 09 (% of the measured FMA peak), the
    targets (best stage 09 >= min_pct % of the peak, geometric mean over the stride-1 layers;
    >= over_08 x stage 08 on res64@56; the stride-2 layer no slower than stage 08)."""
    from ..analysis.summary import geomean
    runs = [run for run in recorded_runs(pattern) if any(r["key"].startswith(ours) for r in run["rows"])]
    if not runs:
        return [f"No GPU run of stages {ours} is recorded in results/local/ yet."]
    out = []
    for run in runs:
        peak = run["roofline"]["fma_gflops"]
        rows = {(r["layer"], r["key"]): r for r in run["rows"]}
        keys = [k for k in dict.fromkeys(r["key"] for r in run["rows"]) if k[:2] in show]
        layers = list(dict.fromkeys(r["layer"] for r in run["rows"]))
        out.append(f"{run['device']['name']} (driver {run['device']['driver']}, {run['date'][:10]}, "
                   f"{run['file']}): measured FMA peak {peak / 1000:.1f} TFLOP/s; ms (% of the peak)")
        out.append("   " + f"{'layer':<14}" + "".join(f"{k:>22}" for k in keys))
        for lay in layers:
            cells = [f"{rows[(lay, k)]['median_ms']:8.3f} ({rows[(lay, k)]['gflops'] / peak:4.0%})"
                     if (lay, k) in rows else "" for k in keys]
            out.append("   " + f"{lay:<14}" + "".join(f"{c:>22}" for c in cells))
        vendor = {v["layer"]: v for v in run.get("vendor", [])}
        if vendor:
            out.append("   cuDNN fp32: " + ", ".join(f"{lay} {vendor[lay]['median_ms']:.3f} ms "
                                                     f"({vendor[lay]['gflops'] / peak:.0%})" for lay in layers if lay in vendor))
        flat = [lay for lay in layers if "/s" not in lay]
        mine = [k for k in keys if k.startswith(ours)]
        pct = {k: geomean(rows[(lay, k)]["gflops"] for lay in flat) / peak * 100 for k in mine}
        out.append("   geometric mean over the stride-1 layers, % of the FMA peak: "
                   + ", ".join(f"{k} {v:.1f}%" for k, v in pct.items()))
        best = max(pct, key=pct.get)
        out.append(f"   best stage {ours} over the stride-1 layers: {best}, {pct[best]:.1f}% of the FMA peak "
                   f"(geometric mean) -> target {min_pct:.0f}% {'met' if pct[best] >= min_pct else 'not met'}")
        if ("res64@56", "08_width") in rows:
            x = rows[("res64@56", "08_width")]["median_ms"] / rows[("res64@56", best)]["median_ms"]
            out.append(f"   res64@56: {best} is x{x:.2f} stage 08 -> target x{over_08:.0f} "
                       f"{'met' if x >= over_08 else 'not met'}")
            s2 = [lay for lay in layers if "/s" in lay]
            for lay in s2:
                t8, t9 = rows[(lay, "08_width")], rows[(lay, best)]
                out.append(f"   {lay}: {best} runs {t9['ran']} (the fallback), "
                           f"{t9['median_ms']:.3f} ms against stage 08's {t8['median_ms']:.3f} ms")
    return out


def bank_map_widget(d: dict | None = None):
    """ipywidgets: pick the slab layout (stage), the access, the warp and the step; draws which
    bank each work-item of the warp hits, and the passes (helpers/chapters/local.py: warp_lanes)."""
    import ipywidgets as widgets
    from .banks import draw_lanes
    d = d or {"TX": 32, "TY": 4, "CB": 32, "KC": 4, "XPW": 8, "CPW": 4}

    def show(layout, access, warp, step):
        lanes = local.warp_lanes(layout, access, d, warp=warp, step=step)
        if not any(lanes):
            print("no work-item of this warp takes part in this step")
            return
        fig, ax = plt.subplots(figsize=(10, 3))
        draw_lanes(ax, lanes, f"{layout}, {access}, warp {warp}, step {step}: {{passes}} pass(es)")
        plt.show()

    ls = local.tile_facts(d)["LS"]
    return widgets.interact(show, layout=list(local.LAYOUTS), access=list(local.ACCESSES),
                            warp=widgets.IntSlider(min=0, max=max(0, ls // 32 - 1), value=0),
                            step=widgets.IntSlider(min=0, max=8, value=0))


def same_tile_pairs(before: str = "10_padded", after: str = "10_hoisted",
                    pattern: str = "run4_same_tile*_conv_dgrad_resnet50_*.json") -> list[str]:
    """Two stages timed in one run at one tile (bench --defines), per recorded run: each layer's
    medians, t(before) / t(after) and the interquartile ranges; the geometric mean over the
    stride-1 layers."""
    from ..analysis.summary import geomean
    out = []
    for run in recorded_runs(pattern):
        rows = {(r["layer"], r["key"]): r for r in run["rows"]}
        d = next(r["defines"] for r in run["rows"] if r["key"] == after)
        out.append(f"{run['device']['name']} ({run['date'][:10]}, {run['file']}): both at "
                   f"TX={d['TX']}, TY={d['TY']}, XPW={d['XPW']}, CPW={d['CPW']}, CB={d['CB']}, KC={d['KC']}")
        ratios = {}
        for lay in dict.fromkeys(r["layer"] for r in run["rows"]):
            a, b = rows[(lay, before)], rows[(lay, after)]
            ratios[lay] = a["median_ms"] / b["median_ms"]
            ran = "" if b["ran"] == after else f" (both ran {b['ran']}, their fallback)"
            out.append(f"   {lay:<14}{before} {a['median_ms']:.4f} ms ({a['q1_ms']:.4f}-{a['q3_ms']:.4f}), "
                       f"{after} {b['median_ms']:.4f} ms ({b['q1_ms']:.4f}-{b['q3_ms']:.4f}): x{ratios[lay]:.2f}{ran}")
        out.append(f"   geometric mean over the stride-1 layers: x{geomean(v for k, v in ratios.items() if '/s' not in k):.2f}")
    return out or ["No run of the two stages at one tile is recorded in results/local/ yet."]


def twin_times(pattern: str = "run5_twins_conv_dgrad_*.json") -> list[str]:
    """Chapters 09-10's OpenCL stages against their CUDA twins, timed in one run at the same tiles
    (results/local/run5_twins_*: `./course record --run local-twins-<set>`). Per layer set and
    stage: t(CUDA twin) / t(OpenCL stage) on each stride-1 layer (above 1: the twin is slower), on
    how many of them the interquartile ranges are apart, and the geometric mean; what the stride-2
    layers ran instead; then both builds' registers at the tuned tiles (results/registers_local_*)."""
    from ..analysis.summary import geomean
    from ..registers import recorded_registers
    from ..stages import get_stage
    order = ("resnet50", "vgg16", "edge")
    runs = sorted(recorded_runs(pattern), key=lambda r: (order.index(r["layer_set"]) if r["layer_set"] in order
                                                          else len(order), r["file"]))
    if not runs:
        return ["No run of the OpenCL stages beside their CUDA twins is recorded in results/local/ yet "
                "(./course record --device nvidia --run local-twins-resnet50)."]
    out = []
    for run in runs:
        rows = {(r["layer"], r["key"]): r for r in run["rows"]}
        stages = [k for k in dict.fromkeys(r["key"] for r in run["rows"]) if not k.endswith("_cuda")]
        layers = list(dict.fromkeys(r["layer"] for r in run["rows"]))
        flat = [l for l in layers if all(rows[(l, s)]["ran"] == s for s in stages)]
        out += [f"{run['device']['name']} ({run['date'][:10]}, {run['file']}): t(CUDA twin) / t(OpenCL stage), same tile",
                f"  {'stage':<15}" + "".join(f"{l:>14}" for l in flat) + f"{'geomean':>10}{'IQRs apart':>12}"]
        for s in stages:
            a = [rows[(l, s)] for l in flat]
            b = [rows[(l, s + "_cuda")] for l in flat]
            x = [t["median_ms"] / o["median_ms"] for o, t in zip(a, b)]
            apart = sum(t["q1_ms"] > o["q3_ms"] or o["q1_ms"] > t["q3_ms"] for o, t in zip(a, b))
            out.append(f"  {s:<15}" + "".join(f"{v:>14.2f}" for v in x) + f"{geomean(x):>10.2f}{apart:>8} of {len(x)}")
        for l in layers:
            if l in flat:
                continue
            o, t = rows[(l, stages[-1])], rows[(l, stages[-1] + "_cuda")]
            out.append(f"  {l}: the OpenCL stages ran their fallback {o['ran']}, the twins "
                       f"{t['ran']}: x{t['median_ms'] / o['median_ms']:.2f}")
        out.append("")
    for rec in recorded_registers("local"):
        out.append(f"{rec['device']['name']} ({rec['date'][:10]}, `{rec['command']}`): registers per "
                   f"work-item on {rec['rows'][0]['layer']}, the OpenCL build and the CUDA twin at the same tile")
        for r in rec["rows"]:
            t, o, c = r["tile"], r["opencl"], r["cuda"]
            twin = f"{c['registers']:>4} ({c['local_bytes']} B local)" if c else "   -"
            out.append(f"  {get_stage('conv_dgrad', r['stage']).key:<15}{t['TX']}x{t['TY']} {t['XPW']}x{t['CPW']}"
                       f"   OpenCL {o['registers']:>4} ({o['spill_stores']} B spill stores)   CUDA twin {twin}")
    return out
