"""The weight gradient's split launches (conv_wgrad stages 02 and 03): a long sum over the
N*OH*OW output positions cut into slices, one work-group per (weights, slice), then a second
kernel that adds the slices' partial sums in a fixed order (deterministic, no atomics).

    split_reduction  wgrad_partial: one work-group of WG work-items per (weight, slice of
                     WG*ITEMS positions), a tree in local memory (stage 02)
    igemm_split      wgrad_igemm: the implicit GEMM dw^T (K x C*R*S) = dy'^T . cols^T on
                     gemm_core.h's tiles, dim 2 = the slice of SLICE positions (stage 03)
    igemm_phases     wgrad_phase_split: x cut into its stride x stride phases (the workspace xp,
                     phase_planes), then wgrad_igemm_phases: stage 03's GEMM reading xp (stage 05)
    igemm_blocked    wgrad_igemm_blocked: stage 03's GEMM with B copied along the reduction
                     (gemm_core.h's GEMM_B_KMAJOR), partials in the GEMM's (k, tap) order, added
                     by wgrad_sum_taps (stage 06)

All four write ``partials`` (SPLITS x C*K*R*S floats, a workspace) and end with a kernel that adds
each weight's slices in slice order: wgrad_sum (kernels/common/wgrad_sum.h), or wgrad_sum_taps for
stage 06. Stage 01 runs on the direct family (one work-item per weight). Stages 04 and 06 (and
chapter 16's 16_igemm_nd) shorten their slices where a launch would have fewer work-groups than
SPLIT_TARGET (``filled``; 1, the registry's default, never does; tuned per device).

    winograd         Winograd F(3x3,4x4) (stage 04): the dy' and x tiles transformed into U and V,
                     36 products over the tiles on gemm_core.h's tiles split into slices of SLICE
                     tiles (partial sums in M), then the slices added and transformed back
"""
from __future__ import annotations

import numpy as np

from ..ops.gemm import tile_requires
from ..ops.problem import INT32_MAX, Problem
from . import Step, Workspace, cdiv, round_up
from .gemm import blocked, split_count

ARGS = ("input", "grad_output", "output", "partials", "N", "C", "H", "W", "K", "OH", "OW", "PAD")
SUM_WG = 64     # wgrad_sum's work-group: one work-item per weight


def weights(p: Problem) -> int:
    q = p.dims
    return q["C"] * q["K"] * q["KH"] * q["KW"]


def positions(p: Problem) -> int:
    q = p.dims
    return q["N"] * q["OH"] * q["OW"]


def filled(length: int, step: int, blocks: int, terms: int, target: int) -> int:
    """A slice length that gives a launch about ``target`` work-groups where it has fewer:
    ``length`` (a multiple of ``step``) halved as many times as the runs gemm.split_count asks
    for allow (runs of a slice: enough to reach the target, at most SPLIT_MAX, each of at least
    SPLIT_MIN_TERMS terms), rounded down to a power of two, so the lengths are few and a stage
    that builds its slice into the kernel builds few. ``blocks``: the launch's work-groups per
    slice; ``terms``: the sum's length. ``target`` = 1 keeps ``length``.

    The weight gradient's sum is long and its outputs few: a layer of small planes and few
    channels (a 1x1 layer of a MobileNet, a YOLO head at 13x13, batch 1 to 8) has too few tiles
    and slices to fill a large GPU, and each slice's work-group runs its long sum alone."""
    runs = split_count(blocks * cdiv(terms, length), min(length, terms), target)
    while runs > 1 and length % (2 * step) == 0:
        length, runs = length // 2, runs // 2
    return length


def blocked_slice(p: Problem, d: dict) -> int:
    """Stage 06's slice: SLICE, shortened where the launch has fewer work-groups than SPLIT_TARGET."""
    q = p.dims
    tiles = cdiv(q["K"], d["TM"]) * cdiv(q["C"] * q["KH"] * q["KW"], d["TN"])
    return filled(d["SLICE"], d["TK"], tiles, positions(p), d.get("SPLIT_TARGET", 1))


def slice_size(stage, p: Problem, d: dict) -> int:
    """Output positions per slice: WG*ITEMS (stage 02), SLICE (stages 03 and 05), SLICE or
    shorter (stage 06: blocked_slice)."""
    if stage.launch == "split_reduction":
        return d["WG"] * d["ITEMS"]
    return blocked_slice(p, d) if stage.launch == "igemm_blocked" else d["SLICE"]


def splits(p: Problem, length: int) -> int:
    """Slices of ``length`` consecutive output positions (n, oh, ow) that cover the sum."""
    return -(-positions(p) // length)


# The slices are one dimension of the NDRange (dim 1 or 2); CUDA-based OpenCL drivers map it to
# a grid dimension of at most 65535 blocks.
MAX_SPLITS = 65535


def workspace_requires(p: Problem, length: int):
    if splits(p, length) > MAX_SPLITS:
        return (f"{splits(p, length):,} slices of {length} positions; at most {MAX_SPLITS} (a grid "
                f"dimension on some GPUs): use longer slices")
    if positions(p) + length > INT32_MAX:      # the kernels' slice ends: q0 + length
        return (f"{positions(p):,} output positions plus a slice of {length} pass 32-bit indexing; "
                f"use a smaller batch")
    if splits(p, length) * weights(p) > INT32_MAX:
        return (f"its workspace would hold {splits(p, length) * weights(p):,} partial sums; the "
                f"kernels index with 32-bit integers (use longer slices)")
    return None


def split_requires(p: Problem, d: dict):
    """Stage 02: a power-of-two work-group (the tree halves it); the workspace within 32 bits."""
    wg = d["WG"]
    if wg < 2 or wg & (wg - 1):
        return f"WG must be a power of two >= 2 (the reduction tree halves it), got {wg}"
    return workspace_requires(p, wg * d["ITEMS"])


def vectors(p: Problem, d: dict) -> dict:
    """Stage 03: float4 loads of dy' along the positions when OH*OW % 4 == 0 (4 positions in one
    image; TK and SLICE are multiples of 4, so a float4 never straddles a slice or an image)."""
    return {"GEMM_VEC_A": int(p.dims["OH"] * p.dims["OW"] % 4 == 0)}


def blocked_jit(p: Problem, d: dict) -> dict:
    """Stage 06: stage 03's float4 loads, and the slice it runs (blocked_slice)."""
    return {**vectors(p, d), "SLICE": blocked_slice(p, d)}


def igemm_requires(p: Problem, d: dict):
    """Stage 03: gemm_core.h's tile constraints, slices a whole number of TK-steps, the workspace."""
    need = tile_requires(d, vectors=bool(vectors(p, d)["GEMM_VEC_A"]), fixed_column=True)
    if need is None and d["SLICE"] % d["TK"]:
        need = f"SLICE={d['SLICE']} must be a multiple of TK={d['TK']} (whole tile steps per slice)"
    return need or workspace_requires(p, d["SLICE"])


def blocked_requires(p: Problem, d: dict):
    """Stage 06: stage 03's needs without the fixed column; TK dividing the work-group (each
    work-item's B elements of a step in one row of the tile, decoded once per step)."""
    need = tile_requires(d, vectors=bool(vectors(p, d)["GEMM_VEC_A"]))
    wg = (d["TM"] // d["WM"]) * (d["TN"] // d["WN"])
    if need is None and wg % d["TK"]:
        need = (f"the work-group (TM/WM * TN/WN = {wg} work-items) must be a multiple of TK={d['TK']} "
                f"(a work-item's elements of B in one position per step)")
    if need is None and d["SLICE"] % d["TK"]:
        need = f"SLICE={d['SLICE']} must be a multiple of TK={d['TK']} (whole tile steps per slice)"
    return need or workspace_requires(p, blocked_slice(p, d))


# -- stage 05: the phase split ----------------------------------------------------------------

def phase_offset(r: int, stride: int, pad: int) -> int:
    """floor((r - pad) / stride) + pad: where tap r's window lies among its phase's rows
    (kernels/conv_wgrad/05_igemm_phases.cl: PHASE_OFF)."""
    return (r - pad) // stride + pad


def phase_planes(p: Problem) -> dict:
    """Stage 05's workspace xp: PR x PC phase planes (the phases some tap reads, min(kernel,
    stride) each way), each (N, C, HP, WP), with the windows' halo."""
    q = p.dims
    s, pad = q["stride"], q["pad"]
    hp = q["OH"] + phase_offset(q["KH"] - 1, s, pad) - phase_offset(0, s, pad)
    wp = q["OW"] + phase_offset(q["KW"] - 1, s, pad) - phase_offset(0, s, pad)
    planes = min(q["KH"], s) * min(q["KW"], s)
    return dict(HP=hp, WP=wp, PLANES=planes, size=planes * q["N"] * q["C"] * hp * wp)


def phases_requires(p: Problem, d: dict):
    """Stage 05: a strided layer (stride 1 has one phase: stage 03), stage 03's needs, the phase
    planes within 32-bit indexing."""
    if p.dims["stride"] == 1:
        return "the phase split needs a stride > 1 (at stride 1, x is one phase: stage 03 reads it as it lies)"
    if phase_planes(p)["size"] > INT32_MAX:
        return (f"its phase planes would hold {phase_planes(p)['size']:,} floats; the kernels index with "
                f"32-bit integers (use a smaller batch)")
    return igemm_requires(p, d)


# -- stage 04: Winograd F(3x3,4x4) --------------------------------------------------------------

WINO_T = 36      # products per tile: the 6x6 of F(3x3,4x4)
# the work-groups of the transforms through local memory (04_winograd.cl's #defines of these names)
IN_TILES, IN_CHANNELS = 4, 16           # LOAD_LOCAL: tiles x channels per work-group
OUT_C, OUT_K, OUT_WG = 8, 8, 256        # STORE_LOCAL: channels x filters per work-group, its size


def wino_geometry(p: Problem, d: dict) -> dict:
    """Tiles and padded sizes of stage 04 (kernels/conv_wgrad/04_winograd.cl's names). The Q tiles
    are cut into SPLITS slices of SLICE_LEN tiles: about SLICE each, evened out over the slices and
    rounded up to a multiple of TK (so the last slice holds fewer than SLICE_LEN padding tiles,
    however SLICE compares with Q)."""
    q = p.dims
    th, tw = -(-q["OH"] // 4), -(-q["OW"] // 4)
    tiles = q["N"] * th * tw
    products = WINO_T * cdiv(q["K"], d["TM"]) * cdiv(q["C"], d["TN"])
    target = filled(d["SLICE"], d["TK"], products, tiles, d.get("SPLIT_TARGET", 1))
    length = round_up(-(-tiles // -(-tiles // target)), d["TK"])
    count = -(-tiles // length)                 # no slice of padding alone
    return dict(TH=th, TW=tw, Q=tiles, SPLITS=count, SLICE_LEN=length, QP=count * length,
                KP=round_up(q["K"], d["TM"]), CP=round_up(q["C"], d["TN"]))


def winograd_requires(p: Problem, d: dict):
    """Stage 04: a 3x3 stride-1 layer, gemm_core.h's tiles, 32-bit indices."""
    q = p.dims
    if (q["KH"], q["KW"]) != (3, 3) or q["stride"] != 1:
        return (f"Winograd F(3x3,4x4) needs a 3x3 kernel with stride 1; this problem has a "
                f"{q['KH']}x{q['KW']} kernel with stride {q['stride']}")
    if need := tile_requires(d, vectors=True):
        # the caller's tile parameters, not the problem: refused here, never sent to the fallback
        raise ValueError(f"Winograd F(3x3,4x4) runs its products on the course GEMM, whose tiles do not fit: {need}")
    g = wino_geometry(p, d)
    if g["SPLITS"] * WINO_T > MAX_SPLITS:     # set by the caller's SLICE: refused, as the tiles
        raise ValueError(f"{g['SPLITS']:,} slices of {g['SLICE_LEN']} tiles x {WINO_T} products; at most "
                         f"{MAX_SPLITS} (a grid dimension on some GPUs): use a larger SLICE")
    largest = WINO_T * max(g["KP"] * g["QP"], g["QP"] * g["CP"], g["SPLITS"] * g["KP"] * g["CP"])
    if largest > INT32_MAX:
        return (f"its workspaces would hold {largest:,} floats; the kernels index with 32-bit "
                f"integers (use a smaller batch or a larger SLICE)")
    return None


# The x patches go through local memory (the kernel's LOAD_LOCAL) where W >= LOAD_LOCAL_W; the
# registry's 33: where a row of x is longer than a 128-byte line, so that each of a patch's six rows
# takes a line of its own and the plain kernel's loads scatter. On the H200 the x transform ran about
# 1.4 times faster through local memory at W = 56 and 224, and 5-53 % slower at W <= 28, where a patch
# lies in a few lines (results/conv_wgrad_{resnet50,vgg16}_local{01,11}_nvidia-h200.json). 1: always;
# more than any width: never.
def wino_jit(p: Problem, d: dict) -> dict:
    """Stage 04: LOAD_LOCAL from the width of x."""
    return {"LOAD_LOCAL": int(p.dims["W"] >= d["LOAD_LOCAL_W"])}


def wino_steps(p: Problem, d: dict) -> list:
    q, g, wg = p.dims, wino_geometry(p, d), d["WG"]
    i32 = {k: np.int32(v) for k, v in {**q, **g}.items() if isinstance(v, int)}
    if wino_jit(p, d)["LOAD_LOCAL"]:    # work-groups of IN_TILES tiles x IN_CHANNELS channels
        size = IN_TILES * IN_CHANNELS
        inputs = ((cdiv(g["QP"], IN_TILES) * cdiv(g["CP"], IN_CHANNELS) * size,), (size,))
    else:                           # one work-item per (tile, channel)
        inputs = ((round_up(g["QP"] * g["CP"], wg),), (wg,))
    if d.get("STORE_LOCAL", 1):     # work-groups of OUT_C channels x OUT_K filters
        outputs = ((cdiv(q["C"], OUT_C) * cdiv(q["K"], OUT_K) * OUT_WG,), (OUT_WG,))
    else:                           # one work-item per (channel, filter)
        outputs = ((round_up(q["C"] * q["K"], wg),), (wg,))
    return [
        Step("wgrad_wino_delta", (round_up(g["KP"] * g["QP"], wg),), (wg,),
             ("grad_output", "output", "U", *(i32[k] for k in ("N", "K", "OH", "OW", "TH", "TW", "QP", "KP")))),
        Step("wgrad_wino_input", *inputs,
             ("input", "V", *(i32[k] for k in ("N", "C", "H", "W", "TH", "TW")), np.int32(q["pad"]),
              i32["QP"], i32["CP"])),
        Step("wgrad_wino_gemm", *blocked(g["KP"], g["CP"], d, depth=g["SPLITS"] * WINO_T),
             ("U", "V", "M", i32["QP"], i32["KP"], i32["CP"], i32["SLICE_LEN"])),
        Step("wgrad_wino_output", *outputs,
             ("M", "grad_weight", i32["C"], i32["K"], i32["KP"], i32["CP"], i32["SPLITS"])),
    ]


def partial_steps(p: Problem, d: dict, count: int) -> list:
    """Stage 02: one work-group per (weight, slice), reducing in local memory."""
    return [Step("wgrad_partial", (weights(p) * d["WG"], count), (d["WG"], 1), ARGS)]


def igemm_steps(p: Problem, d: dict, count: int) -> list:
    """Stage 03: the implicit GEMM, one slice of the reduction per grid layer."""
    q = p.dims
    return [Step("wgrad_igemm", *blocked(q["K"], q["C"] * q["KH"] * q["KW"], d, depth=count), ARGS)]


def phases_steps(p: Problem, d: dict, count: int) -> list:
    """Stage 05: x into its phase planes, then stage 03's GEMM over them."""
    q, g = p.dims, phase_planes(p)
    hp, wp = np.int32(g["HP"]), np.int32(g["WP"])
    return [Step("wgrad_phase_split", (round_up(g["size"], d["WG"]),), (d["WG"],),
                 ("input", "xp", "N", "C", "H", "W", hp, wp, "PAD")),
            Step("wgrad_igemm_phases", *blocked(q["K"], q["C"] * q["KH"] * q["KW"], d, depth=count),
                 ("xp", "grad_output", "output", "partials", "N", "C", "K", "OH", "OW", hp, wp, "PAD"))]


def blocked_steps(p: Problem, d: dict, count: int) -> list:
    """Stage 06: the GEMM over each slice, its partials in (k, tap) order."""
    q = p.dims
    return [Step("wgrad_igemm_blocked", *blocked(q["K"], q["C"] * q["KH"] * q["KW"], d, depth=count), ARGS)]


# the family's launches (the registry's ``launch``): the kernels before the slices' sum of the
# four split stages, and stage 04's Winograd steps
SPLIT_LAUNCHES = {"split_reduction": partial_steps, "igemm_split": igemm_steps, "igemm_phases": phases_steps,
                  "igemm_blocked": blocked_steps}
LAUNCHES = {**SPLIT_LAUNCHES, "winograd": wino_steps}


def steps(stage, p: Problem, d: dict) -> list:
    if stage.launch == "winograd":
        return wino_steps(p, d)
    n, count = weights(p), splits(p, slice_size(stage, p, d))
    adder = "wgrad_sum_taps" if stage.launch == "igemm_blocked" else "wgrad_sum"   # partials in (k, tap) order
    return [*SPLIT_LAUNCHES[stage.launch](p, d, count),
            Step(adder, (round_up(n, SUM_WG),), (SUM_WG,), ("partials", "grad_weight", "C", "K", np.int32(count)))]


def workspace(stage, p: Problem, d: dict) -> dict:
    if stage.launch == "winograd":
        g = wino_geometry(p, d)
        return {"U": Workspace("float32", WINO_T * g["KP"] * g["QP"]),
                "V": Workspace("float32", WINO_T * g["QP"] * g["CP"]),
                "M": Workspace("float32", g["SPLITS"] * WINO_T * g["KP"] * g["CP"])}
    planes = {"xp": Workspace("float32", phase_planes(p)["size"])} if stage.launch == "igemm_phases" else {}
    return {**planes, "partials": Workspace("float32", splits(p, slice_size(stage, p, d)) * weights(p))}
