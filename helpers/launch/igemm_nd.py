"""Chapter 16's implicit GEMM for convolutions of any shape (conv_forward, conv_dgrad and
conv_wgrad 16_igemm_nd): chapter 11's tile loop (kernels/common/gemm_core.h) over the index
arithmetic of kernels/common/igemm_nd.h, for every shape helpers/ops/shape.py accepts (1 to 4
spatial axes, groups, dilation, a stride per axis, a padding per side).

Each group is its own GEMM over its channel slices, the groups side by side in dim 2 of the
NDRange (one launch for all of them); the launches (the registry's ``launch``):

    forward   one kernel: y_g (K/G x N*OV) = w_g . cols, dim 2 = the group
    dgrad     one kernel: dx_g (C/G x N*V) = w_g . dy' columns, one GEMM per group and phase
              (igemm_nd.h: the input positions of one residue mod the stride per axis, with only
              the taps that reach them), dim 2 = group * PHASES + phase
    wgrad     igemm_nd_wgrad: dw_g (K/G x C/G*taps) = dy'_g . cols over a slice of SLICE output
              positions per work-group (dim 2 = group * SPLITS + slice), partials (SPLITS, weights)
              a workspace in dw's order; then wgrad_sum adds each weight's slices in slice order
              (a fixed order: the same bits every run, as stage 06)

The rank, taps, strides and dilations (and the phase constants) are JIT parameters (``jit``); the
extents and paddings are int arguments, so one build serves every layer with the same taps. The
tile is the registry's (or the device's tuned one), fitted to the product (``fit``): a dimension
smaller than half the tile narrows it, so a ResNeXt group of 4 channels is not computed in a tile
of 64 rows of which 60 are zeros. The weight gradient's slices are SLICE positions, shorter where
the launch has fewer work-groups than SPLIT_TARGET (``slice_length``: helpers/launch/wgrad.py's rule).
"""
from __future__ import annotations

from math import gcd, prod

import numpy as np

from ..ops.gemm import tile_requires
from ..ops.problem import INT32_MAX, Problem
from . import Step, Workspace, cdiv, round_up
from .gemm import blocked
from .local import GROUP_LIMIT, LOCAL_LIMIT
from .wgrad import filled

AXES = "ADHW"            # the kernels' axes, the fourth (A) in front
SUM_WG = 256             # split_sum's work-group
GRID_LIMIT = 65535       # dim 2 of an NDRange: a grid dimension of at most 65535 blocks on some GPUs


def _axes(p: Problem) -> list:
    """(input extent, output extent, kernel, stride, padding before, dilation) per axis A, D, H, W,
    unit extents in front of the rank."""
    q = p.dims
    lead = 4 - q["rank"]
    rows = zip(q["size"], q["out"], q["kernel"], q["strides"], (b for b, _ in q["pads"]), q["dilation"])
    return [(1, 1, 1, 1, 0, 1)] * lead + list(rows)


def geometry(p: Problem) -> dict:
    """igemm_nd.h's JIT parameters: RANK, per axis the kernel extent, stride and dilation, and the
    input gradient's phase constants (TS, NT, OS)."""
    g = {"RANK": p.dims["rank"]}
    for axis, (_, _, k, s, _, dil) in zip(AXES, _axes(p)):
        common = gcd(s, dil)
        g.update({f"K{axis}": k, f"S{axis}": s, f"D{axis}": dil,
                  f"TS{axis}": s // common, f"NT{axis}": cdiv(k, s // common), f"OS{axis}": dil // common})
    return g


def _pow2(v: int) -> bool:
    return v >= 1 and v & (v - 1) == 0


def product(p: Problem) -> tuple:
    """(M, N) of one group's GEMM: rows and columns (dgrad: the largest phase's columns)."""
    q, cg, kg = p.dims, p.dims["C"] // p.dims["groups"], p.dims["K"] // p.dims["groups"]
    taps = prod(q["kernel"])
    if p.op == "conv_dgrad":
        return cg, q["N"] * prod(cdiv(i, s) for i, s in zip(q["size"], q["strides"]))
    if p.op == "conv_forward":
        return kg, q["N"] * prod(q["out"])
    return kg, cg * taps


def local_bytes(d: dict) -> int:
    """gemm_core.h's two tiles, padded rows included (the wider padding of GEMM_LDS4)."""
    pad = 4 if d.get("GEMM_LDS4") else 1
    return 4 * d["TK"] * ((d["TM"] + pad) + (d["TN"] + pad))


def fit(p: Problem, d: dict) -> dict:
    """The tile for this problem: the registry's TM x TN (work-items RM x RN = TM/WM x TN/WN, each
    WM x WN) narrowed where the product is smaller than half of it. Along m, first the rows per
    work-item halve, then the work-items along m, which go to n (the work-group keeps its size)
    while the B tile fits; along n likewise, without the move. Kept: RM a multiple of WN (each
    work-item fetches B in one column: dgrad, forward), the work-group a multiple of TK (wgrad:
    its B elements of a step in one position), TN >= 4; GEMM_LDS4 only where WM and WN stay
    multiples of 4. Tiles that are not powers of two are taken as given."""
    tiles = {k: d[k] for k in ("TM", "TN", "TK", "WM", "WN")}
    lds4 = d.get("GEMM_LDS4", 0)
    if not all(_pow2(v) for v in tiles.values()):
        return {**tiles, "GEMM_LDS4": lds4}
    m, n = product(p)
    wm, wn, tk = tiles["WM"], tiles["WN"], tiles["TK"]
    rm, rn = tiles["TM"] // wm, tiles["TN"] // wn
    wgrad = p.op == "conv_wgrad"
    min_rm = 1 if wgrad else wn

    def fits(rm_, rn_, wn_):
        return local_bytes({"TK": tk, "TM": rm_ * wm, "TN": rn_ * wn_, "GEMM_LDS4": lds4}) <= LOCAL_LIMIT

    while rm * wm >= 2 * m:
        if wm > 1:
            wm //= 2
        elif rm > min_rm and rm % 2 == 0 and fits(rm // 2, rn * 2, wn):
            rm, rn = rm // 2, rn * 2
        else:
            break
    while rn * wn >= 2 * n and rn * wn > 4:
        if wn > 1:
            wn //= 2
        elif rn > 1 and (not wgrad or (rm * rn // 2) % tk == 0):
            rn //= 2
        else:
            break
    return {"TM": rm * wm, "TN": rn * wn, "TK": tk, "WM": wm, "WN": wn,
            "GEMM_LDS4": lds4 if wm % 4 == 0 and wn % 4 == 0 else 0}


# -- the weight gradient's slices -------------------------------------------------------------

def positions(p: Problem) -> int:
    return p.dims["N"] * prod(p.dims["out"])


def slice_length(p: Problem, d: dict) -> int:
    """SLICE output positions per slice; shorter where the launch would have fewer work-groups
    than SPLIT_TARGET (wgrad.filled: stage 06's rule); longer (whole tile steps) where the groups'
    slices would pass GRID_LIMIT in dim 2."""
    t, (m, n) = fit(p, d), product(p)
    tiles = p.dims["groups"] * cdiv(m, t["TM"]) * cdiv(n, t["TN"])
    length = filled(d["SLICE"], d["TK"], tiles, positions(p), d.get("SPLIT_TARGET", 1))
    least = cdiv(positions(p), max(1, GRID_LIMIT // p.dims["groups"]))
    return max(length, round_up(least, d["TK"]))


def splits(p: Problem, d: dict) -> int:
    return cdiv(positions(p), slice_length(p, d))


def weights(p: Problem) -> int:
    q = p.dims
    return q["C"] * q["K"] // q["groups"] * prod(q["kernel"])


def jit(p: Problem, d: dict) -> dict:
    """Everything the kernels are built with beside the registry's: the geometry, the fitted tile,
    and for the weight gradient the slice and float4 loads of dy' where four consecutive positions
    lie in one image (OV % 4 == 0)."""
    out = {**geometry(p), **fit(p, d)}
    if p.op == "conv_wgrad":
        out.update(SLICE=slice_length(p, d),
                   GEMM_VEC_A=int(prod(p.dims["out"]) % 4 == 0 and out["TK"] % 4 == 0))
    return out


def igemm_nd_requires(p: Problem, d: dict):
    """The fitted tile's constraints (gemm_core.h), the work-group within GROUP_LIMIT, dim 2
    within GRID_LIMIT, and every index within 32 bits; else the unmet need, by name."""
    t, q = fit(p, d), p.dims
    wgrad = p.op == "conv_wgrad"
    need = tile_requires(t, vectors=wgrad and bool(jit(p, d)["GEMM_VEC_A"]), fixed_column=not wgrad)
    if need:
        return need
    wg = (t["TM"] // t["WM"]) * (t["TN"] // t["WN"])
    if wg > GROUP_LIMIT:
        return f"its work-group (TM/WM * TN/WN = {wg} work-items) is larger than {GROUP_LIMIT}: lower TM or TN"
    if local_bytes(t) > LOCAL_LIMIT:
        return f"its tiles need {local_bytes(t):,} bytes of local memory, more than {LOCAL_LIMIT:,}: lower TK, TM or TN"
    if wgrad and wg % t["TK"]:
        return (f"the work-group (TM/WM * TN/WN = {wg} work-items) must be a multiple of TK={t['TK']} "
                f"(a work-item's elements of B in one position per step)")
    if wgrad and d["SLICE"] % d["TK"]:
        return f"SLICE={d['SLICE']} must be a multiple of TK={d['TK']} (whole tile steps per slice)"
    depth = q["groups"] * (prod(q["strides"]) if p.op == "conv_dgrad" else splits(p, d) if wgrad else 1)
    if depth > GRID_LIMIT:
        return (f"{depth:,} groups x {'phases' if p.op == 'conv_dgrad' else 'slices'} in dim 2 of the NDRange, "
                f"more than {GRID_LIMIT}")
    sizes = {"the input": q["N"] * q["C"] * prod(q["size"]), "the output": q["N"] * q["K"] * prod(q["out"]),
             "the weight": weights(p)}
    if wgrad:
        sizes["the partial sums"] = splits(p, d) * weights(p)
        sizes["the positions and a slice"] = positions(p) + slice_length(p, d)
    for what, count in sizes.items():
        if count > INT32_MAX:
            return f"{what} holds {count:,} values; the kernels index with 32-bit integers (use a smaller batch)"
    return None


# -- launches ------------------------------------------------------------------------------------

def _extents(p: Problem) -> tuple:
    """ND_ARGS: N, C, K, G, the input's extents A, D, H, W, the output's, the paddings before."""
    q, ax = p.dims, _axes(p)
    return tuple(np.int32(v) for v in (q["N"], q["C"], q["K"], q["groups"], *(a[0] for a in ax), *(a[1] for a in ax),
                                       *(a[4] for a in ax)))


def forward(p: Problem, d: dict) -> list:
    m, n = product(p)
    return [Step("conv_forward", *blocked(m, n, fit(p, d), depth=p.dims["groups"]),
                 ("input", "weight", "bias", "output", *_extents(p)))]


def dgrad(p: Problem, d: dict) -> list:
    m, n = product(p)
    depth = p.dims["groups"] * prod(p.dims["strides"])
    return [Step("conv_dgrad", *blocked(m, n, fit(p, d), depth=depth),
                 ("grad_output", "output", "weight", "grad_input", *_extents(p)))]


def wgrad(p: Problem, d: dict) -> list:
    """The slices' GEMMs, then wgrad_sum over all C*K/G*taps weights: it adds C*K*KH*KW values, so
    it is given C*KA*KD as its C and K/G as its K."""
    q, (m, n) = p.dims, product(p)
    count = np.int32(splits(p, d))
    front = prod(q["kernel"][:-2]) if q["rank"] > 2 else 1
    return [Step("igemm_nd_wgrad", *blocked(m, n, fit(p, d), depth=q["groups"] * count),
                 ("input", "grad_output", "output", "partials", *_extents(p), count)),
            Step("wgrad_sum", (round_up(weights(p), SUM_WG),), (SUM_WG,),
                 ("partials", "grad_weight", np.int32(q["C"] * front), np.int32(q["K"] // q["groups"]), count))]


LAUNCHES = {"forward": forward, "dgrad": dgrad, "wgrad": wgrad}


def steps(stage, p: Problem, d: dict) -> list:
    return LAUNCHES[stage.launch](p, d)


def workspace(stage, p: Problem, d: dict) -> dict:
    if stage.launch != "wgrad":
        return {}
    return {"partials": Workspace("float32", splits(p, d) * weights(p))}
