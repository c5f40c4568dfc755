"""Chapter 16's models (convolutions of any shape): the layers it reads, what a grouped layer
costs against a dense one, and the three ways to lower a convolution of any rank that the source
article compares, written in NumPy for every rank with the extra memory each one allocates:

- ``by_columns``: the column matrix (im2col, vol2col) generalized to N axes, then one GEMM;
- ``by_implicit_gemm``: the same product tile by tile, each tile's columns gathered on the fly;
- ``by_recursion``: a rank-r convolution as a sum of rank-(r-1) ones, one per tap and output
  plane of the first axis, down to a ``lower`` convolution (a device stage, or NumPy).

Every function takes the course's conventions: x (N, C, *size), weight (C, K, *kernel) (input
channel first), ``stride``/``dilation`` per axis or one integer, ``padding`` per axis or per side;
groups = 1 (the grouped case is chapter 16's first half, run by the stages). They return
(y, extra_floats): the output in float64 and the largest temporary they allocated, in floats.
"""
from __future__ import annotations

from math import prod

import numpy as np

from ..ops.layers import layer_set
from ..ops.reference import output_sizes, per_axis, per_side
from ..ops.shape import layer_args


def sets(*names: str) -> list[dict]:
    """The layers of the named any-shape sets (helpers/ops/layers.py), the recorded runs' shapes."""
    return [lay for name in names for lay in layer_set(name)]


def geometry(lay: dict) -> tuple:
    """(stride, pads, dilation) of a layer, per axis, pads as (begin, end) pairs."""
    rank = len(lay["size"])
    return per_axis(lay["stride"], rank), per_side(lay["padding"], rank), per_axis(lay["dilation"], rank)


def out_size(lay: dict) -> tuple:
    return output_sizes(lay["size"], lay["kernel"], lay["stride"], lay["padding"], lay["dilation"])


def costs(lay: dict) -> dict:
    """FLOPs (2 per multiply-add) and the bytes a kernel must move at the least (each float32
    tensor once: the input, the output and the weights) of one pass, forward or either gradient:
    the three move the same tensors."""
    out = out_size(lay)
    g = lay["groups"]
    flops = 2 * lay["n"] * lay["k"] * prod(out) * lay["c"] // g * prod(lay["kernel"])
    floats = lay["n"] * lay["c"] * prod(lay["size"]) + lay["n"] * lay["k"] * prod(out) \
        + lay["c"] * lay["k"] // g * prod(lay["kernel"])
    return {"flops": flops, "bytes": 4 * floats, "intensity": flops / (4 * floats)}


def dense(lay: dict) -> dict:
    """The same layer with every output channel reading every input channel (groups = 1)."""
    return dict(lay, name=lay["name"] + " dense", groups=1)


def gemm_per_group(lay: dict, op: str = "conv_dgrad") -> dict:
    """The GEMM each group runs when the layer is lowered to matrix products (chapter 11's view):
    rows x columns of the result and the length of the reduction. The input gradient: rows are the
    group's C/G input channels, columns the N*H*W input positions, the reduction K/G * taps; the
    forward pass and the weight gradient exchange the roles (K/G rows)."""
    g, taps = lay["groups"], prod(lay["kernel"])
    if op == "conv_dgrad":
        return {"groups": g, "rows": lay["c"] // g, "columns": lay["n"] * prod(lay["size"]),
                "reduction": lay["k"] // g * taps}
    if op == "conv_forward":
        return {"groups": g, "rows": lay["k"] // g, "columns": lay["n"] * prod(out_size(lay)),
                "reduction": lay["c"] // g * taps}
    if op == "conv_wgrad":
        return {"groups": g, "rows": lay["k"] // g, "columns": lay["c"] // g * taps,
                "reduction": lay["n"] * prod(out_size(lay))}
    raise ValueError(f"op must be conv_forward, conv_dgrad or conv_wgrad, not {op!r}")


def receptive_field(layers: list[tuple]) -> int:
    """The side of the input window one output of a stack of layers sees: [(kernel, stride,
    dilation), ...] from the input up; each layer adds dilation*(kernel-1) times the product of
    the strides below it."""
    field, jump = 1, 1
    for kernel, stride, dilation in layers:
        field += dilation * (kernel - 1) * jump
        jump *= stride
    return field


# ---------------------------------------------------------------------------------------------
# The three lowerings, for any rank

def _geometry(x, weight, stride, padding, dilation):
    rank = x.ndim - 2
    stride, dilation, pads = per_axis(stride, rank), per_axis(dilation, rank), per_side(padding, rank)
    kernel = tuple(weight.shape[2:])
    return stride, pads, dilation, kernel, output_sizes(x.shape[2:], kernel, stride, pads, dilation)


def _rows(weight) -> np.ndarray:
    """The weight (C, K, *kernel) as the GEMM's left matrix: (K, C * taps), rows in (c, tap) order."""
    c, k = weight.shape[:2]
    return np.asarray(weight, np.float64).transpose(1, 0, *range(2, weight.ndim)).reshape(k, c * prod(weight.shape[2:]))


def gather(x, positions, stride, pads, dilation, kernel, out) -> np.ndarray:
    """The columns of the given flat output positions: (N, C * taps, len(positions)), zero where a
    tap falls into the padding. On every axis, output o and tap t read input o*stride - begin + t*dilation."""
    n, c = x.shape[:2]
    coords = np.unravel_index(np.asarray(positions), out)
    cols = np.zeros((n, c, prod(kernel), len(positions)))
    for i, tap in enumerate(np.ndindex(*kernel)):
        where = [o * s - b + t * d for o, t, s, (b, _), d in zip(coords, tap, stride, pads, dilation)]
        inside = np.all([(0 <= v) & (v < size) for v, size in zip(where, x.shape[2:])], axis=0)
        clipped = [np.clip(v, 0, size - 1) for v, size in zip(where, x.shape[2:])]
        cols[:, :, i, :] = x[(slice(None), slice(None), *clipped)] * inside
    return cols.reshape(n, c * prod(kernel), len(positions))


def by_columns(x, weight, stride=1, padding=0, dilation=1):
    """The column matrix of every output position of the whole batch, then one product."""
    stride, pads, dilation, kernel, out = _geometry(x, weight, stride, padding, dilation)
    cols = gather(x, range(prod(out)), stride, pads, dilation, kernel, out)       # (N, C*taps, P)
    y = np.einsum("kq,nqp->nkp", _rows(weight), cols)
    return y.reshape(x.shape[0], weight.shape[1], *out), cols.size


def by_implicit_gemm(x, weight, stride=1, padding=0, dilation=1, tile: int = 64):
    """The same product over tiles of ``tile`` output positions: each tile gathers only its own
    columns (on a GPU, into local memory), so no column matrix of the whole layer exists."""
    stride, pads, dilation, kernel, out = _geometry(x, weight, stride, padding, dilation)
    rows, total = _rows(weight), prod(out)
    y = np.zeros((x.shape[0], weight.shape[1], total))
    largest = 0
    for start in range(0, total, tile):
        positions = range(start, min(total, start + tile))
        cols = gather(x, positions, stride, pads, dilation, kernel, out)
        y[:, :, start:start + len(positions)] = np.einsum("kq,nqp->nkp", rows, cols)
        largest = max(largest, cols.size)
    return y.reshape(x.shape[0], weight.shape[1], *out), largest


def by_recursion(x, weight, stride=1, padding=0, dilation=1, lower=None, base: int | None = None, calls=None):
    """A rank-r convolution as a sum of rank-(r-1) ones: output plane o of the first axis adds,
    for every tap t of that axis whose input plane i = o*stride - begin + t*dilation exists, the
    lower-rank convolution of input plane i with the weight's slice t. Recurses until rank
    ``base`` (default: one rank lower than x's), where ``lower(x, weight, stride, padding,
    dilation)`` runs (default: the column matrix). ``calls``: a list that collects each lower
    call's rank. Extra memory: the partial output a lower call returns, before it is added, at
    every level, and the lower call's own."""
    stride, pads, dilation, kernel, out = _geometry(x, weight, stride, padding, dilation)
    base = max(1, x.ndim - 3) if base is None else base
    if x.ndim - 2 <= base:
        if calls is not None:
            calls.append(x.ndim - 2)
        if lower is None:
            return by_columns(x, weight, stride, pads, dilation)
        return np.asarray(lower(x, weight, stride, pads, dilation), np.float64), 0
    y = np.zeros((x.shape[0], weight.shape[1], *out))
    largest = 0
    for o in range(out[0]):
        for t in range(kernel[0]):
            i = o * stride[0] - pads[0][0] + t * dilation[0]
            if 0 <= i < x.shape[2]:
                part, extra = by_recursion(x[:, :, i], weight[:, :, t], stride[1:], pads[1:], dilation[1:],
                                           lower, base, calls)
                y[:, :, o] += part
                largest = max(largest, extra + part.size)
    return y, largest


def memory(lay: dict, tile: int = 64, base: int | None = None) -> dict:
    """Floats each lowering needs beyond the tensors themselves, from the shapes (what the
    functions above allocate): the whole column matrix; one tile's columns; for the recursion down
    to rank ``base`` (default: one rank lower), the partial output held at each level and the column
    matrix of one lower call (a lower call that lowers by columns), and how many lower calls it
    makes (one per output plane and tap of every axis above ``base`` whose input plane exists)."""
    out, taps = out_size(lay), prod(lay["kernel"])
    rank = len(out)
    base = max(1, rank - 1) if base is None else base
    top = rank - base                      # the axes the recursion walks
    partials = sum(lay["n"] * lay["k"] * prod(out[j:]) for j in range(1, top + 1))
    stride, pads, dilation = geometry(lay)
    calls = prod(sum(0 <= o * s - b + t * d < v for o in range(n_out) for t in range(k))
                 for n_out, k, s, (b, _), d, v in list(zip(out, lay["kernel"], stride, pads, dilation,
                                                           lay["size"]))[:top])
    return {"tensors": lay["n"] * lay["c"] * prod(lay["size"]) + lay["n"] * lay["k"] * prod(out)
            + lay["c"] * lay["k"] * taps,
            "columns": lay["n"] * lay["c"] * taps * prod(out),
            "implicit": lay["n"] * lay["c"] * taps * min(tile, prod(out)),
            "recursion": partials + lay["n"] * lay["c"] * prod(lay["kernel"][top:]) * prod(out[top:]),
            "recursion_calls": calls}


def scaled(lay: dict, n: int = 1, channels: int | None = None, side: int | None = None) -> dict:
    """A CPU-sized copy of a layer: batch ``n``, at most ``channels`` channels (depthwise and
    grouped layers keep their ratio of channels to groups), every spatial extent at most ``side``."""
    c = lay["c"] if channels is None else min(lay["c"], channels)
    per_group = lay["c"] // lay["groups"]
    groups = max(1, c // per_group) if lay["groups"] > 1 else 1
    c = groups * per_group if lay["groups"] > 1 else c
    k = c if lay["k"] == lay["c"] else min(lay["k"], c)
    size = lay["size"] if side is None else tuple(min(v, side) for v in lay["size"])
    return dict(lay, name=lay["name"] + " (scaled)", n=n, c=c, k=k, size=size, groups=groups)


def recorded_ladder(op: str, layer_set: str) -> list[str] | None:
    """The recorded GPU runs of ``op`` over ``layer_set`` as lines: per layer, each stage's median
    in µs and the vendor's (PyTorch: cuDNN or its own kernels), then the best stage's speed-up over
    the vendor, and how many layers the best is at x1.0 and x1.5 of the vendor or better; None when
    results/ holds no such run yet."""
    from ..analysis import results
    runs = results.find(op, layer_set)
    if not runs:
        return None
    lines = []
    for run in runs:
        stages = list(dict.fromkeys(r["stage"] for r in run["rows"]))
        vendor = {v["layer"]: v["median_ms"] for v in run.get("vendor", []) if "median_ms" in v}
        lines.append(f"{op} on {layer_set} ({results.device_label(run)}), median µs per call:")
        lines.append(f"{'layer':<22}" + "".join(f"{s:>14}" for s in stages) + f"{'PyTorch':>10}{'best/PyTorch':>14}")
        ratios = []
        for lay in dict.fromkeys(r["layer"] for r in run["rows"]):
            t = {r["stage"]: r["median_ms"] for r in run["rows"] if r["layer"] == lay and r.get("median_ms")}
            best = min(t.values()) if t else None
            ratio = f"x{vendor[lay] / best:.2f}" if best and lay in vendor else "-"
            ratios += [vendor[lay] / best] if best and lay in vendor else []
            lines.append(f"{lay:<22}" + "".join(f"{1000 * t[s]:>14.1f}" if s in t else f"{'-':>14}" for s in stages)
                         + (f"{1000 * vendor[lay]:>10.1f}" if lay in vendor else f"{'-':>10}") + f"{ratio:>14}")
        if ratios:
            lines.append(f"the best at x1.0 of PyTorch or better on {sum(r >= 1 for r in ratios)} of {len(ratios)} "
                         f"layers, at x1.5 or better on {sum(r >= 1.5 for r in ratios)}")
    return lines
