"""Pictures of the primer (notebooks/01a_execution_and_memory_model): the NDRange cut into
work-groups, work-items on SIMD lanes, and OpenCL's four memory spaces."""
from __future__ import annotations

import matplotlib.patches as mpatches


def ndrange_groups(global_size: int, local_size: int, lanes: int) -> list[dict]:
    """Work-items 0..global_size-1 of a 1-D NDRange: their work-group, and their SIMD group
    (warp / wavefront / CPU vector) and lane inside it."""
    return [{"gid": g, "group": g // local_size, "lid": g % local_size,
             "simd": (g % local_size) // lanes, "lane": (g % local_size) % lanes} for g in range(global_size)]


def draw_ndrange(ax, global_size: int = 48, local_size: int = 16, lanes: int = 8, used: int | None = None) -> dict:
    """One row of squares per work-group; colour = SIMD group; crossed = padding work-items that
    return at once (the NDRange is rounded up to a multiple of the work-group)."""
    items = ndrange_groups(global_size, local_size, lanes)
    colours = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]
    for it in items:
        x, y = it["lid"], -it["group"]
        ax.add_patch(mpatches.Rectangle((x, y), 0.9, 0.8, color=colours[it["simd"] % len(colours)], alpha=0.8))
        ax.text(x + 0.45, y + 0.4, str(it["gid"]), ha="center", va="center", fontsize=6, color="white")
        if used is not None and it["gid"] >= used:
            ax.plot([x, x + 0.9], [y, y + 0.8], color="black", lw=1)
    groups = global_size // local_size
    for g in range(groups):
        ax.text(-0.3, -g + 0.4, f"work-group {g}", ha="right", va="center", fontsize=8)
    ax.set_xlim(-6, local_size + 0.5)
    ax.set_ylim(-groups + 0.5, 1.5)
    ax.text(local_size / 2, 1.1, f"get_local_id(0) = 0 .. {local_size - 1}  (colour: SIMD group of {lanes} lanes)",
            ha="center", fontsize=8)
    ax.set_axis_off()
    return {"groups": groups, "simd_groups_per_group": -(-local_size // lanes),
            "idle": 0 if used is None else global_size - used}


def draw_memory_model(ax) -> list[str]:
    """OpenCL's memory spaces as boxes: global and constant (whole device), local (one per
    work-group, shared by its work-items), private (one per work-item)."""
    def box(x, y, w, h, text, colour, size=8):
        ax.add_patch(mpatches.FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", fc=colour, ec="black", lw=0.8))
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)

    box(0, 0, 10, 1.1, "__global: tensors (dy, y, w, dx); every work-item of every work-group; slowest, "
        "cached", "#dbe9f6")
    box(0, 1.3, 10, 0.7, "__constant: read-only, small, cached; the same value for every work-item", "#e8f3e0")
    for g in range(2):
        x0 = 0.2 + g * 5
        box(x0, 2.3, 4.6, 2.9, "", "#fdf1e0")
        ax.text(x0 + 2.3, 4.95, f"work-group {g}", ha="center", fontsize=8)
        box(x0 + 0.2, 3.9, 4.2, 0.7, "__local: shared by this group; barrier() to sync", "#f8d9a8", 7)
        for i in range(3):
            box(x0 + 0.2 + i * 1.45, 2.5, 1.3, 1.1, f"work-item\nprivate\n(registers)", "#ffffff", 6.5)
    ax.set_xlim(-0.2, 10.2)
    ax.set_ylim(-0.2, 5.4)
    ax.set_axis_off()
    return ["__global", "__constant", "__local", "__private"]
