"""The bank model of shared (local) memory that chapters 10, 12 and 13 count conflicts with.

The model: 32 banks of 4-byte words; word address a lives in bank a % 32. A warp's access is
served in one pass per distinct word of the busiest bank (work-items reading the same word
share it: a broadcast). 64-bit accesses are served a half-warp at a time, 128-bit (float4) a
quarter-warp at a time, each part in its own pass(es). NVIDIA documents this model; other
GPUs (AMD: 32 banks, similar rules) differ in details, and a CPU has no banks at all.

An access is given as word addresses, one list per work-item of the warp (None or [] for an
idle one): ``passes`` counts what it costs, ``draw_lanes`` draws it bank by bank.
"""
from __future__ import annotations


BANKS = 32
WARP = 32


def conflict_degree(words, banks: int = BANKS) -> int:
    """Passes one access needs: the most distinct words any single bank is asked for."""
    per_bank: dict[int, set] = {}
    for a in words:
        per_bank.setdefault(a % banks, set()).add(a)
    return max((len(s) for s in per_bank.values()), default=0)


def passes(lanes) -> int:
    """Total passes for a warp access: per part of the warp (by access width), the conflict degree.
    A work-item may be idle (None or []: a masked lane); a part with no active work-item costs nothing."""
    width = max(len(lane) for lane in lanes if lane)   # 1, 2 or 4 words per work-item
    part = WARP // width                        # 32, 16 or 8 work-items served together
    return sum(conflict_degree([a for lane in lanes[i:i + part] for a in lane or ()]) for i in range(0, WARP, part))


def draw_lanes(ax, lanes, title: str = "{passes} pass(es)"):
    """The bank map of one warp's access (word addresses per work-item, None for an idle one):
    banks across, passes down, each box a word served in that pass, labelled with its first
    work-item ("+" when several share the word: a broadcast); red where a bank serves several words."""
    from matplotlib.patches import Rectangle
    width = max(len(lane) for lane in lanes if lane)
    part = WARP // width
    row = 0
    for start in range(0, WARP, part):
        words: dict[int, list] = {}
        for lane in range(start, start + part):
            for a in lanes[lane] or ():
                words.setdefault(a, []).append(lane)
        by_bank: dict[int, list] = {}
        for a in sorted(words):
            by_bank.setdefault(a % BANKS, []).append(a)
        depth = max((len(v) for v in by_bank.values()), default=0)
        for bank, addrs in by_bank.items():
            for j, a in enumerate(addrs):
                ls = words[a]
                ax.add_patch(Rectangle((bank, row + j), 0.95, 0.9,
                                       color="tab:red" if len(addrs) > 1 else "tab:green", alpha=0.6))
                label = f"{ls[0]}" if len(ls) == 1 else f"{ls[0]}+"
                ax.text(bank + 0.47, row + j + 0.45, label, ha="center", va="center", fontsize=6)
        row += depth
    ax.set_xlim(0, BANKS)
    ax.set_ylim(row, 0)
    ax.set_yticks(range(row + 1))
    ax.set_xlabel("bank")
    ax.set_ylabel("pass")
    ax.set_title(title.format(passes=passes(lanes)), fontsize=9)
    ax.set_xticks(range(0, BANKS, 4))
    ax.grid(False)
    return ax
