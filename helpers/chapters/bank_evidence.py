"""Chapters 10 and 10b's evidence from Nsight Compute: the bank model's conflicts (helpers/chapters/
local.py over helpers/chapters/banks.py) beside ncu's counts on the CUDA twins, the ROWCOPY
switch's stores, the loads explained from the SASS, and what limits the stages once the conflicts
are gone. Each function returns the lines a notebook prints, from the records in results/local/.
"""
from __future__ import annotations

from ..analysis import names
from . import local
from .pictures_local import recorded_runs


def three_way_table() -> list[str]:
    """Bank conflicts of a launch three ways: the simulator, ncu on the CUDA twin (results/local),
    and the recorded times (ncu's kernel time at the profiled batch; the twin's and the OpenCL
    stage's median at batch 64)."""
    import json
    path = names.path(names.ncu_banks("ncu_banks", names.RECORDED))
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
    from .banks import passes
    rec = json.loads(names.path(names.ncu_banks("ncu_banks", names.RECORDED)).read_text())
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
