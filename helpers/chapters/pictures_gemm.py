"""Pictures and counts of chapter 11 (convolution as matrix multiplication): which filter taps
serve which input phase of a strided layer, the column workspace per layer against a limit, and
the index arithmetic per operand fetch of the implicit-GEMM stages."""
from __future__ import annotations

from ..launch.gemm import INDEX_LIMIT, cdiv, cols_size, max_taps, phase_count, phase_taps
from ..ops.conv_dgrad import layer_args
from ..chooser import stage_workspace
from ..runner import prepare
from ..stages import get_stage

PHASE_COLOURS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3",
                 "#8C8C8C", "#CCB974"]


def draw_phase_taps(axes, kernel: int = 3, stride: int = 2, pad: int = 1, size: int = 6):
    """Left: a size x size input coloured by phase ((h+pad) % s, (w+pad) % s). Right: the
    kernel's taps, each coloured by the one phase it serves. Returns {phase: taps}."""
    import matplotlib.patches as mpatches
    ax_in, ax_k = axes
    colour = lambda ph, pw: PHASE_COLOURS[(ph * stride + pw) % len(PHASE_COLOURS)]
    for h in range(size):
        for w in range(size):
            ph, pw = (h + pad) % stride, (w + pad) % stride
            ax_in.add_patch(mpatches.Rectangle((w, size - 1 - h), 0.95, 0.95, color=colour(ph, pw)))
    served = {}
    for r in range(kernel):
        for s in range(kernel):
            ph, pw = r % stride, s % stride
            served.setdefault((ph, pw), []).append((r, s))
            ax_k.add_patch(mpatches.Rectangle((s, kernel - 1 - r), 0.95, 0.95, color=colour(ph, pw)))
            ax_k.text(s + 0.47, kernel - 0.53 - r, f"{r},{s}", ha="center", va="center", color="white", fontsize=9)
    for ax, n, title in ((ax_in, size, f"input {size}x{size}, padding {pad}: phase of each position"),
                         (ax_k, kernel, f"{kernel}x{kernel} taps (r,s): the phase each serves")):
        ax.set_xlim(0, n)
        ax.set_ylim(0, n)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=9)
    handles = [mpatches.Patch(color=colour(ph, pw), label=f"phase ({ph},{pw})")
               for ph in range(stride) for pw in range(stride)]
    ax_k.legend(handles=handles, loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8)
    return {ph: served.get(ph, []) for ph in sorted((a, b) for a in range(stride) for b in range(stride))}


def phase_table(h: int, w: int, kernel: int, stride: int, pad: int) -> list[dict]:
    """Per phase: its input positions and taps; the reduction each phase's GEMM runs over."""
    rows = []
    for ph in range(stride):
        for pw in range(stride):
            taps = [(r, s) for r in phase_taps(kernel, stride, ph) for s in phase_taps(kernel, stride, pw)]
            rows.append({"phase": (ph, pw), "positions": phase_count(h, pad, stride, ph) * phase_count(w, pad, stride, pw),
                         "taps": taps})
    return rows


def workspace_rows(layers, limit_mb: float) -> list[dict]:
    """Per layer: the explicit GEMM's column workspace, the delta table, whether each fits."""
    rows = []
    for lay in layers:
        p = prepare("conv_dgrad", **layer_args(lay))
        cols, delta = (stage_workspace(s, p, dict(s.defines)) for s in
                       (get_stage("conv_dgrad", "gemm_col2im"), get_stage("conv_dgrad", "igemm_delta")))
        dy = 4 * p.inputs["grad_output"].size
        rows.append({"layer": lay["name"], "cols_mib": cols / 2**20, "cols_over_dy": cols / dy,
                     "delta_kib": delta / 2**10, "fits": cols <= limit_mb * 2**20,
                     "int32": cols_size(p) <= INDEX_LIMIT})
    return rows


# Integer operations per fetched element of B (dy) in each stage's operand fetch, read off the
# kernels' gather functions: divisions/remainders, by compile-time constants (KH, KW, STRIDE, and
# a phase's tap counts when each phase is compiled as its own copy: the compiler turns them into
# multiplies and shifts) or by run-time values (a real division), and the table reads. Bounds
# compares are 4 in each stage (0 <= oh < OH, 0 <= ow < OW). Keyed by (row label, stage).
FETCH_OPS = {
    ("igemm_analytic", "igemm_analytic"): {"div/rem by constants": 4, "div/rem by stride": 4,
                                           "div/rem at run time": 0, "table reads": 0},
    ("igemm_phases", "igemm_phases"): {"div/rem by constants": 4, "div/rem by stride": 0,
                                       "div/rem at run time": 0, "table reads": 0},
    ("  PHASE_CONSTANT=0", "igemm_phases"): {"div/rem by constants": 0, "div/rem by stride": 0,
                                             "div/rem at run time": 4, "table reads": 0},
    ("igemm_delta", "igemm_delta"): {"div/rem by constants": 0, "div/rem by stride": 0,
                                     "div/rem at run time": 0, "table reads": 1},
}


def fetch_counts(lay: dict, tiles: dict) -> dict:
    """How many elements of B each implicit-GEMM stage fetches for a layer (tiles padded), and
    how many of them are zeros a stride puts in (0 with the phase split)."""
    n, c, h, w, k = (lay[x] for x in ("n", "c", "h", "w", "k"))
    kernel, stride, pad = lay["kernel"], lay["stride"], lay["padding"]
    blocks_m = cdiv(c, tiles["TM"])
    ktot = cdiv(k * kernel * kernel, tiles["TK"]) * tiles["TK"]
    analytic = blocks_m * cdiv(n * h * w, tiles["TN"]) * tiles["TN"] * ktot
    phased = 0
    for ph in range(stride):
        for pw in range(stride):
            taps = len(phase_taps(kernel, stride, ph)) * len(phase_taps(kernel, stride, pw))
            cols = n * phase_count(h, pad, stride, ph) * phase_count(w, pad, stride, pw)
            if cols and taps:
                phased += blocks_m * cdiv(cols, tiles["TN"]) * tiles["TN"] * cdiv(k * taps, tiles["TK"]) * tiles["TK"]
    return {"igemm_analytic": analytic, "igemm_phases": phased, "igemm_delta": phased}


def index_ops_table(lay: dict, tiles: dict) -> list[str]:
    """Lines: per stage, B fetches and the integer operations they cost, for one layer."""
    counts = fetch_counts(lay, tiles)
    by_stride = 0 if lay["stride"] == 1 else 1          # STRIDE 1: the compiler drops those checks
    out = [f"{'stage':<18} {'B fetches':>14} {'div/rem const':>14} {'div/rem stride':>15} "
           f"{'div/rem runtime':>16} {'table reads':>12}"]
    for (label, stage), ops in FETCH_OPS.items():
        f = counts[stage]
        const, runtime = f * ops["div/rem by constants"], f * ops["div/rem at run time"]
        if lay["stride"] == 1:   # make_phase (dgrad_phases.h): the tap counts are KH and KW in every build
            const, runtime = const + runtime, 0
        out.append(f"{label:<18} {f:14,d} {const:14,d} {f * ops['div/rem by stride'] * by_stride:15,d} "
                   f"{runtime:16,d} {f * ops['table reads']:12,d}")
    return out


def c_rows(lds4: int, tm: int, tiles: int, wm: int) -> list[int]:
    """The rows of a tile of C (`tiles` rows) that work-item `tm` of a column holds in acc[i][.]:
    gemm_core.h's GEMM_ROW (the same formula gives the columns, with TN and WN)."""
    r = tiles // wm                              # work-items along the tile
    if lds4:
        return [4 * tm + (i // 4) * 4 * r + i % 4 for i in range(wm)]
    return [tm + i * r for i in range(wm)]


def lds4_reads(tm: int = 128, tn: int = 128, wm: int = 8, wn: int = 8) -> list[dict]:
    """Per GEMM_LDS4 setting: one warp's local-memory reads for one k of the tile loop (a rank-1
    update of WM x WN multiply-adds per work-item): read instructions per work-item, and the
    passes of chapter 10's bank model for the warp (work-items 0-31 of the work-group; the words
    of the A and B tiles at one k, numbered from the start of that k's row)."""
    from .banks import WARP, passes
    lanes = [(tid // (tn // wn), tid % (tn // wn)) for tid in range(WARP)]   # (tm, tn) of each
    rows = []
    for lds4, width in ((0, 1), (1, 4)):
        reads = [[c_rows(lds4, m, tm, wm)[i:i + width] for m, _ in lanes] for i in range(0, wm, width)]
        reads += [[c_rows(lds4, n, tn, wn)[j:j + width] for _, n in lanes] for j in range(0, wn, width)]
        rows.append({"lds4": lds4, "width": width, "reads": len(reads), "fmas": wm * wn,
                     "passes": sum(passes(access) for access in reads)})
    return rows


def draw_c_owners(axes, tm: int = 32, tn: int = 32, wm: int = 8, wn: int = 8):
    """One panel per GEMM_LDS4 setting: a TM x TN block of C (the work-group's), the WM x WN
    elements held by two neighbouring work-items coloured, the rest grey."""
    import matplotlib.patches as mpatches
    owners = [(0, 0), (0, 1)]                                            # (tm, tn)
    for ax, lds4 in zip(axes, (0, 1)):
        ax.add_patch(mpatches.Rectangle((0, 0), tn, tm, color="#EEEEEE"))
        for o, (m, n) in enumerate(owners):
            colour = PHASE_COLOURS[o]
            rows, cols = c_rows(lds4, m, tm, wm), c_rows(lds4, n, tn, wn)
            for r in rows:
                for c in cols:
                    ax.add_patch(mpatches.Rectangle((c, tm - 1 - r), 0.9, 0.9, color=colour))
        ax.set_xlim(0, tn)
        ax.set_ylim(0, tm)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        runs = "runs of 4: one float4 read per run" if lds4 else f"rows {tm // wm} apart, columns {tn // wn} apart"
        ax.set_title(f"GEMM_LDS4 = {lds4}: {runs}\n{wm // (4 if lds4 else 1) + wn // (4 if lds4 else 1)} "
                     f"local reads per k for {wm * wn} multiply-adds", fontsize=9)
        ax.set_xlabel(f"columns n of the work-group's {tm} x {tn} block of C", fontsize=8)
        ax.set_ylabel("rows m", fontsize=8)
    handles = [mpatches.Patch(color=PHASE_COLOURS[o], label=f"work-item tm={m}, tn={n}")
               for o, (m, n) in enumerate(owners)]
    axes[-1].legend(handles=handles, loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8)


# -- the phase split's stores (STORE_LOCAL) ------------------------------------------------

STORE_MODES = (("registers, GEMM_LDS4=0", 0, 0), ("registers, GEMM_LDS4=1", 1, 0), ("STORE_LOCAL", 1, 1))


def warp_store(lds4: int, local: int, stride: int, tn: int = 64, wm: int = 4, wn: int = 4, tm: int = 64,
               instruction: int = 0) -> list[tuple[int, int]]:
    """(channel row, float offset in dx's row) that each lane of warp 0 writes in one store
    instruction of igemm_phases: from the registers, acc[0][instruction] of every work-item
    (gemm_core.h's GEMM_ROW/GEMM_COL); through local memory (GEMM_STORE_COLUMN), the first
    pass's first store, each work-item's own column GEMM_B_COL. Positions of one phase lie
    ``stride`` floats apart in dx."""
    rn, rm = tn // wn, tm // wm
    wg = rn * rm
    out = []
    for tid in range(32):
        if local:
            row, col = tid // tn, tid % tn
        else:
            t_m, t_n = tid // rn, tid % rn
            row = c_rows(lds4, t_m, tm, wm)[0]
            col = c_rows(lds4, t_n, tn, wn)[instruction]
        out.append((row, col * stride))
    assert wg % 32 == 0
    return out


def sectors(lanes: list[tuple[int, int]]) -> int:
    """32-byte sectors one store instruction touches (rows of C lie in different sectors)."""
    return len({(row, off * 4 // 32) for row, off in lanes})


def store_table(tn: int = 64, wm: int = 4, wn: int = 4) -> list[str]:
    """Per store mode and stride: sectors one warp's store instruction touches, for 32 values."""
    lines = [f"{'dx written from':<24} {'stride 1':>9} {'stride 2':>9}   (sectors per store instruction of 32 values)"]
    for name, lds4, local in STORE_MODES:
        counts = [sectors(warp_store(lds4, local, s, tn=tn, wm=wm, wn=wn)) for s in (1, 2)]
        lines.append(f"{name:<24} {counts[0]:>9} {counts[1]:>9}")
    return lines


def draw_warp_stores(axes, stride: int = 2, tn: int = 64, wm: int = 4, wn: int = 4):
    """One panel per store mode: the floats of dx (first 128 of the rows hit) that warp 0's
    first store instruction writes, coloured by lane, with the 32-byte sector boundaries."""
    import matplotlib.pyplot as plt
    cmap = plt.get_cmap("viridis")
    for ax, (name, lds4, local) in zip(axes, STORE_MODES):
        lanes = warp_store(lds4, local, stride, tn=tn, wm=wm, wn=wn)
        rows = sorted({r for r, _ in lanes})
        width = max(128, max(off for _, off in lanes) + 1)
        for lane, (row, off) in enumerate(lanes):
            ax.add_patch(plt.Rectangle((off, rows.index(row)), 1, 0.8, color=cmap(lane / 31)))
        for x in range(0, width + 1, 8):
            ax.axvline(x, color="#BBBBBB", lw=0.5)
        ax.set_xlim(0, width)
        ax.set_ylim(-0.2, len(rows))
        ax.set_yticks([i + 0.4 for i in range(len(rows))], [f"channel row {r}" for r in rows])
        ax.set_title(f"{name}: {sectors(lanes)} sectors", fontsize=9)
    axes[-1].set_xlabel(f"float offset in dx (grey lines: 32-byte sectors; one phase of stride {stride})")
