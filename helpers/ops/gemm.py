"""Op "gemm": the course's matrix product C = A . B (chapter 11), float32, row-major.

run_stage("gemm", stage, a=(M,K), b=(K,N)) -> c (M,N)

Kernels of every stage take ``(A, B, C, M, N, K)``. The blocked stages share their tile loop
with the GEMM-based convolution stages (kernels/common/gemm_core.h); ``tile_requires`` checks
that loop's tile parameters before anything is built.
"""
from __future__ import annotations

import numpy as np

from ..engine.check import rtol_for_sum
from .problem import Problem, reject_unknown, tensor

OP = "gemm"
NAME = "GEMM"  # the name tables and prose give it (helpers/analysis/compare.py)
# the layer sets the benchmark takes (helpers/ops/layers.py: their kind, the small default set)
LAYERS = ("gemm", "gemm_small")
ARGS = ("a", "b")


def prepare(**kwargs) -> Problem:
    reject_unknown(OP, kwargs, ARGS)
    a = tensor(OP, "a", kwargs.get("a"), 2)
    b = tensor(OP, "b", kwargs.get("b"), 2)
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"{OP}: a is {m}x{k} and b is {k2}x{n}; a's columns must equal b's rows")
    if max(m * k, k * n, m * n) > 2**31 - 1:
        raise ValueError(f"{OP}: a {m}x{k} by {k}x{n} product has more than 2**31 - 1 elements in one "
                         f"matrix; the kernels index with 32-bit integers")
    return Problem(
        op=OP, inputs={"a": a, "b": b}, outputs={"c": (m, n)},
        scalars={"M": m, "N": n, "K": k},
        dims={"M": m, "N": n, "K": k},
        flops=2 * m * n * k, min_bytes=4 * (m * k + k * n + m * n),
        flops_formula="2·M·N·K", bytes_formula="4 bytes · (|A| + |B| + |C|)",
        label=f"{m}x{k} . {k}x{n}",
    )


def reference(p: Problem):
    a, b = (p.inputs[x].astype(np.float64) for x in ("a", "b"))
    return {"c": a @ b}, {"c": np.abs(a) @ np.abs(b)}


def terms(p: Problem) -> int:
    """Each element of C sums K products."""
    return p.dims["K"]


def rtol(p: Problem) -> float:
    return rtol_for_sum(terms(p))


def tile_requires(d: dict, vectors: bool = False, fixed_column: bool = False):
    """None if gemm_core.h's tile parameters fit together, else what is wrong (one line).

    ``vectors``: float4 tile loads (TK a multiple of 4); ``fixed_column``: the caller relies on
    each work-item fetching B in one column every step (implicit GEMM: WG % TN == 0). Any
    work-group size WG is legal for the tile copies, with or without GEMM_PREFETCH: a work-item
    copies ceil(elements / WG) elements per step, the last only where it exists.
    """
    tm, tn, tk, wm, wn = (d[x] for x in ("TM", "TN", "TK", "WM", "WN"))
    if min(tm, tn, tk, wm, wn) < 1 or tm % wm or tn % wn:
        return f"TM={tm} must be a multiple of WM={wm} and TN={tn} of WN={wn} (all >= 1)"
    wg = (tm // wm) * (tn // wn)
    if fixed_column and wg % tn:
        return f"the work-group (TM/WM * TN/WN = {wg} work-items) must be a multiple of TN={tn}"
    if vectors and (tk % 4 or tn % 4):
        return f"TK={tk} and TN={tn} must be multiples of 4 for float4 tile loads"
    if d.get("GEMM_LDS4") and (wm % 4 or wn % 4):
        return f"GEMM_LDS4=1 reads the tiles in float4s: WM={wm} and WN={wn} must be multiples of 4"
    return None


def random_args(m: int, n: int, k: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((m, k), dtype=np.float32),
            "b": rng.standard_normal((k, n), dtype=np.float32)}


def layer_args(layer: dict, activation: str = "none", seed: int = 0) -> dict:
    """Arguments for one entry of a gemm set in helpers/layers.py (``activation`` is ignored)."""
    return random_args(layer["m"], layer["n"], layer["k"], seed)


VENDOR = "cuBLAS"        # the vendor library the benchmark times beside the course GEMM


def vendor_time(problem: Problem, warmup: int, repeats: int, flush_bytes: int):
    """cuBLAS fp32 (TF32 off) through PyTorch on an NVIDIA GPU, or None."""
    from .vendor import fp32_torch, time_cuda
    torch = fp32_torch()
    if torch is None:
        return None
    a, b = (torch.from_numpy(problem.inputs[x]).cuda() for x in ("a", "b"))
    out = time_cuda(lambda: torch.matmul(a, b), warmup, repeats, flush_bytes)
    out["name"] = VENDOR
    out["library"] = "cuBLAS fp32 (TF32 off) via torch.matmul"
    return out


def library_times(problem: Problem, ctx, warmup: int, repeats: int, flush_bytes: int) -> list:
    """Other libraries on the same OpenCL device: CLBlast where libclblast is installed."""
    from .vendor_clblast import available, clblast_gemm     # imports pyopencl: only where OpenCL runs
    if not available():
        return []
    from . import tolerance
    t = clblast_gemm(problem, ctx, reference(problem), tolerance("gemm", problem)["c"], warmup=warmup,
                     repeats=repeats, flush_bytes=flush_bytes)
    return [t] if t is not None else []
