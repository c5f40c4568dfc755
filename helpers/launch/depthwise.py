"""The depthwise stages of chapter 16 (conv_dgrad and conv_wgrad 16_dw_tiles, 16_dw_regs): 2-D
depthwise convolutions (groups = C = K, weight (C, 1, R, S)) with any stride, dilation and
padding per side, from tiles staged in local memory (kernels/common/depthwise.h).

A work-group is BX x BY x PL work-items: PL slices of a BX x BY tile. The registry's TX, TY
are the tile a layer with large planes gets; a plane smaller than the tile (a 7x7 layer) gets a
tile shrunk to it (powers of two) and the work-items left over become more slices (PL), so that a
work-group stays TX * TY work-items; but never more than PL_MAX slices (a device limit), nor more
slices than there are planes (dgrad). XPW (16_dw_regs): outputs per work-item along the row.

    dgrad   one launch: slice z of a work-group computes a TH x TW tile of one plane (n, c) of dx
    wgrad   wgrad_dw_partial: work-group (c, split) sums the R x S weights of channel c over a
            split of its output tiles (SPLITS per channel: about SPLIT_TARGET work-groups in all),
            partials (SPLITS, C*R*S) a workspace; then wgrad_sum adds each weight's SPLITS
            partials in order (kernels/common/wgrad_sum.h, as stages 02-03)

Every geometry value the kernels fold is a JIT parameter (``geometry``), so a layer's kernels are
built for it; the int arguments are the extents the kernels index with.
"""
from __future__ import annotations

import numpy as np

from ..ops.problem import Problem
from . import Step, Workspace, cdiv, round_up
from .local import LOCAL_LIMIT

SUM_WG = 64     # wgrad_sum's work-group: one work-item per weight
# at most this many slices (the work-group's third dimension): NVIDIA's OpenCL allows 64 work-items
# along it (1024 along the others), and a launch past it fails whatever the kernel does
PL_MAX = 64


def pow2_at_least(v: int) -> int:
    return 1 << max(0, v - 1).bit_length()


def _axes(p: Problem) -> dict:
    q = p.dims
    (h, w), (oh, ow), (r, s) = q["size"], q["out"], q["kernel"]
    (sh, sw), (dh, dw), ((ph, _), (pw, _)) = q["strides"], q["dilation"], q["pads"]
    return dict(H=h, W=w, OH=oh, OW=ow, R=r, S=s, SH=sh, SW=sw, PH=ph, PW=pw, DH=dh, DW=dw)


def _span(tile: int, pad: int, taps: int, dil: int, stride: int) -> int:
    """dy rows (or columns) a tile of ``tile`` input rows reads, whatever its first row's
    residue mod the stride: floor((h0 + tile - 1 + pad) / stride) - floor((h0 + pad - (taps-1)*dil) / stride) + 1."""
    return max((h0 + tile - 1 + pad) // stride - (h0 + pad - (taps - 1) * dil) // stride + 1 for h0 in range(stride))


def geometry(p: Problem, d: dict) -> dict:
    """The JIT parameters of a depthwise stage for this problem (kernels/common/depthwise.h's
    names), its grid's tile counts, and what the host needs (LOCAL bytes, SPLITS, PER_SPLIT)."""
    a, dgrad = _axes(p), p.op == "conv_dgrad"
    xpw = d.get("XPW", 1)
    if dgrad and xpw > 1:
        xpw = round_up(xpw, a["SW"])          # each work-item's first element a multiple of SW
    rows, cols = (a["H"], a["W"]) if dgrad else (a["OH"], a["OW"])   # the tiled outputs
    bx, by = min(d["TX"], pow2_at_least(cdiv(cols, xpw))), min(d["TY"], pow2_at_least(rows))
    pl = min(PL_MAX, max(1, d["TX"] * d["TY"] // (bx * by)))
    if dgrad:                                 # no more slices than planes, nor than tiles of a channel
        pl = min(pl, pow2_at_least(p.dims["N"] * p.dims["C"]))
    else:
        pl = max(pl, cdiv(2, bx * by))       # the reduction's tree takes 2 work-items or more
    th, tw, rs = by, bx * xpw, a["R"] * a["S"]
    g = dict(R=a["R"], S=a["S"], SH=a["SH"], SW=a["SW"], PH=a["PH"], PW=a["PW"], DH=a["DH"], DW=a["DW"],
             BX=bx, BY=by, PL=pl, TH=th, TW=tw, TILES_X=cdiv(cols, tw), TILES_Y=cdiv(rows, th))
    if dgrad:
        g.update(LH=_span(th, a["PH"], a["R"], a["DH"], a["SH"]), LW=_span(tw, a["PW"], a["S"], a["DW"], a["SW"]))
        g["LOCAL"] = 4 * pl * (g["LH"] * g["LW"] + rs)
        if "XPW" in d:
            jmin = (a["PW"] - (a["S"] - 1) * a["DW"]) // a["SW"]
            g.update(XPW=xpw, JMIN=jmin, NWIN=(xpw - 1 + a["PW"]) // a["SW"] - jmin + 1,
                     VEC=int(xpw % 4 == 0 and a["W"] % 4 == 0))
    else:
        g.update(LH=(th - 1) * a["SH"] + (a["R"] - 1) * a["DH"] + 1, LW=(tw - 1) * a["SW"] + (a["S"] - 1) * a["DW"] + 1,
                 KH=a["R"], KW=a["S"])
        g["RED"] = max(pl * g["LH"] * g["LW"], rs * bx * by * pl // 2)
        g["LOCAL"] = 4 * g["RED"]
        count = p.dims["N"] * g["TILES_X"] * g["TILES_Y"]          # tiles per channel
        splits = min(max(1, d["SPLIT_TARGET"] // p.dims["C"]), cdiv(count, pl))
        per_split = round_up(cdiv(count, splits), pl)
        g.update(PER_SPLIT=per_split, SPLITS=cdiv(count, per_split))
        if "XPW" in d:
            g.update(XPW=xpw, NWIN=(xpw - 1) * a["SW"] + (a["S"] - 1) * a["DW"] + 1,
                     VEC=int(xpw % 4 == 0 and a["OW"] % 4 == 0))
    return g


def jit(p: Problem, d: dict) -> dict:
    """The defines the kernels are built with (geometry without the host's own values)."""
    return {k: v for k, v in geometry(p, d).items() if k not in ("TILES_X", "TILES_Y", "LOCAL", "PER_SPLIT", "SPLITS")}


def depthwise_requires(p: Problem, d: dict):
    """A 2-D depthwise convolution with channel multiplier 1 whose tiles fit in local memory."""
    q = p.dims
    if q["rank"] != 2:
        return f"it runs 2-D depthwise convolutions; this one is {q['rank']}-D"
    if not q["groups"] == q["C"] == q["K"]:
        return (f"it runs depthwise convolutions with channel multiplier 1 (groups = C = K); this one has "
                f"groups = {q['groups']}, C = {q['C']}, K = {q['K']}")
    for name in ("TX", "TY", "XPW"):
        if name in d and (d[name] < 1 or d[name] & (d[name] - 1)):
            raise ValueError(f"{name} must be a power of two >= 1 (the work-group's reduction halves it), got {d[name]}")
    if d["TX"] * d["TY"] < 2 or d["TX"] * d["TY"] > 1024:
        raise ValueError(f"TX * TY = {d['TX'] * d['TY']} work-items: a work-group takes 2 to 1024")
    g = geometry(p, d)
    if g["LOCAL"] > LOCAL_LIMIT:
        return (f"its tiles need {g['LOCAL']:,} bytes of local memory, more than {LOCAL_LIMIT:,} "
                f"(a {q['kernel'][0]}x{q['kernel'][1]} filter dilated by {q['dilation']}): lower TX or TY")
    return None


def _extents(p: Problem, g: dict) -> tuple:
    a = _axes(p)
    return tuple(np.int32(v) for v in (a["H"], a["W"], a["OH"], a["OW"], g["TILES_X"], g["TILES_Y"]))


def dgrad(p: Problem, d: dict) -> list:
    g, q = geometry(p, d), p.dims
    planes = q["N"] * q["C"]
    groups = g["TILES_X"] * g["TILES_Y"] * cdiv(planes, g["PL"])
    h, w, oh, ow, tiles_x, tiles_y = _extents(p, g)
    return [Step("conv_dgrad", (g["BX"] * groups, g["BY"], g["PL"]), (g["BX"], g["BY"], g["PL"]),
                 ("grad_output", "output", "weight", "grad_input", np.int32(planes), np.int32(q["C"]),
                  h, w, oh, ow, tiles_x, tiles_y))]


def wgrad(p: Problem, d: dict) -> list:
    g, q = geometry(p, d), p.dims
    weights = q["C"] * g["R"] * g["S"]
    return [Step("wgrad_dw_partial", (g["BX"] * q["C"] * g["SPLITS"], g["BY"], g["PL"]), (g["BX"], g["BY"], g["PL"]),
                 ("input", "grad_output", "output", "partials", np.int32(q["N"]), np.int32(q["C"]), *_extents(p, g),
                  np.int32(g["PER_SPLIT"]))),
            Step("wgrad_sum", (round_up(weights, SUM_WG),), (SUM_WG,),
                 ("partials", "grad_weight", np.int32(q["C"]), np.int32(1), np.int32(g["SPLITS"])))]


LAUNCHES = {"dgrad": dgrad, "wgrad": wgrad}


def steps(stage, p: Problem, d: dict) -> list:
    return LAUNCHES[stage.launch](p, d)


def workspace(stage, p: Problem, d: dict) -> dict:
    if stage.launch != "wgrad":
        return {}
    g = geometry(p, d)
    return {"partials": Workspace("float32", g["SPLITS"] * p.dims["C"] * g["R"] * g["S"])}
