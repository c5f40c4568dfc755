"""Chapter 12's pictures: which local-memory bank each work-item of a warp reads in the
Winograd matrix products, and how many times the bank must be read (the conflict degree, by the
bank model of helpers/chapters/banks.py); the tiles of the input a Winograd tile reads; the
algorithms' float32 accuracy.
"""
from __future__ import annotations

from .banks import WARP, draw_lanes, passes


def warp_access(stage: str, ts: int = 16, c: int = 0, tile: int = 64, reg: int = 4):
    """Word addresses (one list per work-item of a warp) of the V read in a stage's inner loop.

    'local' (stage 03): Vs[tx][c] with a TS x TS block, work-items (tx, ty), tx fastest.
    'transposed' (stage 04): Vs[c][tx].
    'blocked' (stage 05): float4 Vs[c][v*NTX + tx], NTX = TN/REG (``tile`` = TN), 4 words per work-item (v = 0).
    """
    lanes = []
    for lane in range(WARP):
        if stage in ("local", "transposed"):
            tx = lane % ts
            lanes.append([tx * ts + c] if stage == "local" else [c * ts + tx])
        elif stage == "blocked":
            nt = tile // reg
            tx = lane % nt
            base = c * tile + tx * 4
            lanes.append([base, base + 1, base + 2, base + 3])
        else:
            raise ValueError(f"unknown stage {stage!r}; use 'local', 'transposed' or 'blocked'")
    return lanes


def gemm_read_degree(stage: str, ts: int = 16, **kw) -> int:
    """Passes divided by the passes a conflict-free access of that width needs (1 = no conflict)."""
    lanes = warp_access(stage, ts, **kw)
    ideal = len(lanes[0])                       # one pass per part of the warp
    return passes(lanes) // ideal


def bank_picture(ax, stage: str, ts: int = 16, **kw):
    """Banks across, passes down: each box is one word read in that pass, labelled with its work-items."""
    return draw_lanes(ax, warp_access(stage, ts, **kw), f"{stage}: {{passes}} pass(es) for one warp's read")


def conflict_table(ts: int = 16) -> list[tuple]:
    """(stage, words per work-item, passes, conflict degree) for the three layouts."""
    rows = []
    for stage in ("local", "transposed", "blocked"):
        lanes = warp_access(stage, ts)
        rows.append((stage, len(lanes[0]), passes(lanes), gemm_read_degree(stage, ts)))
    return rows


def draw_tiles(ax, h: int = 7, w: int = 7, padding: int = 1, tile: tuple = (1, 2), m: int = 2,
               names: tuple = ("input", "output")):
    """The input (with its zero padding) and the mxm output tiles; one tile's (m+2)x(m+2) input window.

    Output tile (th, tw) covers outputs (m*th..m*th+m-1, m*tw..m*tw+m-1) and reads padded input rows
    m*th..m*th+m+1 and columns m*tw..m*tw+m+1: windows of neighbouring tiles overlap by 2. ``names``
    labels the two grids (chapter 15: x and the 4x4 tiles of dy' in the weight gradient).
    """
    from matplotlib.patches import Rectangle
    hp, wp = h + 2 * padding, w + 2 * padding
    oh, ow = hp - 2, wp - 2
    for i in range(hp):
        for j in range(wp):
            inside = padding <= i < padding + h and padding <= j < padding + w
            ax.add_patch(Rectangle((j, i), 1, 1, fc="white" if inside else "0.85", ec="0.6", lw=0.5))
    th, tw = tile
    ax.add_patch(Rectangle((m * tw, m * th), m + 2, m + 2, fc="tab:blue", alpha=0.25, ec="tab:blue", lw=2))
    off = wp + 1.5
    th_all, tw_all = -(-oh // m) * m, -(-ow // m) * m     # the tiles cover a multiple of m outputs
    for i in range(th_all):
        for j in range(tw_all):
            dropped = i >= oh or j >= ow                  # computed by a partial tile, never stored
            ax.add_patch(Rectangle((off + j, i), 1, 1, fc="0.93" if dropped else "white", ec="0.6", lw=0.5,
                                   hatch="///" if dropped else None))
    for a in range(0, oh, m):
        for b in range(0, ow, m):
            ax.add_patch(Rectangle((off + b, a), m, m, fill=False, ec="k", lw=1.2))
    ax.add_patch(Rectangle((off + m * tw, m * th), m, m, fc="tab:orange", alpha=0.5, ec="tab:orange", lw=2))
    ax.text(wp / 2, -0.6, f"padded {names[0]} {h}x{w}\n(grey: padding {padding})", ha="center", va="bottom", fontsize=8)
    partial = "\n(the last ones partial: their extra\noutputs, hatched, are dropped)" if oh % m or ow % m else ""
    ax.text(off + tw_all / 2, -0.6, f"{names[1]} {oh}x{ow} in {m}x{m} tiles{partial}", ha="center", va="bottom",
            fontsize=8)
    ax.set_xlim(-0.5, off + tw_all + 0.5)
    ax.set_ylim(max(hp, th_all) + 0.5, -3.2)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def draw_accuracy(ax, rows, names=("direct", "F(2x2,3x3)", "F(4x4,3x3)")):
    """Chapter 12: the normwise error of each algorithm's float32 model (``winograd.accuracy``
    rows) against the input channels, log-log, with float32's eps for scale."""
    import numpy as np
    cs = [r["C"] for r in rows]
    for name, style in zip(names, ("o-", "s-", "^-")):
        ax.loglog(cs, [r[name] for r in rows], style, label=name)
    eps = float(np.finfo(np.float32).eps)
    ax.axhline(eps, color="k", lw=0.8, ls=":")
    ax.annotate("float32 eps", (cs[-1], eps), fontsize=8, va="bottom", ha="right")
    ax.set_xlabel("input channels C")
    ax.set_ylabel("max |error| / max |output|")
    ax.set_title("float32 against float64 (NumPy models of each algorithm)", fontsize=9)
    ax.legend(fontsize=8)
    return ax
