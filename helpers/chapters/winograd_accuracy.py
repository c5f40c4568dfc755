"""Chapter 12a: the rounding error of the real kernels, direct against F(2x2) and F(4x4), per layer.

    rows = layer_accuracy(layer_set("vgg16"), size=16)

Each layer keeps its channels (C, K: what the sums run over) but not its batch and image size
(N = 1, ``size`` x ``size``), so a CPU runs a whole set in seconds. For each stage the error is
max |result - float64 reference| / max |reference| (normwise, relative), and ``ratio`` is the
worst element's error as a fraction of the tolerance the tests use (the one checker's worst
ratio; below 1 passes). conv_forward runs direct, wino_blocked, wino4_blocked; conv_dgrad runs
width (direct), winograd, winograd4 (each after its fallbacks: the path column says which ran).
"""
from __future__ import annotations

import numpy as np

from ..ops import op_module
from ..runner import check_plan, plan_stage, prepare

STAGES = {"conv_forward": ("direct", "wino_blocked", "wino4_blocked"),
          "conv_dgrad": ("width", "winograd", "winograd4")}


def _args(op: str, lay: dict, size: int, seed: int) -> dict:
    small = dict(lay, n=1, h=min(size, lay["h"]), w=min(size, lay["w"]))
    return op_module(op).layer_args(small, seed=seed) if op == "conv_forward" else \
        op_module(op).layer_args(small, activation="none", seed=seed)


def layer_accuracy(layers, op: str = "conv_forward", size: int = 16, ctx=None, seed: int = 0) -> list[dict]:
    """One row per distinct (C, K) of the 3x3 stride-1 layers (layers that differ only in batch and
    image size are the same problem here; ``layer`` names them all), with per stage ``<stage>``
    (normwise relative error), ``<stage> ratio`` (worst error / tolerance) and ``<stage> ran``."""
    groups = {}
    for lay in layers:
        if (lay["kernel"], lay["stride"]) == (3, 1):
            groups.setdefault((lay["c"], lay["k"]), []).append(lay)
    rows = []
    for (c, k), lays in groups.items():
        lay = lays[0]
        args = _args(op, lay, size, seed)
        problem = prepare(op, **args)
        expected = op_module(op).reference(problem)
        (name, want), = expected[0].items()
        row = {"layer": ", ".join(x["name"] for x in lays), "C": c, "K": k}
        for stage in STAGES[op]:
            plan = plan_stage(op, stage, ctx=ctx, **args)
            plan.enqueue()
            result = check_plan(plan, expected)
            row[stage] = result.max_error / float(np.abs(want).max())
            row[f"{stage} ratio"] = result.worst_ratio
            row[f"{stage} ran"] = plan.stage.name
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------
# The NumPy model of chapter 12 (winograd.conv2d, every step in float32) on random data: the error
# of F(4x4) for a choice of interpolation points, and its worst element against conv_dgrad's
# tolerance for a thin layer (chapter 12a: which points the kernels use, and from which K the
# input gradient runs F(4x4) itself).

def model_error(points, c: int, seed: int = 0, size: int = 16, k: int = 8) -> float:
    """max |F(4x4) model - float64 reference| / max |reference| for a ``size`` x ``size`` image
    with ``c`` input and ``k`` output channels, padding 1, with the interpolation ``points``."""
    from ..ops.reference import conv2d_forward
    from .winograd import conv2d
    rng = np.random.default_rng(seed + c)
    x = rng.standard_normal((1, c, size, size)).astype(np.float32)
    w = (rng.standard_normal((c, k, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    exact = conv2d_forward(x, w, 1, 1)
    return float(np.abs(conv2d(x, w, 1, 4, points=points) - exact).max() / np.abs(exact).max())


def dgrad_worst(k_channels: int, points, seeds: int = 4) -> float:
    """The worst element of the input gradient through the F(4x4) model, as a fraction of conv_dgrad's
    tolerance (each element against the sum of its own terms), for a layer with ``k_channels`` output
    channels to sum over: the forward convolution of dy with the rotated filter, paddings 0 to 2."""
    from ..engine.check import rtol_for_sum
    from ..ops.reference import conv2d_forward
    from .winograd import conv2d
    worst = 0.0
    for pad in (0, 1, 2):
        for seed in range(seeds):
            rng = np.random.default_rng(100 * seed + k_channels)
            dy = rng.standard_normal((1, k_channels, 11, 13)).astype(np.float32)
            w = (rng.standard_normal((k_channels, 5, 3, 3)) / np.sqrt(9 * k_channels)).astype(np.float32)
            exact = conv2d_forward(dy, w, 1, pad)
            own = conv2d_forward(np.abs(dy), np.abs(w), 1, pad)
            err = np.abs(conv2d(dy, w, pad, 4, points=points) - exact)
            worst = max(worst, float((err / (rtol_for_sum(9 * k_channels) * own)).max()))
    return worst
