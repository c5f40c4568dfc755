"""Launch geometry, requirements and JIT parameters of the GEMM family (chapter 11): the course
GEMM (op gemm) and the GEMM-based conv_dgrad, conv_forward and conv3d_dgrad stages, which all run
kernels/common/gemm_core.h (the tensor-core stages of chapter 13 are a family of their own:
helpers/launch/tensor_cores.py).

The registry's ``launch`` names the launch: ``gemm_naive``, ``gemm_local``, ``gemm_blocked`` (op
gemm), ``igemm`` and ``phases`` (one conv_dgrad kernel each), ``delta``, ``col2im``, ``nhwc``,
``im2col``, ``igemm_fwd``, ``vol2col`` (several kernels, with workspaces). A blocked launch covers a TM x TN
block of the product per work-group of (TN/WN) x (TM/WM) work-items; for conv_dgrad the product
is dx (C x N*H*W) = w (C x K*R*S) . dy-columns.
"""
from __future__ import annotations

import numpy as np

from ..ops.gemm import tile_requires
from ..ops.problem import Problem
from . import Step, Workspace, cdiv, dispatch, round_up


# The kernels index their column workspaces with 32-bit integers.
INDEX_LIMIT = 2**31 - 1


def blocked(m: int, n: int, d: dict, depth: int = 1):
    """NDRange of gemm_core.h for an m x n product (``depth`` independent products in dim 2)."""
    rm, rn = d["TM"] // d["WM"], d["TN"] // d["WN"]
    return (cdiv(n, d["TN"]) * rn, cdiv(m, d["TM"]) * rm, depth), (rn, rm, 1)


# -- op gemm --------------------------------------------------------------------------------

def gemm_naive(p: Problem, d: dict):
    wg = d["WG"]
    return (cdiv(p.dims["N"], wg) * wg, p.dims["M"]), (wg, 1)


def gemm_local(p: Problem, d: dict):
    ts = d["TS"]
    return (cdiv(p.dims["N"], ts) * ts, cdiv(p.dims["M"], ts) * ts), (ts, ts)


def gemm_vectors(p: Problem, d: dict) -> dict:
    """float4 tile loads where rows are a multiple of 4 long (so 4 values are all in or all out)."""
    return {"GEMM_VEC_A": int(p.dims["K"] % 4 == 0), "GEMM_VEC_B": int(p.dims["N"] % 4 == 0)}


def gemm_blocked(p: Problem, d: dict):
    return blocked(p.dims["M"], p.dims["N"], d)


def gemm_tiles_requires(p: Problem, d: dict):
    v = gemm_vectors(p, d)
    return tile_requires(d, vectors=bool(v["GEMM_VEC_A"] or v["GEMM_VEC_B"]))


# -- conv_dgrad as a GEMM ------------------------------------------------------------------

def conv_tiles_requires(p: Problem, d: dict):
    return tile_requires(d, fixed_column=True)


def taps_requires(p: Problem, d: dict):
    """11_igemm_taps: the tiles, and each step of TK reduction indices inside one tap (K % TK == 0)."""
    k, tk = p.dims["K"], d.get("TK", 16)
    if k % tk:
        return (f"the tap-major reduction needs K (output channels) a multiple of TK = {tk}, so that a "
                f"step lies inside one tap; this problem has K = {k}")
    return tile_requires(d, fixed_column=True)


def igemm_geometry(p: Problem, d: dict):
    """Implicit GEMM over all input positions: M = C, N = N*H*W."""
    q = p.dims
    return blocked(q["C"], q["N"] * q["H"] * q["W"], d)


def phase_count(size: int, pad: int, stride: int, phase: int) -> int:
    """How many input rows h in [0, size) have (h + pad) % stride == phase."""
    h0 = (phase - pad) % stride
    return max(0, cdiv(size - h0, stride))


def phase_taps(kernel: int, stride: int, phase: int) -> list:
    """The filter taps r with r % stride == phase: the only ones that reach that input phase."""
    return list(range(phase, kernel, stride))


def phases_geometry(p: Problem, d: dict, splits: int = 1):
    """One implicit GEMM per phase (dim 2), ``splits`` runs of each (dim 1, outside the channel
    blocks); dim 0 covers the largest phase, ceil(H/s)*ceil(W/s)."""
    q = p.dims
    s = q["stride"]
    (gx, gy, gz), local = blocked(q["C"], q["N"] * cdiv(q["H"], s) * cdiv(q["W"], s), d, depth=s * s)
    return (gx, gy * splits, gz), local


# split_count's bounds, for the tensor-core stages (13_tc_nhwc.cu: SPLITK) and igemm_phases (SPLITS)
SPLIT_MAX = 16                # runs of the reduction at most
SPLIT_MIN_TERMS = 128         # reduction indices per run at least: 4 chunks of 32 values for the
                              # tensor-core stages, 8 tile steps of TK = 16 for igemm_phases


def split_count(blocks: int, terms: int, target: int) -> int:
    """Runs of a reduction of ``terms`` for a product of ``blocks`` work-groups: 1 where the blocks
    reach ``target`` (1: never split), else enough to reach it, at most SPLIT_MAX, each run at
    least SPLIT_MIN_TERMS long."""
    if blocks >= target:
        return 1
    return max(1, min(cdiv(target, blocks), SPLIT_MAX, terms // SPLIT_MIN_TERMS))


def phase_splits(p: Problem, d: dict) -> int:
    """Split-K of igemm_phases: runs of each phase's reduction where all phases together have
    fewer work-groups than SPLIT_TARGET (tuned per device; split_count)."""
    q = p.dims
    (gx, gy, gz), (lx, ly, _) = phases_geometry(p, d)
    return split_count(gx // lx * (gy // ly) * gz, q["K"] * max_taps(q), d.get("SPLIT_TARGET", 1))


def phase_split_k(p: Problem, d: dict) -> dict:
    """igemm_phases' jit: the phase split and its runs (the launch computes the same count)."""
    return {**phase_split(p, d), "SPLITS": phase_splits(p, d)}


def phases_scratch(p: Problem, d: dict) -> dict:
    """Split-K: one slice the shape of dx per run."""
    q, splits = p.dims, phase_splits(p, d)
    return {"dx_parts": Workspace("float32", splits * q["N"] * q["C"] * q["H"] * q["W"])} if splits > 1 else {}


def phases_steps(p: Problem, d: dict) -> list:
    """One launch for all phases (and runs); with runs, dx's slices into the workspace, then
    split_sum adds them into dx."""
    q, splits = p.dims, phase_splits(p, d)
    g, l = phases_geometry(p, d, splits)
    if splits == 1:
        return [Step("conv_dgrad", g, l, tuple(p.inputs) + tuple(p.outputs) + tuple(p.scalars))]
    count = q["N"] * q["C"] * q["H"] * q["W"]
    return [Step("conv_dgrad", g, l, tuple(p.inputs) + ("dx_parts",) + tuple(p.scalars)),
            Step("split_sum", (cdiv(count, 256) * 256,), (256,), ("dx_parts", *p.outputs, np.int32(count)))]


def phase_split(p: Problem, d: dict) -> dict:
    """PHASED=1 for strided layers: the phase split skips the taps that reach no input position
    (stride 1 has one phase, the analytic implicit GEMM's loop)."""
    return {"PHASED": int(p.dims["stride"] > 1)}


def max_taps(q: dict) -> int:
    s = q["stride"]
    return cdiv(q["KH"], s) * cdiv(q["KW"], s)


def delta_scratch(p: Problem, d: dict) -> dict:
    """The delta table: one int4 per phase and reduction index, as 4 x 4-byte words of a float32
    workspace (the OpenCL path allocates float32 workspaces; the kernels read it as int4)."""
    q = p.dims
    return {"deltas": Workspace("float32", 4 * q["stride"] ** 2 * q["K"] * max_taps(q))}


def delta_steps(p: Problem, d: dict) -> list:
    q = p.dims
    g, l = phases_geometry(p, d)
    table = Step("igemm_deltas", (cdiv(q["K"] * max_taps(q), 64) * 64, q["stride"] ** 2), (64, 1),
                 ("deltas", "K", "OH", "OW", "H", "W", "PAD"))
    return [table, Step("conv_dgrad", g, l, tuple(p.inputs) + tuple(p.outputs) + tuple(p.scalars) + ("deltas",))]


# -- explicit GEMM with a workspace: im2col (forward) and col2im (input gradient) -----------

def cols_size(p: Problem) -> int:
    """Floats of the column matrix: C*KH*KW rows, N*OH*OW columns (both lowerings)."""
    q = p.dims
    return q["C"] * q["KH"] * q["KW"] * q["N"] * q["OH"] * q["OW"]


def cols_scratch(p: Problem, d: dict) -> dict:
    return {"cols": Workspace("float32", cols_size(p))}


def cols_requires(p: Problem, d: dict):
    if cols_size(p) > INDEX_LIMIT:
        return (f"its column workspace would hold {cols_size(p):,} floats; the kernels index with "
                f"32-bit integers")
    return tile_requires(d, fixed_column=True)


def col2im_steps(p: Problem, d: dict) -> list:
    """dgrad_cols: cols = w^T-ish (C*KH*KW x K) . dy' (K x N*OH*OW); col2im: dx from cols."""
    q = p.dims
    g, l = blocked(q["C"] * q["KH"] * q["KW"], q["N"] * q["OH"] * q["OW"], d)
    wg = d["WG"]
    return [Step("dgrad_cols", g, l, ("grad_output", "output", "weight", "cols", "N", "C", "K", "OH", "OW")),
            Step("col2im", (round_up(q["H"] * q["W"], wg), q["C"], q["N"]), (wg, 1, 1),
                 ("cols", "grad_input", "N", "C", "H", "W", "OH", "OW", "PAD"))]


def im2col_vectors(p: Problem, d: dict) -> dict:
    q = p.dims
    return {"GEMM_VEC_B": int(q["N"] * q["OH"] * q["OW"] % 4 == 0)}


def im2col_steps(p: Problem, d: dict) -> list:
    """im2col: cols from x; forward_gemm: y = w^T (K x C*KH*KW) . cols."""
    q = p.dims
    rows, cols = q["C"] * q["KH"] * q["KW"], q["N"] * q["OH"] * q["OW"]
    wg = d["WG"]
    g, l = blocked(q["K"], cols, d)
    return [Step("im2col", (round_up(cols, wg), rows), (wg, 1),
                 ("input", "cols", "N", "C", "H", "W", "OH", "OW", "PAD")),
            Step("forward_gemm", g, l, ("cols", "weight", "output", "N", "C", "K", "OH", "OW"))]


# -- the forward convolution as an implicit GEMM (no column workspace) ------------------------

def pointwise(q: dict) -> bool:
    """A 1x1 layer at stride 1 without padding: B is x itself, a plain matrix per image."""
    return (q["KH"], q["KW"], q["stride"], q["pad"]) == (1, 1, 1, 0)


def igemm_fwd_vectors(p: Problem, d: dict) -> dict:
    """float4 copies of A where its rows (C*KH*KW weights) are a multiple of 4 long, and of B where
    the layer is pointwise and an image's positions are (4 neighbouring columns in one image); the
    runs of the reduction (igemm_fwd_splits)."""
    q = p.dims
    pw = pointwise(q)
    return {"POINTWISE": int(pw), "GEMM_VEC_A": int(q["C"] * q["KH"] * q["KW"] % 4 == 0),
            "GEMM_VEC_B": int(pw and q["H"] * q["W"] % 4 == 0), "SPLITS": igemm_fwd_splits(p, d)}


def igemm_fwd_splits(p: Problem, d: dict) -> int:
    """Split-K of the forward implicit GEMM: runs of the C*KH*KW reduction where the product has
    fewer work-groups than SPLIT_TARGET (tuned per device; split_count). A 1x1 layer of 1,024
    channels on a 13x13 plane at batch 8 has 22 x 4 tiles of 64: 88 work-groups for 132 SMs."""
    q = p.dims
    (gx, gy, _), (lx, ly, _) = blocked(q["K"], q["N"] * q["OH"] * q["OW"], d)
    return split_count(gx // lx * (gy // ly), q["C"] * q["KH"] * q["KW"], d.get("SPLIT_TARGET", 1))


def igemm_fwd_requires(p: Problem, d: dict):
    v = igemm_fwd_vectors(p, d)
    return tile_requires(d, vectors=bool(v["GEMM_VEC_A"] or v["GEMM_VEC_B"]), fixed_column=True)


def igemm_fwd_scratch(p: Problem, d: dict) -> dict:
    """The turned weights; with split-K, one slice the shape of y per run."""
    q, splits = p.dims, igemm_fwd_splits(p, d)
    parts = {"y_parts": Workspace("float32", splits * q["N"] * q["K"] * q["OH"] * q["OW"])} if splits > 1 else {}
    return {"w_kcrs": Workspace("float32", q["K"] * q["C"] * q["KH"] * q["KW"]), **parts}


def igemm_fwd_steps(p: Problem, d: dict) -> list:
    """weights_to_kcrs: the weights turned to (K, C, KH, KW); forward_igemm: y = w' . x-columns
    (with split-K, the runs' sums into y's slices, then split_sum adds them into y)."""
    q, splits = p.dims, igemm_fwd_splits(p, d)
    wg = d["WG"]
    (gx, gy, gz), l = blocked(q["K"], q["N"] * q["OH"] * q["OW"], d)
    turn = Step("weights_to_kcrs", (round_up(q["K"] * q["C"] * q["KH"] * q["KW"], wg),), (wg,),
                ("weight", "w_kcrs", "C", "K"))
    sizes = ("N", "C", "H", "W", "K", "OH", "OW", "PAD")
    if splits == 1:
        return [turn, Step("forward_igemm", (gx, gy, gz), l, ("input", "w_kcrs", "output", *sizes))]
    count = q["N"] * q["K"] * q["OH"] * q["OW"]
    return [turn, Step("forward_igemm", (gx, gy * splits, gz), l, ("input", "w_kcrs", "y_parts", *sizes)),
            Step("split_sum", (cdiv(count, 256) * 256,), (256,), ("y_parts", "output", np.int32(count)))]


# -- NHWC: the analytic implicit GEMM on channel-last copies --------------------------------

def nhwc_scratch(p: Problem, d: dict) -> dict:
    q = p.dims
    f32 = lambda n: Workspace("float32", n)
    return {"dy_nhwc": f32(q["N"] * q["OH"] * q["OW"] * q["K"]), "w_rskc": f32(q["KH"] * q["KW"] * q["K"] * q["C"]),
            "dx_nhwc": f32(q["N"] * q["H"] * q["W"] * q["C"])}


def nhwc_vectors(p: Problem, d: dict) -> dict:
    return {"GEMM_VEC_B": int(p.dims["C"] % 4 == 0)}


def nhwc_requires(p: Problem, d: dict):
    return tile_requires(d, vectors=bool(nhwc_vectors(p, d)["GEMM_VEC_B"]))


def nhwc_steps(p: Problem, d: dict) -> list:
    """dy' and w to channel-last, the GEMM (N*H*W) x C, dx back to NCHW."""
    q = p.dims
    wg = d["WG"]
    g, l = blocked(q["N"] * q["H"] * q["W"], q["C"], d)
    return [Step("dy_to_nhwc", (round_up(q["N"] * q["OH"] * q["OW"], wg), q["K"]), (wg, 1),
                 ("grad_output", "output", "dy_nhwc", "N", "K", "OH", "OW")),
            Step("weights_to_rskc", (round_up(q["C"], wg), q["KH"] * q["KW"] * q["K"]), (wg, 1),
                 ("weight", "w_rskc", "C", "K")),
            Step("dgrad_nhwc", g, l, ("dy_nhwc", "w_rskc", "dx_nhwc", "N", "C", "H", "W", "K", "OH", "OW", "PAD")),
            Step("dx_from_nhwc", (round_up(q["N"] * q["H"] * q["W"], wg), q["C"]), (wg, 1),
                 ("dx_nhwc", "grad_input", "N", "C", "H", "W"))]


# -- 3-D: vol2col for conv3d_dgrad ---------------------------------------------------------

def vol_cols_size(p: Problem) -> int:
    q = p.dims
    return q["C"] * q["KT"] * q["KH"] * q["KW"] * q["N"] * q["OD"] * q["OH"] * q["OW"]


def vol_scratch(p: Problem, d: dict) -> dict:
    return {"cols": Workspace("float32", vol_cols_size(p))}


def vol_requires(p: Problem, d: dict):
    if vol_cols_size(p) > INDEX_LIMIT:
        return f"its column workspace would hold {vol_cols_size(p):,} floats; the kernels index with 32-bit integers"
    return tile_requires(d, fixed_column=True)


def vol2col_steps(p: Problem, d: dict) -> list:
    q = p.dims
    wg = d["WG"]
    g, l = blocked(q["C"] * q["KT"] * q["KH"] * q["KW"], q["N"] * q["OD"] * q["OH"] * q["OW"], d)
    return [Step("dgrad_cols", g, l, ("grad_output", "weight", "cols", "N", "C", "K", "OD", "OH", "OW")),
            Step("col2vol", (round_up(q["D"] * q["H"] * q["W"], wg), q["C"], q["N"]), (wg, 1, 1),
                 ("cols", "grad_input", "N", "C", "D", "H", "W", "OD", "OH", "OW", "PAD"))]


# -- the family's interface (helpers/launch/__init__.py) -----------------------------------

ONE_KERNEL = {"gemm_naive": gemm_naive, "gemm_local": gemm_local, "gemm_blocked": gemm_blocked,
              "igemm": igemm_geometry}
SEVERAL = {"phases": (phases_steps, phases_scratch), "delta": (delta_steps, delta_scratch),
           "col2im": (col2im_steps, cols_scratch), "im2col": (im2col_steps, cols_scratch),
           "igemm_fwd": (igemm_fwd_steps, igemm_fwd_scratch),
           "nhwc": (nhwc_steps, nhwc_scratch), "vol2col": (vol2col_steps, vol_scratch)}
LAUNCHES, steps, workspace = dispatch(ONE_KERNEL, SEVERAL)   # the family's launches (the registry's ``launch``)
