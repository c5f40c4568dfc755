"""Pictures of chapter 16 (convolutions of any shape): which input channels each output channel
reads under groups, the grouped weight tensor in memory, the taps a dilated kernel reads, and the
memory each lowering of an N-D convolution needs."""
from __future__ import annotations

from math import prod

from .any_shape import geometry, memory, out_size

GROUP_COLOURS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"]


def reads(c: int, k: int, groups: int) -> list[list[int]]:
    """For every output channel, the input channels it reads: its group's C/groups channels."""
    cg, kg = c // groups, k // groups
    return [list(range(o // kg * cg, (o // kg + 1) * cg)) for o in range(k)]


def draw_group_reads(axes, c: int = 8, k: int = 8, groups=(1, 2, 8)):
    """One panel per number of groups: a K x C grid, cell (k, c) filled when output channel k reads
    input channel c, coloured by group (groups = C: the depthwise diagonal)."""
    import matplotlib.patches as mpatches
    for ax, g in zip(axes, groups):
        for o, inputs in enumerate(reads(c, k, g)):
            for i in range(c):
                filled = i in inputs
                colour = GROUP_COLOURS[(o // (k // g)) % len(GROUP_COLOURS)] if filled else "#f2f2f2"
                ax.add_patch(mpatches.Rectangle((i, k - 1 - o), 0.92, 0.92, color=colour))
        ax.set_xlim(0, c)
        ax.set_ylim(0, k)
        ax.set_aspect("equal")
        ax.set_xticks([i + 0.46 for i in range(c)], [str(i) for i in range(c)], fontsize=7)
        ax.set_yticks([k - 0.54 - o for o in range(k)], [str(o) for o in range(k)], fontsize=7)
        ax.grid(False)
        ax.set_xlabel("input channel c", fontsize=8)
        ax.set_ylabel("output channel k", fontsize=8)
        name = "dense" if g == 1 else "depthwise" if g == c else "grouped"
        ax.set_title(f"groups = {g} ({name}): {c * k // g} of {c * k} pairs", fontsize=9)


def draw_grouped_weight(ax, c: int = 8, k: int = 8, groups: int = 2, taps: int = 9):
    """The weight (C, K/groups, R, S) as it lies in memory: one row of K/groups blocks of R*S
    floats per input channel, each block labelled with the output channel it feeds, coloured by
    group. Consecutive rows of one group are contiguous; nothing is stored for the pairs of
    different groups."""
    import matplotlib.patches as mpatches
    cg, kg = c // groups, k // groups
    for ci in range(c):
        g = ci // cg
        for j in range(kg):
            x0 = j * taps
            ax.add_patch(mpatches.Rectangle((x0, c - 1 - ci), taps * 0.97, 0.9,
                                            color=GROUP_COLOURS[g % len(GROUP_COLOURS)], alpha=0.85))
            ax.text(x0 + taps / 2, c - 0.55 - ci, f"c{ci}→k{g * kg + j}", ha="center", va="center",
                    fontsize=7, color="white")
        ax.text(-0.5, c - 0.55 - ci, f"{ci * kg * taps}", ha="right", va="center", fontsize=7)
    ax.set_xlim(-4, kg * taps)
    ax.set_ylim(0, c)
    ax.axis("off")
    ax.set_title(f"weight ({c}, K/groups = {kg}, 3, 3) in memory, groups = {groups}: each row's first float "
                 f"index on the left, {taps} floats per block", fontsize=9)


def dilated_taps(out: tuple, kernel: int, stride: int, pad: int, dilation: int) -> list[tuple]:
    """The input positions (h, w) that output ``out`` = (oh, ow) reads through a kernel x kernel
    kernel, padding included (positions may be negative or past the input)."""
    oh, ow = out
    return [(oh * stride - pad + r * dilation, ow * stride - pad + s * dilation)
            for r in range(kernel) for s in range(kernel)]


def draw_dilated_taps(axes, size: int = 13, kernel: int = 3, dilations=(1, 2, 4), out=(3, 3), stride: int = 1):
    """One panel per dilation: a size x size input, the taps output ``out`` reads (padding =
    dilation, so the output keeps the input's size at stride 1), and the window they span."""
    import matplotlib.patches as mpatches
    for ax, d in zip(axes, dilations):
        taps = dilated_taps(out, kernel, stride, d, d)
        for h in range(size):
            for w in range(size):
                hit = (h, w) in taps
                ax.add_patch(mpatches.Rectangle((w, size - 1 - h), 0.92, 0.92, color="#C44E52" if hit else "#eeeeee"))
        lo_h, lo_w = min(t[0] for t in taps), min(t[1] for t in taps)
        span = d * (kernel - 1) + 1
        ax.add_patch(mpatches.Rectangle((lo_w - 0.04, size - lo_h - span - 0.04), span, span, fill=False,
                                        edgecolor="#4C72B0", linewidth=1.5))
        outside = sum(not (0 <= h < size and 0 <= w < size) for h, w in taps)
        ax.set_xlim(-1, size + 1)
        ax.set_ylim(-1, size + 1)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(f"dilation {d}: {kernel * kernel} taps over {span}x{span}" +
                     (f", {outside} in the padding" if outside else ""), fontsize=9)


def draw_lowering_memory(ax, layers: list[dict], tile: int = 64):
    """Per layer, the float32 megabytes each lowering needs beyond the tensors (log scale), beside
    the tensors themselves."""
    import numpy as np
    kinds = [("tensors", "the tensors (x, y, w)"), ("columns", "column matrix"),
             ("implicit", f"implicit GEMM ({tile} positions a tile)"), ("recursion", "recursion (one lower call)")]
    width = 0.8 / len(kinds)
    for i, (key, label) in enumerate(kinds):
        mb = [4 * memory(lay, tile)[key] / 1e6 for lay in layers]
        ax.bar(np.arange(len(layers)) + i * width, mb, width, label=label, color=GROUP_COLOURS[i])
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(layers)) + 0.4 - width / 2, [lay["name"] for lay in layers], fontsize=8, rotation=15)
    ax.set_ylabel("MB (float32)")
    ax.legend(fontsize=8)
    ax.set_title("memory beyond the tensors, per lowering (computed from the shapes)", fontsize=9)


def memory_lines(layers: list[dict], tile: int = 64) -> list[str]:
    """The numbers behind draw_lowering_memory, one line per layer."""
    lines = [f"{'layer':<18} {'out':>16} {'tensors MB':>11} {'columns MB':>11} {'x tensors':>10} "
             f"{'implicit MB':>12} {'recursion MB':>13} {'lower calls':>12}"]
    for lay in layers:
        m = memory(lay, tile)
        mb = {k: 4 * v / 1e6 for k, v in m.items()}
        lines.append(f"{lay['name']:<18} {'x'.join(map(str, out_size(lay))):>16} {mb['tensors']:>11.1f} "
                     f"{mb['columns']:>11.1f} {m['columns'] / m['tensors']:>10.1f} {mb['implicit']:>12.2f} "
                     f"{mb['recursion']:>13.2f} {m['recursion_calls']:>12,}")
    return lines


def cost_lines(layers: list[dict], dense_of, costs, ridge: float | None) -> list[str]:
    """Per layer: FLOPs, bytes and FLOP per byte of the grouped layer and of its dense twin, and
    whether each sits below the ridge point (memory-bound) of a recorded roofline."""
    lines = [f"{'layer':<20} {'GFLOP':>8} {'MB':>7} {'FLOP/B':>7}   {'dense GFLOP':>11} {'dense FLOP/B':>12}"
             + ("   bound (grouped, dense)" if ridge else "")]
    for lay in layers:
        a, b = costs(lay), costs(dense_of(lay))
        bound = lambda v: "memory" if v < ridge else "compute"
        lines.append(f"{lay['name']:<20} {a['flops'] / 1e9:>8.2f} {a['bytes'] / 1e6:>7.1f} {a['intensity']:>7.2f}   "
                     f"{b['flops'] / 1e9:>11.1f} {b['intensity']:>12.1f}"
                     + (f"   {bound(a['intensity'])}, {bound(b['intensity'])}" if ridge else ""))
    return lines


def gemm_lines(layers: list[dict], gemm_per_group, tile_rows: int = 64) -> list[str]:
    """Per layer and gradient: each group's GEMM (rows x columns, reduction) and the share of a
    tile_rows-row output tile its rows fill."""
    lines = [f"{'layer':<20} {'op':<11} {'groups':>6} {'rows':>5} {'columns':>9} {'reduction':>9} "
             f"{'tile rows used':>15}"]
    for lay in layers:
        for op in ("conv_dgrad", "conv_wgrad"):
            g = gemm_per_group(lay, op)
            lines.append(f"{lay['name']:<20} {op:<11} {g['groups']:>6} {g['rows']:>5} {g['columns']:>9,} "
                         f"{g['reduction']:>9,} {min(1.0, g['rows'] / tile_rows):>14.0%}")
    return lines


def reach(lay: dict) -> str:
    """A dilated layer's kernel span and output size, as text."""
    span = [d * (k - 1) + 1 for d, k in zip(geometry(lay)[2], lay["kernel"])]
    return f"{lay['name']}: {'x'.join(map(str, lay['kernel']))} taps over {'x'.join(map(str, span))}, " \
           f"output {'x'.join(map(str, out_size(lay)))}, {prod(lay['kernel'])} taps of {prod(span)} positions"


def draw_column_matrix(ax, c: int = 2, size=(3, 3, 3), kernel=(2, 2, 2)):
    """The column matrix of a small 3-D input (one image, stride 1, no padding): a row per
    (channel, tap), a column per output position, each cell the flat index of the input value it
    copies, coloured by it. The same colour recurs along anti-diagonal runs: one value, many taps."""
    import numpy as np
    from .any_shape import gather
    x = np.arange(c * prod(size), dtype=float).reshape(1, c, *size)
    out = tuple(v - k + 1 for v, k in zip(size, kernel))
    cols = gather(x, range(prod(out)), (1,) * len(size), ((0, 0),) * len(size), (1,) * len(size), kernel, out)[0]
    ax.imshow(cols, cmap="viridis", aspect="auto")
    for (i, j), v in np.ndenumerate(cols):
        ax.text(j, i, f"{int(v)}", ha="center", va="center", fontsize=6, color="white" if v < cols.max() / 2 else "black")
    taps = [f"c{ci} {''.join(map(str, t))}" for ci in range(c) for t in np.ndindex(*kernel)]
    ax.set_yticks(range(len(taps)), taps, fontsize=6)
    ax.set_xticks(range(prod(out)), ["".join(map(str, p)) for p in np.ndindex(*out)], fontsize=6)
    ax.set_xlabel("output position (od oh ow)", fontsize=8)
    ax.set_ylabel("row: channel, tap (t r s)", fontsize=8)
    ax.grid(False)
    uses = np.bincount(cols.astype(int).ravel(), minlength=x.size)
    ax.set_title(f"column matrix of a {'x'.join(map(str, size))} input, {c} channels, {'x'.join(map(str, kernel))} "
                 f"kernel: {cols.size} cells for {x.size} values, each copied up to {uses.max()} times", fontsize=9)
