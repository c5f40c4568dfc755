"""Models of chapters 09-10 (local memory): how often each global value is read with and without
a tile, and the bank model of the stages' local-memory accesses, one warp at a time. The tile's
geometry and constraints are the launcher's (helpers/launch/local.py).

    reuse(dims, dict(TX=32, TY=4, CB=32, KC=8, XPW=4, CPW=4))
"""
from __future__ import annotations

from ..launch.local import GROUP_LIMIT, LOCAL_LIMIT, check_params, fitted, jit_tile, params, tile_facts  # noqa: F401


def global_reads(dims: dict, d: dict | None = None) -> dict:
    """Floats each stage reads from global memory for one layer (stride 1), dy and w separately.

    Without a tile (d None: one work-item per element, no cache, as stage 02 counts): every
    work-item reads KH*KW dy values and KH*KW weights per output channel. With a tile: each group
    reads its patch and weight slab once per chunk (the halo and the padded channels included).
    """
    n, c, h, w, k = (dims[x] for x in ("N", "C", "H", "W", "K"))
    kh, kw = dims["KH"], dims["KW"]
    if d is None:
        per = n * c * h * w * k * kh * kw
        return {"dy": per, "w": per}
    groups = n * -(-h // d["TY"]) * -(-w // d["TX"]) * -(-c // d["CB"])
    chunks = -(-k // d["KC"])
    f = tile_facts(d, kh, kw)
    return {"dy": groups * chunks * f["patch"], "w": groups * chunks * f["weights"]}


def tile_fmas(dims: dict, d: dict) -> int:
    """Multiply-adds a tiled stage executes (stride 1): every position of every tile, idle ones
    past the plane's edge included, every channel of every block, every depth of every chunk and
    every tap. The layer itself needs N*H*W*C*K*KH*KW; ncu's FFMA count is this one."""
    up = lambda x, m: -(-x // m) * m       # noqa: E731
    return (dims["N"] * up(dims["H"], d["TY"]) * up(dims["W"], d["TX"]) * up(dims["C"], d["CB"])
            * up(dims["K"], d["KC"]) * dims["KH"] * dims["KW"])


def reuse(dims: dict, d: dict | None = None) -> dict:
    """How many times each global value is read on average (1: once), and FLOPs per byte read."""
    reads = global_reads(dims, d)
    dy_size = dims["N"] * dims["K"] * dims["OH"] * dims["OW"]
    w_size = dims["C"] * dims["K"] * dims["KH"] * dims["KW"]
    flops = 2 * dims["N"] * dims["K"] * dims["OH"] * dims["OW"] * dims["C"] * dims["KH"] * dims["KW"]
    return {"dy": reads["dy"] / dy_size, "w": reads["w"] / w_size,
            "flops_per_byte": flops / (4 * (reads["dy"] + reads["w"]))}


# ------------------------------------------------------------------------------------------
# Chapter 10: the local-memory accesses of stages 09_prefetch and 10_*, one warp at a time, in
# the bank model of helpers/chapters/banks.py (32 banks of 4 bytes; 8-byte accesses
# served a half-warp at a time, 16-byte ones a quarter-warp at a time). A tile's ROWCOPY=1 (stage
# 10_swizzle's switch) copies dy by whole stored rows. The dy row a work-item reads is NUQ
# float4s, of which the sums use XPW + KW - 1 floats: the compiler narrows the last float4 to the
# words used (NVIDIA's SASS for the CUDA twins at the recorded tiles: LDS.128, LDS.128, LDS.64),
# and the model reads it that wide (2 words: 8 bytes, a half-warp at a time).

LAYOUTS = ("prefetch", "transposed", "padded", "swizzle")
ACCESSES = ("weight store", "dy store", "weight read", "dy read")


def _shape(d: dict, kh: int, kw: int) -> dict:
    d = params(d)
    txg, cg = d["TX"] // d["XPW"], d["CB"] // d["CPW"]
    ph, pw = d["TY"] + kh - 1, d["TX"] + kw - 1
    pwq = -(-pw // 4)
    return dict(d, TXG=txg, CG=cg, LS=txg * d["TY"] * cg, PH=ph, PW=pw, PWQ=pwq, ROWS=d["KC"] * kh * kw,
                TAPS=kh * kw, KH=kh, KW=kw, DYW=4 * pwq if d["ROWCOPY"] else pw, NU=d["XPW"] + kw - 1)


def dy_copy_size(s: dict) -> int:
    """Floats of one chunk's dy copy: the patch, or with ROWCOPY its whole stored rows."""
    return s["KC"] * s["PH"] * s["DYW"]


def dy_read_words(s: dict, u: int) -> int:
    """Words of the u-th float4 of a work-item's dy row that the sums use, rounded up to an access
    width (1, 2 or 4): the width the compiler reads it with."""
    used = min(4, s["NU"] - 4 * u)
    return 1 if used <= 1 else 2 if used == 2 else 4


def weight_word(layout: str, s: dict, row: int, cc: int) -> int:
    """Word address of weight (row = depth*taps + tap, channel cc) in one half of the slab."""
    if layout == "prefetch":
        return cc * s["ROWS"] + row                       # w's own order [channel][depth][tap]
    if layout == "padded":
        return row * (s["CB"] + 4) + cc
    if layout == "swizzle":
        return row * s["CB"] + (((cc // 4) ^ (row & (s["CB"] // 4 - 1))) * 4) + cc % 4
    return row * s["CB"] + cc                             # transposed


def _copy_weight(layout: str, s: dict, i: int) -> tuple:
    """(row, channel) of the copy's element i."""
    if layout == "swizzle":
        return i // 4 % s["ROWS"], i // (4 * s["ROWS"]) * 4 + i % 4
    return i % s["ROWS"], i // s["ROWS"]


def warp_lanes(layout: str, access: str, d: dict, kh: int = 3, kw: int = 3, warp: int = 0, step: int = 0,
               waddr=None, u: int = 0) -> list:
    """Word addresses per work-item of one warp for one access instruction of a stage.

    Stores: step = q, the copy's q-th element per work-item (dy: ``d["ROWCOPY"]`` picks the copy's
    order). Reads (depth 0 of the chunk, tap row r = step % KH): 'weight read' the first weight
    read (tap s = 0, channels j4 = 0), 'dy read' the u-th float4 of the work-item's row (as wide
    as the words the sums use: dy_read_words). ``waddr(row, channel, shape)``, if given, places
    the weights instead of the layout's ``weight_word`` (chapter 10's exercise: the learner's index).
    """
    s = _shape(d, kh, kw)
    word = waddr or (lambda row, cc, s_: weight_word(layout, s_, row, cc))
    vec = layout != "prefetch"
    lanes = []
    for lane in range(32):
        lid = warp * 32 + lane
        if lid >= s["LS"]:
            lanes.append(None)
            continue
        xi, yi, ci = lid % s["TXG"], lid // s["TXG"] % s["TY"], lid // (s["TXG"] * s["TY"])
        if access in ("weight store", "dy store"):
            i = lid + step * s["LS"]
            if access == "weight store":
                if i >= s["CB"] * s["ROWS"]:
                    lanes.append(None)
                    continue
                lanes.append([word(*_copy_weight(layout, s, i), s)])
            else:
                if i >= dy_copy_size(s):
                    lanes.append(None)
                    continue
                if s["ROWCOPY"]:                                  # whole stored rows: element i is word i
                    lanes.append([i])
                    continue
                row_len = 4 * s["PWQ"] if vec else s["PW"]
                lanes.append([(i // (s["PH"] * s["PW"]) * s["PH"] + i // s["PW"] % s["PH"]) * row_len + i % s["PW"]])
        else:
            r = step % kh
            py = yi + kh - 1 - r
            if access == "dy read":
                if vec:
                    base = 4 * (py * s["PWQ"] + xi * (s["XPW"] // 4) + u)
                    lanes.append([base + e for e in range(dy_read_words(s, u))])
                else:
                    lanes.append([py * s["PW"] + xi * s["XPW"]])
            else:
                if vec:
                    base = word(r * kw, ci * s["CPW"], s)
                    lanes.append([base + e for e in range(4)])
                else:
                    lanes.append([word(r * kw, ci * s["CPW"], s)])
    return lanes


def store_extra(layout: str, access: str, d: dict, kh: int = 3, kw: int = 3, waddr=None) -> int:
    """Extra passes (beyond one per warp instruction) of one work-group's copy of one chunk into
    local memory: 'weight store' or 'dy store', every warp and every step of the copy."""
    from .banks import passes
    s = _shape(d, kh, kw)
    total = s["CB"] * s["ROWS"] if access == "weight store" else dy_copy_size(s)
    extra = 0
    for q in range(-(-total // s["LS"])):
        for w in range(-(-s["LS"] // 32)):
            lanes = warp_lanes(layout, access, d, kh, kw, w, q, waddr)
            if any(lanes):
                extra += passes(lanes) - 1
    return extra


def launch_conflicts(layout: str, d: dict, dims: dict) -> dict:
    """Extra passes (conflicts: passes beyond a conflict-free access of the same width) of a whole
    launch, stores and reads, counted warp by warp for one group and one chunk and multiplied out.
    The unit ncu counts in l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{st,ld}."""
    from .banks import passes
    kh, kw = dims["KH"], dims["KW"]
    s = _shape(d, kh, kw)
    vec = layout != "prefetch"
    warps = -(-s["LS"] // 32)

    def extra(lanes):
        active = [lane for lane in lanes if lane]
        if not active:
            return 0
        width = len(active[0])
        parts = sum(1 for p in range(0, 32, 32 // width) if any(lanes[p:p + 32 // width]))
        return passes(lanes) - parts

    store = 0
    for access, total in (("weight store", s["CB"] * s["ROWS"]), ("dy store", dy_copy_size(s))):
        for q in range(-(-total // s["LS"])):
            store += sum(extra(warp_lanes(layout, access, d, kh, kw, w, q)) for w in range(warps))
    # reads per chunk: every depth and tap row; dy: NU scalars, or ceil(NU/4) float4s, each counted
    # at its own width (the last one narrowed); weights: KW taps x (CPW scalars or CPW/4 float4s),
    # each instruction the pattern of the first (later ones shift every address alike: the same
    # bank pattern up to a rotation). The scalar dy reads too: one pattern, NU times.
    load = 0
    for r in range(kh):
        if vec:
            dy = sum(extra(warp_lanes(layout, "dy read", d, kh, kw, w, r, u=u))
                     for u in range(-(-s["NU"] // 4)) for w in range(warps))
        else:
            dy = s["NU"] * sum(extra(warp_lanes(layout, "dy read", d, kh, kw, w, r)) for w in range(warps))
        weights = kw * (s["CPW"] // 4 if vec else s["CPW"])
        load += s["KC"] * (dy + weights * sum(extra(warp_lanes(layout, "weight read", d, kh, kw, w, r))
                                              for w in range(warps)))
    groups = dims["N"] * -(-dims["H"] // s["TY"]) * -(-dims["W"] // s["TX"]) * -(-dims["C"] // s["CB"])
    chunks = -(-dims["K"] // s["KC"])
    return {"store": store * groups * chunks, "load": load * groups * chunks}
