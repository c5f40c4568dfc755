"""Pictures for chapter 14 (batch normalization): how a channel's values sit in an NCHW buffer
and how float4 accesses split each slab, the work-group reduction tree, and a switch of one stage
(COALESCED, REVERSE) measured alone: a recorded pair of runs, as a table and a plot."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle


def split4(g0: int, g1: int) -> tuple[int, int]:
    """The slab [g0, g1) as head [g0, a0), float4 body [a0, a1), tail [a1, g1): the Python twin
    of split4 in kernels/common/batchnorm.h (element i is 16-byte aligned when i % 4 == 0)."""
    a0 = min((g0 + 3) & ~3, g1)
    return a0, max(a0, g1 & ~3)


def slab_picture(n: int = 3, c: int = 2, h: int = 3, w: int = 3, channel: int = 1, per_row: int = 12, ax=None):
    """The flat NCHW buffer, one square per float: the chosen channel's head, float4 body and tail."""
    hw = h * w
    total = n * c * hw
    kind = ["other"] * total
    for img in range(n):
        g0 = (img * c + channel) * hw
        g1 = g0 + hw
        a0, a1 = split4(g0, g1)
        for i in range(g0, g1):
            kind[i] = "head" if i < a0 else ("body" if i < a1 else "tail")
    colors = {"other": "#e6e6e6", "head": "tab:orange", "body": "tab:blue", "tail": "tab:green"}
    rows = -(-total // per_row)
    if ax is None:
        _, ax = plt.subplots(figsize=(0.55 * per_row + 1, 0.55 * rows + 1.2))
    for i in range(total):
        r, col = divmod(i, per_row)
        ax.add_patch(Rectangle((col, rows - 1 - r), 0.95, 0.95, color=colors[kind[i]]))
        ax.text(col + 0.47, rows - 1 - r + 0.47, str(i), ha="center", va="center", fontsize=6)
    for r in range(rows):              # float4 boundaries: a float4 is 4 aligned floats
        for col in range(0, per_row + 1, 4):
            ax.plot([col - 0.025, col - 0.025], [rows - 1 - r, rows - r - 0.05], color="k", lw=1.5)
    for k, v in colors.items():
        label = {"other": "other channels", "head": "head (scalars)", "body": "body (float4)",
                 "tail": "tail (scalars)"}[k]
        ax.add_patch(Rectangle((0, 0), 0, 0, color=v, label=label))
    ax.set_xlim(-0.2, per_row + 0.2)
    ax.set_ylim(-0.2, rows + 0.1)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0), ncol=4, fontsize=8, frameon=False)
    ax.set_title(f"NCHW buffer, N={n} C={c} H*W={hw}: channel {channel}'s slabs; black bars every 4 floats",
                 fontsize=9)
    return ax


def reduction_tree_picture(wg: int = 8, ax=None):
    """The local-memory tree: at each step work-item l < s adds buf[l + s] to buf[l], then a barrier."""
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 * wg + 1, 3.2))
    level, s = 0, wg // 2
    for lid in range(wg):
        ax.plot(lid, 0, "o", color="tab:blue", ms=14)
        ax.text(lid, 0, f"{lid}", ha="center", va="center", color="w", fontsize=8)
    while s > 0:
        for lid in range(s):
            ax.annotate("", (lid, level + 1), (lid + s, level), arrowprops=dict(arrowstyle="->", color="tab:orange"))
            ax.annotate("", (lid, level + 1), (lid, level), arrowprops=dict(arrowstyle="->", color="tab:gray"))
            ax.plot(lid, level + 1, "o", color="tab:blue", ms=14)
            ax.text(lid, level + 1, f"{lid}", ha="center", va="center", color="w", fontsize=8)
        ax.axhline(level + 0.5, ls=":", color="k", lw=0.8)
        ax.text(wg - 0.5, level + 0.55, f"barrier (s = {s})", ha="right", fontsize=8)
        level, s = level + 1, s // 2
    ax.set_xlim(-0.7, wg - 0.3)
    ax.set_ylim(-0.6, level + 0.6)
    ax.axis("off")
    ax.set_title(f"Work-group sum of {wg} partials in local memory: log2({wg}) = {level} steps; "
                 "buf[0] holds the sum", fontsize=9)
    return ax


def recorded_switch(op: str, stage: str, switch: str, activation: str = "none", layer_set: str = "bn"):
    """The recorded pair of runs of one stage with a switch at 0 and at 1 (tags ``coalesced0`` and
    ``coalesced1`` for COALESCED; helpers/analysis/pairs.py pairs them), layer by layer, with the
    sizes batch norm's reading needs; None where results/ does not hold both.
    ``ratio`` is the median time at 0 over the median time at 1 (above 1: the setting 1 was faster);
    ``overlap`` says whether the two interquartile ranges overlap (a difference within the spread)."""
    from ..analysis.pairs import pair_rows, recorded_pairs
    from ..analysis.results import device_label
    from ..stages import get_stage
    found = recorded_pairs(op, layer_set, switch, activation=activation)
    if not found:
        return None
    off, on = found[0]
    key = get_stage(op, stage).key
    rows = []
    for r in pair_rows(off, on, switch):
        if r["key"] != key:
            continue
        sh = r["shape"]
        rows.append({"layer": r["layer"], "c": sh["c"], "hw": sh["h"] * sh["w"], "nhw": sh["n"] * sh["h"] * sh["w"],
                     "mb": 4 * sh["n"] * sh["c"] * sh["h"] * sh["w"] / 1e6, "defines": r["defines"],
                     "us": (1e3 * r["ms0"], 1e3 * r["ms1"]), "ratio": r["ratio"], "overlap": not r["apart"],
                     "pct_copy": r["pct_copy"]})
    return {"op": op, "stage": key, "switch": switch, "device": device_label(on),
            "compute_units": on["device"].get("compute_units"),
            "commands": [run["settings"]["command"] for run in (off, on)], "rows": rows}


def switch_table(pair: dict, labels=("0", "1"), note=None) -> str:
    """A recorded pair (recorded_switch) as a table: layer, H*W (one slab), N*H*W (a channel), the
    tensor's size, both medians, their ratio; the last column says where the interquartile ranges
    overlap, and ``note(row)`` may add to it."""
    s = pair["switch"]
    lines = [f"{pair['op']}, stage {pair['stage']}: {s}=0 ({labels[0]}) against {s}=1 ({labels[1]})",
             f"recorded on {pair['device']}; times in us (medians of the recorded repeats)",
             f"{'layer':>10} {'H*W':>6} {'N*H*W':>7} {'x (MB)':>7} {f'{s}=0':>12} {f'{s}=1':>12} {'0 / 1':>6}   notes"]
    for r in pair["rows"]:
        notes = ", ".join(n for n in ((note(r) if note else ""), "IQRs overlap" if r["overlap"] else "") if n)
        lines.append(f"{r['layer']:>10} {r['hw']:6d} {r['nhw']:7d} {r['mb']:7.1f} {r['us'][0]:12.1f} "
                     f"{r['us'][1]:12.1f} {r['ratio']:6.2f}   {notes}".rstrip())
    return "\n".join(lines)


def switch_summary(pair: dict, labels=("0", "1"), same=None) -> str:
    """What a recorded pair shows, from its numbers: where each setting was faster beyond the spread,
    the range of the ratio where ``same(row)`` says both settings read the same addresses, the
    largest difference and the geometric mean of the ratio over all layers."""
    from ..analysis.summary import geomean
    rows = pair["rows"]
    differ = [r for r in rows if not (same and same(r))]

    def listed(pick):
        hits = [f"{r['layer']} ({r['mb']:.1f} MB)" for r in differ if pick(r)]
        return ", ".join(hits) if hits else "none"

    lines = [f"  {labels[1]} faster, beyond the spread: {listed(lambda r: r['ratio'] > 1 and not r['overlap'])}",
             f"  {labels[0]} faster, beyond the spread: {listed(lambda r: r['ratio'] < 1 and not r['overlap'])}"]
    if any(r["overlap"] for r in differ):
        lines.append(f"  within the spread: {listed(lambda r: r['overlap'])}")
    if same and len(differ) < len(rows):
        both = [r["ratio"] for r in rows if same(r)]
        lines.append(f"  where both read the same addresses: 0 / 1 from {min(both):.2f} to {max(both):.2f}")
    top = max(differ, key=lambda r: max(r["ratio"], 1 / r["ratio"]))
    f = max(top["ratio"], 1 / top["ratio"])
    fast, slow = (labels[1], labels[0]) if top["ratio"] > 1 else (labels[0], labels[1])
    lines.append(f"  largest difference: {top['layer']}, {fast} at x{f:.3f} the speed of {slow} "
                 f"({100 * (1 - 1 / f):.1f} % less time)")
    lines.append(f"  geometric mean of 0 / 1 over the {len(rows)} layers: {geomean(r['ratio'] for r in rows):.2f}")
    return "\n".join(lines)


def switch_picture(pairs: list, labels=("0", "1"), same=None, ax=None):
    """Each layer's time at 0 over its time at 1 against the tensor's size, one colour and marker per
    pair (forward, backward); hollow markers where ``same(row)`` says both settings read the same
    addresses."""
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.6))
    for pair, marker, color in zip(pairs, "os^v", ("tab:blue", "tab:orange", "tab:green", "tab:red")):
        for hollow in (False, True):
            rows = [r for r in pair["rows"] if bool(same and same(r)) == hollow]
            if rows:
                ax.scatter([r["mb"] for r in rows], [r["ratio"] for r in rows], marker=marker, s=45,
                           facecolors="none" if hollow else color, edgecolors=color,
                           label=pair["op"] + (", same addresses" if hollow else ""))
    s = pairs[0]["switch"]
    sizes = sorted({round(r["mb"], 1) for pair in pairs for r in pair["rows"]})
    ax.axhline(1, color="k", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xticks(sizes, [f"{m:g}" for m in sizes])
    ax.minorticks_off()
    ax.set_xlabel("size of the tensor x (MB, log scale)")
    ax.set_ylabel("time at 0 / time at 1")
    ax.text(0.01, 0.97, f"above 1: {s}=1 ({labels[1]}) faster", transform=ax.transAxes, va="top", fontsize=8)
    ax.text(0.99, 0.03, f"below 1: {s}=0 ({labels[0]}) faster", transform=ax.transAxes, va="bottom", ha="right",
            fontsize=8)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_title(f"Stage {pairs[0]['stage']}, {s} alone, layer by layer\n{pairs[0]['device']}", fontsize=9)
    return ax
