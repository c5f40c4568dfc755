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
