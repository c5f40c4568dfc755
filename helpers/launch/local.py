"""The local-memory family (conv_dgrad stages 09-10 and their CUDA twins): launch geometry, the
constraints on the tile parameters and the local memory a tile needs. One launch each:

    tiles    dim 0 = (image, tile row, tile column) x LS work-items, dim 1 = blocks of CB channels

A work-group owns a tile: TY x TX input positions of one image times CB input channels. It walks
the output channels in chunks of KC; per chunk it copies the dy patch the tile needs (TY+KH-1 rows
x TX+KW-1 columns, the halo included) and the CB x KC x KH x KW weights into local memory.
Work-items compute XPW positions x CPW channels each (09_local_tile: XPW = CPW = 1).

    tile_facts(dict(TX=32, TY=4, CB=32, KC=8, XPW=4, CPW=4), kh=3, kw=3)
"""
from __future__ import annotations

from ..ops.problem import Problem
from . import dispatch

LOCAL_LIMIT = 32 * 1024    # bytes: the least local memory OpenCL guarantees (full profile)
GROUP_LIMIT = 256          # work-items: what the devices the course targets all allow


def params(d: dict) -> dict:
    """The tile parameters with the stage's fixed ones filled in (09_local_tile: XPW = CPW = 1)."""
    return {"XPW": 1, "CPW": 1, "BUFFERS": 1, "VEC4": 0, "WPAD": 0, "ROWCOPY": 0, **d}


def tile_facts(d: dict, kh: int = 3, kw: int = 3) -> dict:
    """Work-items per group, local memory (bytes) and per-chunk copy sizes of a tile."""
    d = params(d)
    ls = (d["TX"] // d["XPW"]) * d["TY"] * (d["CB"] // d["CPW"])
    patch = d["KC"] * (d["TY"] + kh - 1) * (d["TX"] + kw - 1)
    weights = d["CB"] * d["KC"] * kh * kw
    # stored: chapter 10 (VEC4) pads the patch's rows to float4s and may pad the slab's rows (WPAD)
    row = -(-(d["TX"] + kw - 1) // 4) * 4 if d["VEC4"] else d["TX"] + kw - 1
    stored = d["KC"] * (d["TY"] + kh - 1) * row + (d["CB"] + d["WPAD"]) * d["KC"] * kh * kw
    return {"LS": ls, "patch": patch, "weights": weights,
            "local_bytes": 4 * d["BUFFERS"] * stored, "accumulators": d["XPW"] * d["CPW"]}


def check_params(d: dict, kh: int = 3, kw: int = 3) -> None:
    """The constraints written beside the defines of 09_*.cl; raises ValueError naming the first unmet."""
    d = params(d)
    for name in ("TX", "TY", "CB", "KC", "XPW", "CPW"):
        if not isinstance(d[name], int) or d[name] < 1:
            raise ValueError(f"{name} must be a positive integer, got {d[name]!r}")
    if d["TX"] % d["XPW"]:
        raise ValueError(f"XPW={d['XPW']} must divide TX={d['TX']}")
    if d["CB"] % d["CPW"]:
        raise ValueError(f"CPW={d['CPW']} must divide CB={d['CB']}")
    if d["VEC4"] and (d["XPW"] % 4 or d["CPW"] % 4):
        raise ValueError(f"the float4 reads need XPW and CPW multiples of 4, got XPW={d['XPW']}, CPW={d['CPW']}")
    if d["ROWCOPY"] not in (0, 1):
        raise ValueError(f"ROWCOPY is a switch, 0 or 1, got {d['ROWCOPY']!r}")
    if d["VEC4"] and (d["CB"] // 4) & (d["CB"] // 4 - 1):
        raise ValueError(f"the swizzle needs CB/4 a power of two, got CB={d['CB']}")
    f = tile_facts(d, kh, kw)
    if f["LS"] > GROUP_LIMIT:
        raise ValueError(f"the tile needs {f['LS']} work-items per group, more than {GROUP_LIMIT}")
    if f["local_bytes"] > LOCAL_LIMIT:
        raise ValueError(f"the tile needs {f['local_bytes']:,} bytes of local memory ({kh}x{kw} kernel), "
                         f"more than {LOCAL_LIMIT:,}: lower KC, CB or the tile")


def fitted(p: Problem, d: dict) -> dict:
    """The tile shaped to the image: no wider than the plane's side (the larger of H and W, to
    the next power of two, at least 8; a multiple of XPW), rows traded for the width given up,
    no more than that side, keeping about TX x TY positions per tile. A 7x7 plane with the
    default 32 x 4 tile would leave 78 % of every group idle; fitted, 8 x 8. One number (the
    side) decides the tile, so it takes few values: few builds (the tests' grid: 3 tiles)."""
    d = params(d)
    side = 1 << (max(p.dims["H"], p.dims["W"], 8) - 1).bit_length()
    tx = min(d["TX"], -(-side // d["XPW"]) * d["XPW"])
    ty = min(d["TY"] * max(1, d["TX"] // tx), side)
    return {**d, "TX": tx, "TY": ty}


def jit_tile(p: Problem, d: dict) -> dict:
    """The registry's ``jit`` hook: the fitted TX and TY the kernel is built with."""
    f = fitted(p, d)
    return {"TX": f["TX"], "TY": f["TY"]}


def stride_one(p: Problem, d: dict):
    """The tiled stages' requirements of a problem: stride 1 (a strided layer's patch would be
    mostly holes), and a kernel small enough for the tile's halo and weights to fit in local
    memory. Parameters that do not fit even a 3x3 kernel are an error (raised by ``tiles``), not
    a reason to fall back: a tuning search must not time the fallback in their place."""
    dims = p.dims
    if dims["stride"] != 1:
        return f"the local-memory tile needs stride 1; this problem has stride {dims['stride']}"
    try:
        check_params(d)
    except ValueError:
        return None
    try:
        check_params(fitted(p, d), dims["KH"], dims["KW"])
    except ValueError as err:
        return str(err)
    return None


def tiles(p: Problem, d: dict):
    """dim 0 = (image, tile row, tile column) x LS work-items, dim 1 = blocks of CB channels."""
    dims = p.dims
    check_params(d)
    d = fitted(p, d)
    check_params(d, dims["KH"], dims["KW"])
    ls = tile_facts(d, dims["KH"], dims["KW"])["LS"]
    groups = dims["N"] * -(-dims["H"] // d["TY"]) * -(-dims["W"] // d["TX"])
    return (groups * ls, -(-dims["C"] // d["CB"])), (ls, 1)


# the family's launches (the registry's ``launch``): its one grid, one kernel
LAUNCHES, steps, workspace = dispatch({"tiles": tiles}, {})
