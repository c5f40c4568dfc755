"""Pictures for chapter 09 (local memory): which bytes a work-group copies, how often each global
value is read (the model in helpers/chapters/local.py) against the roofline, and a tile-size explorer."""
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
    from .pictures_winograd import draw_lanes
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


def three_way_table() -> list[str]:
    """Bank conflicts of a launch three ways: the simulator, ncu on the CUDA twin (results/local),
    and the recorded times (ncu's kernel time at the profiled batch; the twin's and the OpenCL
    stage's median at batch 64)."""
    import json
    from ..analysis.results import RESULTS
    path = RESULTS / "local" / "ncu_banks_conv_dgrad_nvidia-h200.json"
    if not path.is_file():
        return ["No ncu counts are recorded in results/local/ yet."]
    rec = json.loads(path.read_text())
    runs = recorded_runs("run2_conv_dgrad_resnet50_*.json")
    ocl = {(r["layer"], r["key"]): r for run in runs for r in run["rows"]}
    twin64 = {r["twin"]: r["median_ms"] for r in rec["twin_times_n64"]["rows"]}
    example = "10_padded" if "10_padded" in rec.get("commands", {}) else None
    how = (f"ncu through the engine, one run per stage with the tile shown, e.g. {example}: "
           f"`{rec['commands'][example]}`" if example else f"ncu: `{rec['command']}`")
    out = [f"{rec['device']} (driver {rec['driver']}, {rec['date']}); {how}",
           f"{'stage':<14} {'tile':>6} {'stores: sim':>12} {'ncu':>10} {'loads: sim':>11} {'ncu':>9} "
           f"{'ncu ms':>7} {'twin ms':>8} {'OpenCL ms':>10}"]
    for r in rec["rows"]:
        d = r["defines"]
        dims = dict(N=r["n"], C=64, H=56, W=56, K=64, OH=56, OW=56, KH=d["KH"], KW=d["KW"])
        sim = local.launch_conflicts(r["twin"][3:], {k: d[k] for k in ("TX", "TY", "CB", "KC", "XPW", "CPW")}, dims)
        o = ocl.get((r["layer"], r["twin"]))
        out.append(f"{r['twin']:<14} {d['TX']:>3}x{d['TY']:<2} {sim['store']:12,d} {r['shared_st_conflicts']:10,d} "
                   f"{sim['load']:11,d} {r['shared_ld_conflicts']:9,d} {r['ncu_time_ns'] / 1e6:7.3f} "
                   f"{twin64[r['twin']]:8.3f} {o['median_ms'] if o else float('nan'):10.3f}")
    out.append(f"(conflicts at batch {rec['rows'][0]['n']} of {rec['rows'][0]['layer']}; twin and OpenCL times at batch 64)")
    return out


RES64 = dict(C=64, H=56, W=56, K=64, OH=56, OW=56, KH=3, KW=3)   # res64@56, the layer ncu profiled
VARIANTS = (("10_transposed", "transposed", {}), ("10_padded", "padded", {}), ("10_swizzle", "swizzle", {}),
            ("10_swizzle ROWCOPY=1", "swizzle", {"ROWCOPY": 1}))


def predicted_stores(tiles=((32, 4), (32, 8)), n: int = 8) -> list[str]:
    """The simulator's store conflicts per launch of res64@56 (batch n) for each stage-10 layout and
    10_swizzle with ROWCOPY=1, at each tile, and the share of 10_transposed's (same tile) removed."""
    base = {"CB": 32, "KC": 4, "XPW": 8, "CPW": 4}
    dims = dict(RES64, N=n)
    out = [f"predicted store conflicts per launch, res64@56 at batch {n} (weight copy + dy copy)",
           f"{'stage':<22}" + "".join(f"{f'tile {tx}x{ty}':>16}{'removed':>9}" for tx, ty in tiles)]
    first = {}
    for label, layout, switch in VARIANTS:
        cells = ""
        for tx, ty in tiles:
            n_st = local.launch_conflicts(layout, {**base, "TX": tx, "TY": ty, **switch}, dims)["store"]
            first.setdefault((tx, ty), n_st)
            cells += f"{n_st:16,d}{1 - n_st / first[(tx, ty)]:9.1%}"
        out.append(f"{label:<22}{cells}")
    # the tiles ncu profiled (the search's choices): 10_transposed 32x8, 10_swizzle 32x4
    t8 = local.launch_conflicts("transposed", {**base, "TX": 32, "TY": 8}, dims)["store"]
    for label, switch in (("10_swizzle", {}), ("10_swizzle ROWCOPY=1", {"ROWCOPY": 1})):
        s4 = local.launch_conflicts("swizzle", {**base, "TX": 32, "TY": 4, **switch}, dims)["store"]
        out.append(f"recorded tiles: {label} at 32x4 removes {1 - s4 / t8:.1%} of 10_transposed's at 32x8")
    return out


def explained_loads() -> list[str]:
    """The load conflicts of the stage-10 twins: each read of a dy row per (depth, tap row) at the
    width the compiler issues it, its passes against a conflict-free access of that width, and
    the launch's total beside ncu's recorded count."""
    import json
    from ..analysis.results import RESULTS
    from .pictures_winograd import passes
    rec = json.loads((RESULTS / "local" / "ncu_banks_conv_dgrad_nvidia-h200.json").read_text())
    sass = json.loads((RESULTS / "local" / "sass_shared_conv_dgrad_10_sm90.json").read_text())
    out = [f"SASS of the twins ({sass['arch']}, {sass['compiler'].split(' (')[0]}), shared-memory instructions "
           f"of one chunk depth (loads) and of the two copies (stores):"]
    for r in sass["rows"]:
        d = r["defines"]
        name = r["twin"] + (" ROWCOPY=1" if d.get("ROWCOPY") else "")
        out.append(f"   {name:<20} tile {d['TX']}x{d['TY']}: "
                   + ", ".join(f"{n} {k}" for k, n in r["instructions"].items()))
    for r in rec["rows"]:
        if not r["twin"].startswith("10"):
            continue
        d = {k: r["defines"][k] for k in ("TX", "TY", "CB", "KC", "XPW", "CPW")}
        s = local._shape(d, 3, 3)
        reads = []
        for u in range(-(-s["NU"] // 4)):
            lanes = local.warp_lanes(r["twin"][3:], "dy read", d, u=u)
            width = len(lanes[0])
            reads.append(f"{4 * width} B: {passes(lanes)} passes (ideal {width})")
        sim = local.launch_conflicts(r["twin"][3:], d, dict(RES64, N=r["n"]))["load"]
        warp_chunks = (r["grid"][0] * r["grid"][1] * -(-s["LS"] // 32)) * -(-RES64["K"] // d["KC"])
        out.append(f"{r['twin']:<14} tile {d['TX']}x{d['TY']}: dy row = " + ", ".join(reads))
        out.append(f"{'':<14} load conflicts per launch: simulator {sim:,} ({sim // warp_chunks} per warp and chunk), "
                   f"ncu {r['shared_ld_conflicts']:,} ({sim / r['shared_ld_conflicts'] - 1:+.1%})")
    # the narrowed read, had it stayed 16 bytes: the same 4 passes, none of them a conflict
    d = {"TX": 32, "TY": 4, "CB": 32, "KC": 4, "XPW": 8, "CPW": 4}
    narrow = local.warp_lanes("swizzle", "dy read", d, u=2)
    whole = [[lane[0] + e for e in range(4)] for lane in narrow]
    out.append(f"the last read at 16 bytes instead: {passes(whole)} passes (ideal 4); at 8 bytes: "
               f"{passes(narrow)} passes (ideal 2)")
    return out


ROWCOPY_TARGET = 0.95   # share of 10_transposed's store conflicts (ncu) that 10_swizzle ROWCOPY=1 should remove


def limits_table() -> list[str]:
    """What limits chapters 09-10's stages once the conflicts are gone: ncu's counters on the CUDA
    twins at the recorded run's tiles (results/local/ncu_limits_*, written by `python -m
    helpers.ncu_banks --set limits`). Per twin: registers per work-item, active warps (% of the
    SM's 64), busy issue slots, the FFMA share of the issued instructions, the other instructions
    per warp and chunk of KC output channels, ncu's time and the three largest stall reasons
    (warps stalled per issued instruction); then ncu's FFMA count against the tile model's."""
    from ..analysis.results import load
    recs = load("local/ncu_limits_conv_dgrad_*.json")
    if not recs:
        return ["No ncu record of the limits is in results/local/ yet (python -m helpers.ncu_banks --set limits writes it)."]
    out = []
    for rec in recs:
        r0 = rec["rows"][0]
        out += [f"{rec['device']} (driver {rec['driver']}, {rec['date'][:10]}, `{rec['command']}`): "
                f"{r0['layer']} at batch {r0['n']}, one launch each",
                f"{'stage':<14}{'tile':>13}{'registers':>10}{'warps':>7}{'issue':>7}{'FFMA':>7}"
                f"{'other/warp/chunk':>17}{'of them LDS':>12}{'ncu ms':>8}  largest stalls"]
        for r in rec["rows"]:
            d = r["defines"]
            warps = r["grid"][0] * r["grid"][1] * r["block"][0] // 32
            chunks = -(-RES64["K"] // d["KC"])
            ffma = r["ffma_thread_instructions"] / 32
            stalls = sorted(((v, k[6:]) for k, v in r.items() if k.startswith("stall_") and k != "stall_selected"),
                            reverse=True)[:3]
            tile = f"{d['TX']}x{d['TY']} {d['XPW']}x{d['CPW']}"
            out.append(f"{r['twin']:<14}{tile:>13}{r['registers']:>10}{r['warps_active_pct']:>6.1f}%"
                       f"{r['issue_active_pct']:>6.1f}%{ffma / r['instructions']:>7.1%}"
                       f"{(r['instructions'] - ffma) / warps / chunks:>17.0f}"
                       f"{r['shared_ld_instructions'] / warps / chunks:>12.0f}{r['ncu_time_ns'] / 1e6:>8.3f}  "
                       + ", ".join(f"{name} {v:.2f}" for v, name in stalls))
        dims = dict(RES64, N=r0["n"])
        need = dims["N"] * dims["H"] * dims["W"] * dims["C"] * dims["K"] * dims["KH"] * dims["KW"]
        pairs = {(r["ffma_thread_instructions"], local.tile_fmas(dims, r["defines"])) for r in rec["rows"]}
        for counted, model in sorted(pairs):
            n = sum((r["ffma_thread_instructions"], local.tile_fmas(dims, r["defines"])) == (counted, model)
                    for r in rec["rows"])
            out.append(f"multiply-adds: ncu counts {counted:,} in {n} of the {len(rec['rows'])} launches, the tile "
                       f"model {model:,} ({'equal' if counted == model else 'DIFFERENT'}); the layer needs {need:,} "
                       f"(x{model / need:.3f})")
    return out


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


def rowcopy_counts() -> list[str]:
    """ncu's record of the ROWCOPY switch (results/local/ncu_banks_rowcopy_*, written by
    `python -m helpers.ncu_banks`): per twin, tile and ROWCOPY, the store conflicts beside the
    bank model's, the share of 10_transposed's removed, the load conflicts, and the stores' share
    of the shared-memory instructions; then the target."""
    from ..analysis.results import load
    recs = load("local/ncu_banks_rowcopy_conv_dgrad_*.json")
    if not recs:
        return ["No ncu record of ROWCOPY is in results/local/ yet (python -m helpers.ncu_banks writes it)."]
    out = []
    for rec in recs:
        rows = [r for r in rec["rows"] if r["twin"].startswith("10")]
        base = next(r for r in rows if r["twin"] == "10_transposed")
        bd = base["defines"]
        out += [f"{rec['device']} (driver {rec['driver']}, {rec['date'][:10]}, `{rec['command']}`): "
                f"{rows[0]['layer']} at batch {rows[0]['n']}, one launch each",
                f"{'stage':<22}{'tile':>6}{'stores: ncu':>13}{'model':>11}{'model/ncu':>10}"
                f"{'removed':>9}{'loads: ncu':>12}{'stores/shared instr.':>22}"]
        removed = {}
        for r in rows:
            d = r["defines"]
            tile = {k: d[k] for k in ("TX", "TY", "CB", "KC", "XPW", "CPW")}
            model = local.launch_conflicts(r["twin"][3:], {**tile, "ROWCOPY": d.get("ROWCOPY", 0)},
                                           dict(RES64, N=r["n"]))["store"]
            name, size = r["twin"] + (f" ROWCOPY={d['ROWCOPY']}" if "ROWCOPY" in d else ""), f"{d['TX']}x{d['TY']}"
            removed[(name, size)] = 1 - r["shared_st_conflicts"] / base["shared_st_conflicts"]
            share = r["shared_st_instructions"] / (r["shared_st_instructions"] + r["shared_ld_instructions"])
            out.append(f"{name:<22}{size:>6}{r['shared_st_conflicts']:13,d}{model:11,d}"
                       f"{model / r['shared_st_conflicts']:10.3f}{removed[(name, size)]:9.1%}"
                       f"{r['shared_ld_conflicts']:12,d}{share:22.1%}")
        out.append(f"removed: the share of 10_transposed's store conflicts (ncu, tile {bd['TX']}x{bd['TY']})")
        best = max(removed, key=removed.get)
        r = next(x for x in rows if x["twin"] == "10_swizzle" and x["defines"].get("ROWCOPY") == 1
                 and x["defines"]["TY"] == 4)
        both = 1 - ((r["shared_st_conflicts"] + r["shared_ld_conflicts"])
                    / (base["shared_st_conflicts"] + base["shared_ld_conflicts"]))
        got = removed[("10_swizzle ROWCOPY=1", "32x4")]
        out.append(f"target: {ROWCOPY_TARGET:.0%} of 10_transposed's store conflicts removed (ncu); 10_swizzle "
                   f"ROWCOPY=1 at the searched tile 32x4: {got:.1%} -> {'met' if got >= ROWCOPY_TARGET else 'not met'}")
        out.append(f"most removed: {best[0]} at {best[1]}, {removed[best]:.1%}; stores and loads together "
                   f"(10_swizzle ROWCOPY=1, 32x4): {both:.1%}")
    return out


def rowcopy_copies(tiles=((32, 4), (16, 8), (8, 8))) -> list[str]:
    """What ROWCOPY=1 changes in the dy copy at each tile the resnet50 layers ran: floats copied per
    chunk, copy steps per work-item (the stores each issues), and the bank model's extra passes of
    one work-group's dy copy per chunk."""
    out = [f"{'tile':>6}{'dy floats per chunk':>22}{'steps per work-item':>22}{'extra passes':>15}   (ROWCOPY=0 -> 1)"]
    for tx, ty in tiles:
        d = {"TX": tx, "TY": ty, "CB": 32, "KC": 4, "XPW": 8, "CPW": 4}
        cells = []
        for rc in (0, 1):
            s = local._shape({**d, "ROWCOPY": rc}, 3, 3)
            size = local.dy_copy_size(s)
            cells.append((size, -(-size // s["LS"]), local.store_extra("swizzle", "dy store", {**d, "ROWCOPY": rc})))
        (a0, b0, c0), (a1, b1, c1) = cells
        out.append(f"{tx:>3}x{ty:<2}{f'{a0} -> {a1}':>22}{f'{b0} -> {b1}':>22}{f'{c0} -> {c1}':>15}")
    return out


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
