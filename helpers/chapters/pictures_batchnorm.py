"""Pictures for chapter 14 (batch normalization): how a channel's values sit in an NCHW buffer
and how float4 accesses split each slab, and the work-group reduction tree."""
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
