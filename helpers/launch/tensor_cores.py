"""Launch geometry, requirements and JIT parameters of the tensor-core family (chapter 13): the
CUDA conv_dgrad and conv_forward stages on mma.sync and wgmma (kernels/conv_dgrad/13_*.cu).

The registry's ``launch`` names the launch: ``mma`` (13_tc_*.cu: one kernel, positions as mma
rows, channels as mma columns), ``mma_nhwc`` and ``mma_nhwc_tf32`` (13_tc_nhwc.cu: dy' and w
copied channel-last or interleaved, then the product, with split-K and, on Hopper, wgmma blocks
and TMA copies), ``mma_fwd`` and ``mma_fwd_tf32`` (the forward pass on the same kernel, FWD = 1).
The reduction's split-K count is the GEMM family's split_count (helpers/launch/gemm.py).
"""
from __future__ import annotations

import numpy as np

from ..ops.problem import Problem
from . import Step, TensorMap, Workspace, cdiv, dispatch
from .gemm import split_count


# -- positions as mma rows, channels as mma columns ------------------------------------------

MMA_TILE = (128, 64, 128)     # positions, channels per block; threads (4 warps) per block


def mma_geometry(p: Problem, d: dict):
    """One block of 4 warps per 128 positions x 64 channels (kernels/conv_dgrad/13_*.cu)."""
    q = p.dims
    bm, bn, threads = MMA_TILE
    return (cdiv(q["N"] * q["H"] * q["W"], bm) * threads, cdiv(q["C"], bn)), (threads, 1)


def fp16_operands(p: Problem, d: dict) -> dict:
    return {"BF16": 0}


def bf16_operands(p: Problem, d: dict) -> dict:
    return {"BF16": 1}


def mma_pipe_requires(p: Problem, d: dict):
    """The weights are copied in 16-byte cp.async chunks (8 values): each must lie wholly inside
    a row of w or wholly past it, and start 16-byte aligned."""
    q = p.dims
    if d["STAGES"] < 2:
        return f"STAGES = {d['STAGES']}: the ring needs at least 2 buffers"
    if q["K"] * q["KH"] * q["KW"] % 8:
        return (f"K*KH*KW = {q['K'] * q['KH'] * q['KW']} is not a multiple of 8 (the weights are "
                f"copied 8 values at a time)")
    return None


# -- tensor cores on channel-last copies (13_tc_nhwc.cu): dy' and w copied, then the product ---

NHWC_SHARED = 48 * 1024       # bytes of shared memory a block may declare statically
WGMMA_SHARED = 227 * 1024     # bytes of (dynamic) shared memory a block may use on Hopper, the
                              # only GPUs with wgmma


def padded_k(p: Problem, d: dict) -> int:
    """The reduction's extent over k: K channel-last (ILV 0), K padded to a whole group of ILV
    channels interleaved (13_tc_nhwc.cu: ILV)."""
    k, ilv = p.dims["K"], d.get("ILV", 0)
    return cdiv(k, ilv) * ilv if ilv else k


def tma_patch(p: Problem) -> tuple:
    """(PN, PH, PW) of a TMA block (13_tc_nhwc.cu: TMA) on the layer: patch_for its images, or at
    stride S for the grid of one phase (ceil(H / S) x ceil(W / S))."""
    return patch_for(p.dims["N"], *phase_grid(p), p.dims["stride"])


def patch_for(n: int, h: int, w: int, stride: int = 1) -> tuple:
    """The patch of PN images x PH rows x PW columns that makes a TMA block's 128 positions on
    images (n, h, w), chosen for the fewest blocks over them (the least padding: a patch that
    divides the images wastes none; 7 x 7 images waste an eighth), then the widest rows. At a
    stride, (h, w) is one phase's grid and a block's row of PW positions is written to dx a
    stride apart, sharing its 32-byte sectors with the other phases' blocks: there the patch is
    at least 32 columns wide where the grid is (on res128@56/s2 in TF32, 4 x 4 x 8 patches made the
    product x1.6 slower than 4 x 1 x 32, measured on the H200 while the phases still ran one after
    the other), the most images first."""
    shapes = [(MMA_TILE[0] // (ph * pw), ph, pw) for pw in (1, 2, 4, 8, 16, 32, 64, 128)
              for ph in (1, 2, 4, 8, 16, 32, 64, 128) if ph * pw <= MMA_TILE[0]]
    if stride > 1:
        wide = min(32, 1 << (w - 1).bit_length())
        return min((s for s in shapes if s[2] >= wide),
                   key=lambda s: (cdiv(n, s[0]) * cdiv(h, s[1]) * cdiv(w, s[2]), -s[0], -s[2]))
    return min(shapes, key=lambda s: (cdiv(n, s[0]) * cdiv(h, s[1]) * cdiv(w, s[2]), -s[2], -s[1]))


def phase_grid(p: Problem) -> tuple:
    """The rows and columns of one phase of dx at the layer's stride S: ceil(H / S), ceil(W / S)."""
    q, s = p.dims, p.dims["stride"]
    return cdiv(q["H"], s), cdiv(q["W"], s)


def position_blocks(p: Problem, d: dict) -> int:
    """Blocks of 128 positions over the layer: consecutive positions, or TMA's patches of each phase."""
    q = p.dims
    if d.get("TMA"):            # a grid of patches per phase, S * S phases
        return patch_blocks(q["N"], *phase_grid(p), tma_patch(p)) * q["stride"] ** 2
    return cdiv(q["N"] * q["H"] * q["W"], MMA_TILE[0])


def patch_blocks(n: int, h: int, w: int, patch: tuple) -> int:
    """Blocks of one patch (PN, PH, PW) each over images (n, h, w)."""
    return cdiv(n, patch[0]) * cdiv(h, patch[1]) * cdiv(w, patch[2])


WGMMA_WIDTHS = (64, 128, 256)  # channels per block: the N of one wgmma instruction
WGMMA_FILL_FLOOR = 128          # blocks are narrowed for the device's fill down to this width


def wgmma_fit(p: Problem, d: dict) -> dict:
    """The defines the channel-last product runs with. With WGMMA, BN is the widest block: a
    layer's blocks are no wider than its channels need (the smallest of 64, 128, 256 that holds
    min(C, BN); the block's channels are the width of every wgmma instruction, so a 64-channel
    layer in 128-wide blocks would run half of them on padding); halved (not below
    WGMMA_FILL_FLOOR) while the layer would give fewer blocks than SPLIT_TARGET, the blocks this
    device needs busy (tuned per device; nhwc_splits cuts the reduction below it): a wide block
    reuses each copied dy value for more channels, a narrow one keeps every SM at work; and halved
    while its ring of STAGES buffers would not fit WGMMA_SHARED (a ring that does not fit even
    64-wide blocks is refused by mma_nhwc_requires). Without WGMMA, d as it is."""
    if not d.get("WGMMA"):
        return d
    q = p.dims
    bn = next(b for b in WGMMA_WIDTHS if b >= min(q["C"], d["BN"]))
    rows = position_blocks(p, d)
    while bn > WGMMA_FILL_FLOOR and rows * cdiv(q["C"], bn) < d.get("SPLIT_TARGET", 1):
        bn //= 2
    while bn > WGMMA_WIDTHS[0] and mma_ring_bytes({**d, "BN": bn}) > WGMMA_SHARED:
        bn //= 2
    return {**d, "BN": bn}


def nhwc_splits(p: Problem, d: dict) -> int:
    """Split-K of the channel-last input gradient: where the product has fewer blocks (128
    positions x BN channels) than SPLIT_TARGET, the reduction is cut into runs, one per grid
    layer, enough to reach the target, at most SPLIT_MAX, each at least SPLIT_MIN_TERMS long.
    A reduction shorter than SPLIT_MIN terms (KH*KW*K) is never split: the two extra launches (zero
    the float32 dx, round it into dx) cost more there than the product gains. SPLIT_TARGET = 1
    never splits; the forward pass never does."""
    q, d = p.dims, wgmma_fit(p, d)
    terms = q["KH"] * q["KW"] * padded_k(p, d)
    if d.get("FWD") or terms < d.get("SPLIT_MIN", 0):
        return 1
    blocks = position_blocks(p, d) * cdiv(q["C"], d["BN"])
    return split_count(blocks, terms, d.get("SPLIT_TARGET", 1))


def mma_nhwc_scratch(p: Problem, d: dict, dtype: str = "float16") -> dict:
    """dy' (N, OH, OW, K) or (N, KR/32, OH, OW, 32) and w (C, KH, KW, KR) in the mma's input type
    (16-bit stages: 2 bytes per value, float16 storage holding fp16 or bf16 bits); split-K, the
    float32 dx the runs add into."""
    q, kr = p.dims, padded_k(p, d)
    out = {"dyp_copy": Workspace(dtype, q["N"] * q["OH"] * q["OW"] * kr),
           "w_crsk": Workspace(dtype, q["C"] * q["KH"] * q["KW"] * kr)}
    if nhwc_splits(p, d) > 1:
        out["dx_split"] = Workspace("float32", q["N"] * q["C"] * q["H"] * q["W"])
    return out


def mma_nhwc_requires(p: Problem, d: dict, chunk: int = 8, reduced: str = "K"):
    """Channel-last, a 16-byte copy (``chunk`` values) must not straddle two taps (interleaved,
    K is padded and nothing is refused); the ring must fit the shared memory (declared statically,
    or with WGMMA dynamic). ``reduced``: the channels the product sums over (the forward pass's C)."""
    if d["STAGES"] < 2:
        return f"STAGES = {d['STAGES']}: the ring needs at least 2 buffers"
    if d.get("WGMMA"):
        d = wgmma_fit(p, d)
        if d["BN"] not in (64, 128, 256) or d["CH"] != 8:
            return (f"BN = {d['BN']}, CH = {d['CH']}: the wgmma product reads 64, 128 or 256 channels per "
                    f"block and 128-byte shared rows (CH = 8)")
        if mma_ring_bytes(d) > WGMMA_SHARED:
            return (f"STAGES * (128 + BN) * 128 + 1024 = {mma_ring_bytes(d):,} bytes of shared memory, more "
                    f"than the {WGMMA_SHARED:,} a Hopper block may use; lower STAGES or BN")
    else:
        if d["BN"] not in (64, 128):
            return f"BN = {d['BN']}: a block holds 64 or 128 channels (warps of 64 x 32)"
        if d["CH"] not in (4, 8):
            return f"CH = {d['CH']}: a shared row holds 4 or 8 chunks of 16 bytes"
        if ring_bytes(d) > NHWC_SHARED:
            return (f"STAGES * (128 + BN) * 16 * CH = {ring_bytes(d):,} bytes of shared memory, more than the "
                    f"{NHWC_SHARED:,} a block declares statically; lower STAGES, BN or CH")
    if p.dims[reduced] % chunk and not d.get("ILV"):
        copied = "x" if reduced == "C" else "dy'"
        return (f"{reduced} = {p.dims[reduced]} is not a multiple of {chunk} ({copied} is copied {chunk} "
                f"channels at a time)")
    return None


def mma_threads(d: dict) -> int:
    """Threads per block of 13_tc_nhwc.cu's product: two warpgroups with WGMMA (TMA: and the
    copying warp), else 2 * BN."""
    return 256 + 32 * bool(d.get("TMA")) if d.get("WGMMA") else 2 * d["BN"]


def ring_bytes(d: dict) -> int:
    """The product's ring: STAGES slots of A (128 rows) and B (BN rows) of 16 * CH bytes."""
    return d["STAGES"] * (MMA_TILE[0] + d["BN"]) * 16 * d["CH"]


def mma_ring_bytes(d: dict) -> int:
    """Dynamic shared memory of the product: with WGMMA the ring plus 1024 bytes to align it to
    wgmma's swizzle; else none (the ring is declared statically)."""
    return ring_bytes(d) + 1024 if d.get("WGMMA") else 0


def mma_nhwc_tf32_requires(p: Problem, d: dict):
    return mma_nhwc_requires(p, d, chunk=4)


def mma_nhwc_tf32_scratch(p: Problem, d: dict) -> dict:
    return mma_nhwc_scratch(p, d, "float32")


def mma_nhwc_tf32_steps(p: Problem, d: dict) -> list:
    return mma_nhwc_steps(p, d, item=4)


def channel_last_copy(pixels: int, channels: int, images: int) -> tuple:
    """Grid and block of 13_tc_nhwc.cu's transpose (dy_to_nhwc, dy_to_nchw32, to_channel_last):
    64 x 64 blocks of (channel, pixel), 32 x 8 threads each."""
    return (cdiv(pixels, 64) * 32, cdiv(channels, 64) * 8, images), (32, 8, 1)


def mma_nhwc_steps(p: Problem, d: dict, item: int = 2) -> list:
    """dy' to (N, OH, OW, K) or (N, KR/32, OH, OW, 32) through 64 x 64 blocks, w to (C, KH, KW, KR)
    per channel, WK values of k at a time (128, or 32 for kernels beyond 5x5: the shared block
    stays small), then the product into dx."""
    q, kr, d = p.dims, padded_k(p, d), wgmma_fit(p, d)
    threads, splits = mma_threads(d), nhwc_splits(p, d)
    wk = 128 if q["KH"] * q["KW"] <= 25 else 32       # 13_tc_nhwc.cu: WK
    steps = [Step("dy_to_nchw32" if d.get("ILV") else "dy_to_nhwc", *channel_last_copy(q["OH"] * q["OW"], kr, q["N"]),
                  ("grad_output", "output", "dyp_copy", "K", "OH", "OW")),
             Step("w_to_crsk", (cdiv(kr, wk) * 256, q["C"]), (256, 1), ("weight", "w_crsk", "C", "K")),
             Step("conv_dgrad", (position_blocks(p, d) * threads, cdiv(q["C"], d["BN"]), splits),
                  (threads, 1, 1), (*mma_operands(p, d, item), "dx_split" if splits > 1 else "grad_input", *p.scalars),
                  mma_ring_bytes(d))]
    if splits == 1:
        return steps
    n = q["N"] * q["C"] * q["H"] * q["W"]
    flat = ((min(cdiv(n, 256), 4096) * 256,), (256,))
    return ([Step("splitk_zero", *flat, ("dx_split", np.int32(n)))] + steps
            + [Step("splitk_store", *flat, ("dx_split", "grad_input", np.int32(n)))])


def mma_operands(p: Problem, d: dict, item: int) -> tuple:
    """The product's operands: the copies' addresses, or with TMA their tensor maps: dy' as
    (N, OH, OW, K) in boxes of one patch (PN, PH, PW) x one row of shared memory (128 bytes of k),
    w as (C, KH*KW, K) in boxes of BN channels x one tap x 128 bytes of k; ``item``: bytes per value."""
    if not d.get("TMA"):
        return "dyp_copy", "w_crsk"
    q, row, patch = p.dims, 128 // item, tma_patch(p)
    maps = (TensorMap("dyp_copy", (q["K"], q["OW"], q["OH"], q["N"]), (row, *patch[::-1])),
            TensorMap("w_crsk", (q["K"], q["KH"] * q["KW"], q["C"]), (row, 1, d["BN"])))
    if tma_store(p, d, item):         # dx (N, C, H, W) in boxes of PN x BN x PH x PW, unswizzled
        maps += (TensorMap("grad_input", (q["W"], q["H"], q["C"], q["N"]), (patch[2], patch[1], d["BN"], patch[0]),
                           swizzle=False),)
    return maps


def tf32_operands(p: Problem, d: dict) -> dict:
    return {"TF32": 1}


def tma_store(p: Problem, d: dict, item: int) -> bool:
    """Whether the TMA product writes dx by one TMA store per block (TMA_STORE asked, and no
    reason against it: tma_store_off)."""
    return bool(d.get("TMA") and d.get("TMA_STORE")) and not tma_store_off(p, d, item)


def tma_store_off(p: Problem, d: dict, item: int) -> str:
    """Why the TMA store cannot or should not run on this layer ("" when it can). It needs the
    whole sum per block (no split-K), stride 1 (a block's positions one box of dx), rows of dx (W
    values of ``item`` bytes) a multiple of 16 bytes, as the tensor map needs, rows of the box (PW
    values) a multiple of 32 bytes, whole sectors of the L2 cache, and a ring large enough to stage
    the box (128 positions x BN channels; TF32 with BN = 256 needs 3 slots). With rows of 16 bytes
    (4 x 4 patches in TF32) the store was slower than store_dx's on the H200 in an exploration
    (each checked, not recorded: res128@28 product 0.0707 ms against 0.0682, vgg512@28 0.3316
    against 0.3287), with rows of 32 bytes or more faster (res64@56 TF32 0.0861 against 0.0996).
    Where it does not run, store_dx writes dx from the registers."""
    q, fit = p.dims, wgmma_fit(p, d)
    if q["stride"] > 1:
        return f"stride {q['stride']}"
    if nhwc_splits(p, d) > 1:
        return "split-K"
    if q["W"] * item % 16:
        return f"dx rows of {q['W'] * item} bytes"
    if tma_patch(p)[2] * item % 32:
        return f"box rows of {tma_patch(p)[2] * item} bytes"
    if MMA_TILE[0] * fit["BN"] * item > ring_bytes(fit):
        return f"a box of {MMA_TILE[0] * fit['BN'] * item:,} bytes in a ring of {ring_bytes(fit):,}"
    return ""


def with_splits(operands):
    """The jit of a channel-last or interleaved input-gradient stage: its operands' defines, its
    split of K, its block's channels and, with TMA, its patch and whether it stores by TMA (the
    launch computes the same nhwc_splits, wgmma_fit, tma_patch and tma_store for the grid)."""
    def jit(p, d):
        out = {**operands(p, d), "SPLITK": nhwc_splits(p, d), "BN": wgmma_fit(p, d)["BN"]}
        if d.get("TMA"):
            out.update(zip(("PH", "PW"), tma_patch(p)[1:]))
            out["TMA_STORE"] = int(tma_store(p, d, 4 if out.get("TF32") else 2))
        return out
    return jit


nhwc_fp16, nhwc_bf16, nhwc_tf32 = (with_splits(f) for f in (fp16_operands, bf16_operands, tf32_operands))


# -- the forward pass on the same kernel (13_tc_nhwc.cu with FWD = 1) --------------------------

def mma_fwd_requires(p: Problem, d: dict):
    return mma_nhwc_requires(p, d, reduced="C")


def mma_fwd_tf32_requires(p: Problem, d: dict):
    return mma_nhwc_requires(p, d, chunk=4, reduced="C")


def mma_fwd_scratch(p: Problem, d: dict, dtype: str = "float16") -> dict:
    """x (N, H, W, C) and w (K, KH, KW, C) in the mma's input type."""
    q = p.dims
    return {"x_copy": Workspace(dtype, q["N"] * q["H"] * q["W"] * q["C"]),
            "w_krsc": Workspace(dtype, q["K"] * q["KH"] * q["KW"] * q["C"])}


def mma_fwd_tf32_scratch(p: Problem, d: dict) -> dict:
    return mma_fwd_scratch(p, d, "float32")


def mma_fwd_steps(p: Problem, d: dict) -> list:
    """x to (N, H, W, C) and w, viewed as one image of C channels and K*KH*KW pixels, to
    (K, KH, KW, C): both by the transpose to_channel_last; then the product with its epilogue,
    its scalars in the kernel's names (N, C <- K, H <- OH, W <- OW, K <- C, OH <- H, OW <- W)."""
    q = p.dims
    threads, taps = 2 * d["BN"], q["K"] * q["KH"] * q["KW"]
    return [Step("to_channel_last", *channel_last_copy(q["H"] * q["W"], q["C"], q["N"]),
                 ("input", "input", "x_copy", "C", "H", "W")),
            Step("to_channel_last", *channel_last_copy(taps, q["C"], 1),
                 ("weight", "weight", "w_krsc", "C", np.int32(taps), np.int32(1))),
            Step("conv_forward", (cdiv(q["N"] * q["OH"] * q["OW"], MMA_TILE[0]) * threads, cdiv(q["K"], d["BN"])),
                 (threads, 1), ("x_copy", "w_krsc", "output", "bias", "N", "K", "OH", "OW", "C", "H", "W", "PAD"))]


# -- the family's interface (helpers/launch/__init__.py) -----------------------------------

ONE_KERNEL = {"mma": mma_geometry}
SEVERAL = {"mma_nhwc": (mma_nhwc_steps, mma_nhwc_scratch),
           "mma_nhwc_tf32": (mma_nhwc_tf32_steps, mma_nhwc_tf32_scratch),
           "mma_fwd": (mma_fwd_steps, mma_fwd_scratch), "mma_fwd_tf32": (mma_fwd_steps, mma_fwd_tf32_scratch)}
LAUNCHES, steps, workspace = dispatch(ONE_KERNEL, SEVERAL)   # the family's launches (the registry's ``launch``)
