"""Winograd F(2x2,3x3) (chapter 12) and F(4x4,3x3) (chapter 12a): four kernels per stage
(F(4x4) with JOINT_TRANSFORMS = 1: three launches, the filter and input transforms in one),
shared by conv_forward and conv_dgrad.

The kernels see a forward 3x3 convolution of a ``src`` with CI channels into a ``dst`` with CO
channels: conv_forward as it is; conv_dgrad renamed (dy -> dx with the rotated filter, see
kernels/conv_dgrad/12_winograd.cl). With m x m output tiles (m = 2 or 4) and A = m + 2: scratch
U (A² x CIP x COP), V (A² x CIP x PP), M (A² x COP x PP), with CI, CO and the number of tiles P
padded up to the GEMM's blocks. The launch ``blocked_f4x4`` (F(4x4), conv_forward stage 06) runs
its 36 products through the course GEMM (kernels/common/gemm_core.h) as a batch in the NDRange's
third dimension, with U stored (36, COP, CIP) for the GEMM's float4 loads along k.
"""
from __future__ import annotations

import numpy as np

from ..ops.gemm import tile_requires
from ..ops.problem import Problem
from . import Step, Workspace, cdiv, round_up
from .gemm import blocked


# the family's launches (the registry's ``launch``), each with its output tile side m: F(2x2)
# (per_element: one work-item per element of each step; tiles: per tile; local, blocked: the
# products through local memory, register-blocked), F(4x4) through the course GEMM
LAUNCHES = {"per_element": 2, "tiles": 2, "local": 2, "blocked": 2, "blocked_f4x4": 4}


def output_tile(stage) -> int:
    return LAUNCHES[stage.launch]


def wino_view(p: Problem, m: int = 2) -> dict:
    """The forward convolution the Winograd kernels compute with m x m output tiles, in their names."""
    d = p.dims
    if p.op == "conv_dgrad":
        v = dict(src="grad_output", srcy="output", dst="grad_input", N=d["N"], CI=d["K"], CO=d["C"],
                 IH=d["OH"], IW=d["OW"], OH=d["H"], OW=d["W"], PADT=d["KH"] - 1 - d["pad"])
    else:
        v = dict(src="input", srcy="input", dst="output", N=d["N"], CI=d["C"], CO=d["K"],
                 IH=d["H"], IW=d["W"], OH=d["OH"], OW=d["OW"], PADT=d["pad"])
    v["TH"], v["TW"] = -(-v["OH"] // m), -(-v["OW"] // m)
    v["P"] = v["N"] * v["TH"] * v["TW"]
    return v


def wino_blocks(d: dict) -> tuple:
    """(CI, CO, P) multiples the stage's matrix product needs (1: no padding)."""
    if "TM" in d:
        return d["TK"], d["TM"], d["TN"]
    if "TS" in d:
        return d["TS"], d["TS"], d["TS"]
    return 1, 1, 1


def wino_padded(p: Problem, d: dict, m: int = 2) -> tuple:
    v = wino_view(p, m)
    bc, bo, bp = wino_blocks(d)
    return round_up(v["CI"], bc), round_up(v["CO"], bo), round_up(v["P"], bp)


# conv_dgrad checks each element against its own magnitude. Winograd's rounding error scales
# with the magnitudes of the whole 4x4 tile (helpers/ops/conv_forward.py explains it), so with
# one or two channels to sum over, a border element of dx (PAD = 0: it sees a single dy) can
# miss that tolerance by far (chapter 12 measures 77x with K = 1, 4x with K = 2, 0.18x with
# K = 3..6, 0.035x with K = 8). Layers that thin are tiny anyway: they take the fallback.
WINO_DGRAD_MIN_K = 8


# F(4x4,3x3) rounds more (its transforms hold larger numbers and mix a 6x6 tile): measured in
# chapter 12a against conv_dgrad's per-element tolerance (random data, paddings 0-2, 4 seeds),
# its worst error is 21x the tolerance with K = 1, 19x with K = 2, 1.45x with K = 3, 0.61x with
# K = 8, 0.35x with K = 12 and 0.18x with K = 16. So F(4x4) needs K >= 16; thinner layers run
# the F(2x2) stage (its fallback), which needs K >= 8.
WINO4_DGRAD_MIN_K = 16


def _winograd(p: Problem, d: dict, m: int, min_k: int):
    dims = p.dims
    name = f"Winograd F({m}x{m},3x3)"
    if (dims["KH"], dims["KW"]) != (3, 3) or dims["stride"] != 1:
        return (f"{name} needs a 3x3 kernel with stride 1; this problem has a "
                f"{dims['KH']}x{dims['KW']} kernel with stride {dims['stride']}")
    if p.op == "conv_dgrad" and dims["K"] < min_k:
        return (f"the {name} input gradient needs K >= {min_k} output channels to stay "
                f"within conv_dgrad's per-element tolerance; this problem has K = {dims['K']}")
    if "REG" in d and (d["REG"] % 4 or d["TM"] % d["REG"] or d["TN"] % d["REG"]):
        return f"REG={d['REG']} must be a multiple of 4 that divides TM={d['TM']} and TN={d['TN']}"
    if "WM" in d and (need := tile_requires(d, vectors=True)):
        # the caller's tile parameters, not the problem: refused here, never sent to the fallback
        raise ValueError(f"{name} runs its products on the course GEMM, whose tiles do not fit: {need}")
    cip, cop, pp = wino_padded(p, d, m)
    a2 = (m + 2) ** 2
    if a2 * max(cip, cop) * max(pp, cip) > 2**31 - 1:
        return (f"its scratch matrices would hold {a2 * max(cip, cop) * pp:,} floats; the kernels "
                f"index with 32-bit integers (use a smaller batch)")
    return None


def wino_vectors(p: Problem, d: dict) -> dict:
    """F(4x4): rows of the 4x4 output tiles stored as float4 where the output's width is a
    multiple of 4 (winograd_transforms.h: WINO_VEC_OUT); elsewhere element by element."""
    return {"WINO_VEC_OUT": int(wino_view(p, 4)["OW"] % 4 == 0)}


def winograd_f23(p: Problem, d: dict):
    return _winograd(p, d, 2, WINO_DGRAD_MIN_K)


def winograd_f43(p: Problem, d: dict):
    return _winograd(p, d, 4, WINO4_DGRAD_MIN_K)


def workspace(stage, p: Problem, d: dict) -> dict:
    m = output_tile(stage)
    cip, cop, pp = wino_padded(p, d, m)
    a2 = (m + 2) ** 2
    return {"U": Workspace("float32", a2 * cip * cop), "V": Workspace("float32", a2 * cip * pp),
            "M": Workspace("float32", a2 * cop * pp)}


def steps(stage, p: Problem, d: dict) -> list:
    """Filter transform, input transform, the 16 (F(4x4): 36) matrix products, output transform;
    F(4x4) with JOINT_TRANSFORMS = 1 (its default): the two transforms in one launch."""
    m = output_tile(stage)
    v = wino_view(p, m)
    cip, cop, pp = (np.int32(x) for x in wino_padded(p, d, m))
    i32 = {k: np.int32(v[k]) for k in ("N", "CI", "CO", "IH", "IW", "OH", "OW", "PADT", "TH", "TW")}
    wg = d["WG"]
    filt = ("weight", "U", i32["CI"], i32["CO"], cip, cop)
    inp = (v["src"], v["srcy"], "V", i32["N"], i32["CI"], i32["IH"], i32["IW"], i32["TH"], i32["TW"],
           i32["PADT"], cip, pp)
    gemm = ("U", "V", "M", cip, cop, pp)
    out = ("M", v["dst"], i32["N"], i32["CO"], i32["OH"], i32["OW"], i32["TH"], i32["TW"], cop, pp)
    if stage.launch == "per_element":  # one work-item per element
        one = lambda n: ((round_up(int(n), wg),), (wg,))
        return [Step("wino_filter", *one(16 * cop * cip), filt),
                Step("wino_input", *one(16 * pp * cip), inp),
                Step("wino_gemm", *one(16 * cop * pp), gemm),
                Step("wino_output", *one(v["N"] * v["CO"] * v["OH"] * v["OW"]), out)]
    if stage.launch == "blocked_f4x4":   # U (36, COP, CIP): ci along dimension 0; the course GEMM
        if d.get("JOINT_TRANSFORMS", 1):  # both transforms in one launch (winograd_transforms.h)
            gf = cdiv(int(cip), wg) * int(cop)
            both = ("weight", "U", v["src"], v["srcy"], "V", i32["CI"], i32["CO"], cip, cop, i32["N"],
                    i32["IH"], i32["IW"], i32["TH"], i32["TW"], i32["PADT"], pp, np.int32(gf))
            first = [Step("wino_transforms", ((gf + cdiv(int(pp), wg) * int(cip)) * wg,), (wg,), both)]
        else:
            first = [Step("wino_filter", (round_up(int(cip), wg), int(cop)), (wg, 1), filt),
                     Step("wino_input", (round_up(int(pp), wg), int(cip)), (wg, 1), inp)]
        return first + [Step("wino_gemm", *blocked(int(cop), int(pp), d, (m + 2) ** 2), gemm),
                        Step("wino_output", (round_up(v["P"], wg), int(v["CO"])), (wg, 1), out)]
    steps = [Step("wino_filter", (round_up(int(cop), wg), int(cip)), (wg, 1), filt),
             Step("wino_input", (round_up(int(pp), wg), int(cip)), (wg, 1), inp)]
    if stage.launch == "blocked":
        steps.append(Step("wino_gemm", (int(pp) // d["REG"], int(cop) // d["REG"], 16),
                          (d["TN"] // d["REG"], d["TM"] // d["REG"], 1), gemm))
    elif stage.launch == "local":
        steps.append(Step("wino_gemm", (int(pp), int(cop), 16), (d["TS"], d["TS"], 1), gemm))
    elif stage.launch == "tiles":   # one work-item per element of the products
        steps.append(Step("wino_gemm", (round_up(16 * int(cop) * int(pp), wg),), (wg,), gemm))
    else:
        raise RuntimeError(f"registry bug: stage {stage.key} has launch={stage.launch!r}; "
                           f"the winograd family has {', '.join(LAUNCHES)}")
    steps.append(Step("wino_output", (round_up(v["P"], wg), int(v["CO"])), (wg, 1), out))
    return steps
