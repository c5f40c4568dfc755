"""Models of what the direct input-gradient kernels (conv_dgrad stages 02-08) do per work-item.

Plain Python that mirrors the kernels' loops, so chapters can count and draw what a kernel does
without a device: the bounds-check table of stage 03, the weight loads of stage 04, the 3-wide
gradient windows of stage 05. Every function here is checked by tests/test_direct_model.py.

Notation as in the kernels: input (N, C, H, W), output gradient (N, K, OH, OW), weights IOHW
(C, K, KH, KW); a work-item computes dx[n][c][h][x].
"""
from __future__ import annotations

import numpy as np

from ..ops.reference import output_size

FLOAT_BYTES = 4


# ---------------------------------------------------------------------------------------------
# Stage 03: the bounds-check table

def valid_table(h: int, x: int, kh: int, kw: int, stride: int, pad: int, oh_n: int, ow_n: int) -> np.ndarray:
    """valid[r][s]: does weight (r, s) meet an output position for input (h, x)? (stage 03's table)"""
    t = np.zeros((kh, kw), dtype=bool)
    for r in range(kh):
        oh_s = h + pad - r
        row_ok = oh_s >= 0 and oh_s % stride == 0 and oh_s // stride < oh_n
        for s in range(kw):
            ow_s = x + pad - s
            t[r, s] = row_ok and ow_s >= 0 and ow_s % stride == 0 and ow_s // stride < ow_n
    return t


def _dims(n, c, h, w, k, kernel, stride, pad):
    return dict(N=n, C=c, H=h, W=w, K=k, KH=kernel, KW=kernel, S=stride, P=pad,
                OH=output_size(h, kernel, stride, pad), OW=output_size(w, kernel, stride, pad))


def count_checks(n, c, h, w, k, kernel=3, stride=1, pad=1, memoized=False) -> dict:
    """Walk the loops of stage 02 (memoized=False) or stage 03 (True) and count, over the whole
    NDRange, the bounds checks evaluated (one per row test and one per column test, as the
    kernels write them) and the table lookups. Runs every loop, k included: keep sizes small."""
    d = _dims(n, c, h, w, k, kernel, stride, pad)
    checks = lookups = 0
    for hh in range(d["H"]):
        for xx in range(d["W"]):
            if memoized:                       # stage 03: the table, once per work-item ...
                for r in range(d["KH"]):
                    checks += 1
                    oh_s = hh + pad - r
                    if oh_s >= 0 and oh_s % stride == 0 and oh_s // stride < d["OH"]:
                        checks += d["KW"]
                for _ in range(d["K"]):        # ... then one lookup per (k, r, s)
                    lookups += d["KH"] * d["KW"]
            else:                              # stage 02: every check inside the k loop
                for _ in range(d["K"]):
                    for r in range(d["KH"]):
                        checks += 1
                        oh_s = hh + pad - r
                        if oh_s < 0 or oh_s % stride != 0 or oh_s // stride >= d["OH"]:
                            continue
                        checks += d["KW"]      # one column test per s
    per_image_channel = d["N"] * d["C"]        # the count does not depend on n or c
    return {"checks": checks * per_image_channel, "lookups": lookups * per_image_channel}


def rows_reached(h, kernel, stride, pad) -> int:
    """Number of (input row, kernel row) pairs that meet an output row: sum over r of the output
    rows oh with 0 <= oh*stride + r - pad < h. For stride 1, 'same' padding (2*pad = kernel-1)
    and h >= pad this is kernel*h - pad*(pad+1)."""
    oh_n = output_size(h, kernel, stride, pad)
    return sum(1 for r in range(kernel) for oh in range(oh_n) if 0 <= oh * stride + r - pad < h)


def checks_formula(n, c, h, w, k, kernel=3, stride=1, pad=1) -> dict:
    """The counts of count_checks as closed formulas:
    stage 02: N·C·K·W·(KH·H + KW·V), stage 03: N·C·W·(KH·H + KW·V) checks + N·C·H·W·K·KH·KW lookups,
    where V = rows_reached(H, ...)."""
    v = rows_reached(h, kernel, stride, pad)
    once = n * c * w * (kernel * h + kernel * v)
    return {"naive": {"checks": k * once, "lookups": 0},
            "memoized": {"checks": once, "lookups": n * c * h * w * k * kernel * kernel}}


# ---------------------------------------------------------------------------------------------
# Stage 04: the weight loads

def weight_block(c: int, k: int, K: int, kh: int = 3, kw: int = 3) -> int:
    """Index (in floats) of the first weight of the (c, k) block in an IOHW tensor."""
    return (c * K + k) * kh * kw


def weight_requests(c: int, k: int, K: int, line_bytes: int = 64, vector: bool = True) -> list[dict]:
    """The load requests a work-item makes for the 9 weights of (c, k) of a 3x3 IOHW tensor.

    Scalar (stage 03): nine 1-float requests. Vector (stage 04): one 8-float request + one scalar.
    Each request lists its float indices and the cache lines (of ``line_bytes``) it touches,
    assuming the tensor starts on a line boundary.
    """
    start = weight_block(c, k, K)
    pieces = [(start, 8), (start + 8, 1)] if vector else [(start + i, 1) for i in range(9)]
    per_line = line_bytes // FLOAT_BYTES
    return [{"first": f, "count": cnt, "lines": sorted({i // per_line for i in range(f, f + cnt)})}
            for f, cnt in pieces]


def weight_traffic(K: int, line_bytes: int = 64, vector: bool = True, c: int = 0) -> dict:
    """Over the K blocks of one input channel: requests, line accesses (a request touching two
    lines costs two), and useful bytes per line access."""
    reqs = [q for k in range(K) for q in weight_requests(c, k, K, line_bytes, vector)]
    line_accesses = sum(len(q["lines"]) for q in reqs)
    straddling = sum(1 for q in reqs if len(q["lines"]) > 1)
    return {"requests": len(reqs), "line_accesses": line_accesses, "straddling": straddling,
            "bytes_per_access": 9 * K * FLOAT_BYTES / line_accesses}


# ---------------------------------------------------------------------------------------------
# Stage 05: the 3-wide gradient windows

def window_columns(x: int, kernel: int = 3, stride: int = 1, pad: int = 1) -> list[int]:
    """Output columns ow that input column x meets, for s = kernel-1 .. 0 (left to right);
    None where x + pad - s is not a multiple of the stride."""
    cols = []
    for s in reversed(range(kernel)):
        ow_s = x + pad - s
        cols.append(ow_s // stride if ow_s % stride == 0 else None)
    return cols


def takes_vector_path(x: int, ow_n: int, kernel: int = 3, stride: int = 1, pad: int = 1) -> bool:
    """Stage 05's per-work-item test: 3x3, stride 1, columns x+pad-2 .. x+pad all inside dy."""
    return kernel == 3 and stride == 1 and x + pad - 2 >= 0 and x + pad < ow_n


def vector_fraction(w: int, kernel: int = 3, stride: int = 1, pad: int = 1) -> float:
    """Share of input columns (so of work-items) that take stage 05's 3-wide path."""
    ow_n = output_size(w, kernel, stride, pad)
    return sum(takes_vector_path(x, ow_n, kernel, stride, pad) for x in range(w)) / w


def lane_reads(x0: int, lanes: int, w: int, kernel: int = 3, stride: int = 1, pad: int = 1) -> dict:
    """For the work-items x0 .. x0+lanes-1 of one SIMD group on one dy row: how many floats they
    ask for in total, how many distinct floats that is, and how many requests each path makes."""
    ow_n = output_size(w, kernel, stride, pad)
    asked, distinct, vec_req, scalar_req = 0, set(), 0, 0
    for x in range(x0, min(x0 + lanes, w)):
        cols = [c for c in window_columns(x, kernel, stride, pad) if c is not None and 0 <= c < ow_n]
        asked += len(cols)
        distinct.update(cols)
        if takes_vector_path(x, ow_n, kernel, stride, pad):
            vec_req += 1
        else:
            scalar_req += len(cols)
    return {"asked": asked, "distinct": len(distinct), "vector_requests": vec_req,
            "scalar_requests": scalar_req, "reuse": asked / max(1, len(distinct))}


def divergent_warps(h: int, w: int, warp: int = 32, wg: int = 64, kernel: int = 3, stride: int = 1,
                    pad: int = 1) -> dict:
    """Stage 05 on a SIMD machine: work-items hw = h*W + x of one (c, n) plane, padded up to a
    multiple of the work-group ``wg``, run in groups of ``warp`` consecutive lanes. A group whose
    active lanes take both paths (vector and scalar) runs both loops one after the other."""
    ow_n = output_size(w, kernel, stride, pad)
    total = -(-h * w // wg) * wg
    groups = both = vector_only = 0
    for g0 in range(0, total, warp):
        paths = {takes_vector_path(i % w, ow_n, kernel, stride, pad) for i in range(g0, min(g0 + warp, h * w))}
        if not paths:
            continue                       # only padding lanes: they return at once
        groups += 1
        both += len(paths) == 2
        vector_only += paths == {True}
    return {"groups": groups, "both": both, "vector_only": vector_only,
            "scalar_only": groups - both - vector_only}
