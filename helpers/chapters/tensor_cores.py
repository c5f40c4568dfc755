"""Chapter 13's measurements beyond the benchmark: how far each tensor-core precision lands from
the exact input gradient, per layer.

    python -m helpers.chapters.tensor_cores --layers resnet50 --n 4 --out results/x.json

For each layer (random inputs, the course's seed) every stage runs once on the GPU; its result is
compared with the float64 reference of the float32 inputs (the exact answer, before any rounding)
and with the float32 CUDA stage's result (what an fp32 kernel returns). An error is measured in
the unit the checker uses: |got - reference| at an element divided by the sum of |terms| there
(helpers/engine/check.py), worst and median over the layer; beside it, the tolerance the stage is
tested to on that layer (from the reference of its rounded inputs: runner.check_plan).
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from ..engine.check import tolerance_stored
from ..ops import conv_dgrad
from ..ops.layers import layer_set
from ..runner import plan_stage
from ..stages import get_stage

STAGES = ("memoized_bounds_cuda", "tc_tf32", "tc_fp16", "tc_bf16")   # fp32 first: the float32 result


def tested_rtol(problem, stage) -> float:
    """The relative tolerance (of the sum of |terms|) stage is checked to on this problem."""
    s = get_stage("conv_dgrad", stage)
    rtol = conv_dgrad.rtol(problem, mma=s.precision) if s.tensor_cores else conv_dgrad.rtol(problem)
    return tolerance_stored(rtol, s.precision)[0]


def accuracy(layers="resnet50", n: int = 4, stages=STAGES, activation: str = "none") -> list:
    rows = []
    for lay in (layer_set(layers) if isinstance(layers, str) else layers):
        lay = dict(lay, n=n) if n else lay
        args = conv_dgrad.layer_args(lay, activation=activation)
        exact, magnitude = (v["grad_input"] for v in conv_dgrad.reference(conv_dgrad.prepare(**args)))
        mag = np.maximum(magnitude, np.finfo(np.float32).tiny)
        fp32 = None
        for stage in stages:
            plan = plan_stage("conv_dgrad", stage, **args)
            plan.enqueue()
            got = plan.outputs()["grad_input"].astype(np.float64)
            fp32 = got if fp32 is None else fp32
            err64, err32 = np.abs(got - exact) / mag, np.abs(got - fp32) / mag
            rows.append({"layer": lay["name"], "n": lay["n"], "stage": stage, "ran": plan.stage.key,
                         "precision": plan.stage.precision, "terms": plan.problem.dims["K"] * plan.problem.dims["KH"] * plan.problem.dims["KW"],
                         "max_vs_float64": float(err64.max()), "median_vs_float64": float(np.median(err64)),
                         "max_vs_fp32": float(err32.max()), "median_vs_fp32": float(np.median(err32)),
                         "tested_rtol": tested_rtol(plan.problem, stage)})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="resnet50")
    ap.add_argument("--n", type=int, default=4, help="batch (0: the layer set's own)")
    ap.add_argument("--stages", nargs="*", default=list(STAGES))
    ap.add_argument("--out", default="-")
    a = ap.parse_args(argv)
    from ..engine.backends.cuda import device
    out = {"kind": "accuracy", "op": "conv_dgrad", "layer_set": a.layers, "device": device()["name"],
           "unit": "|got - reference| / sum of |terms| at the element", "rows": accuracy(a.layers, a.n, a.stages)}
    text = json.dumps(out, indent=1)
    if a.out == "-":
        print(text)
    else:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    for r in out["rows"]:
        print(f"{r['layer']:>14} {r['stage']:>22}  max {r['max_vs_float64']:.2e} vs float64, "
              f"{r['max_vs_fp32']:.2e} vs fp32; tested to {r['tested_rtol']:.2e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
