"""The weight gradient's own launches (conv_wgrad stage 02): a sum split across work-groups.

``split_reduction``: wgrad_partial, one work-group of WG work-items per (weight, slice of WG*ITEMS
output positions), writes one float per slice into the workspace ``partials`` (SPLITS x C*K*R*S);
wgrad_sum adds each weight's SPLITS partials in a fixed order (deterministic, no atomics).
Stage 01 runs on the direct family (one work-item per weight), stage 03 on the GEMM family.
"""
from __future__ import annotations

import numpy as np

from ..ops.problem import INT32_MAX, Problem
from . import Step, Workspace, round_up

LAUNCHES = ("split_reduction",)
ARGS = ("input", "grad_output", "output")


def weights(p: Problem) -> int:
    q = p.dims
    return q["C"] * q["K"] * q["KH"] * q["KW"]


def splits(p: Problem, d: dict) -> int:
    """Slices of WG*ITEMS consecutive output positions (n, oh, ow) that cover the sum."""
    q = p.dims
    return -(-(q["N"] * q["OH"] * q["OW"]) // (d["WG"] * d["ITEMS"]))


def split_requires(p: Problem, d: dict):
    wg = d["WG"]
    if wg < 2 or wg & (wg - 1):
        return f"WG must be a power of two >= 2 (the reduction tree halves it), got {wg}"
    if splits(p, d) * weights(p) > INT32_MAX:
        return (f"its workspace would hold {splits(p, d) * weights(p):,} partial sums; the kernels "
                f"index with 32-bit integers (raise ITEMS)")
    return None


def steps(stage, p: Problem, d: dict) -> list:
    if stage.launch not in LAUNCHES:
        raise RuntimeError(f"registry bug: stage {stage.key} has launch={stage.launch!r}; "
                           f"the wgrad family has {', '.join(LAUNCHES)}")
    wg, n = d["WG"], weights(p)
    return [Step("wgrad_partial", (n * wg, splits(p, d)), (wg, 1), ARGS + ("partials",) + tuple(p.scalars)),
            Step("wgrad_sum", (round_up(n, wg),), (wg,), ("partials", "grad_weight", "C", "K",
                                                          np.int32(splits(p, d))))]


def workspace(stage, p: Problem, d: dict) -> dict:
    return {"partials": Workspace("float32", splits(p, d) * weights(p))}
