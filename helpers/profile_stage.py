"""`python -m helpers.profile_stage`: run one stage once on one layer, for a profiler.

A profiler such as Nsight Compute wraps the command and profiles the stage's launches:

    ncu --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum -k conv_dgrad \\
        python3 -m helpers.profile_stage conv_dgrad padded_cuda --layer res64@56 --n 8

The stage is built and launched through the engine (run_stage's path: the registry's defaults <
the device's tuned parameters < --defines, fallbacks followed), launched once, then checked
against the reference; one line of JSON says what ran (stage, path, defines, grid). Launches:
exactly one per kernel of the stage; the check launches nothing.
"""
from __future__ import annotations

import argparse
import json
import sys

from .bench import parse_defines
from .ops import op_module
from .ops.layers import LAYER_SETS
from .runner import check_plan, plan_stage


def find_layer(name: str) -> dict:
    """A layer by name from any layer set (helpers/ops/layers.py)."""
    for lays in LAYER_SETS.values():
        for lay in lays:
            if lay["name"] == name:
                return lay
    names = sorted({lay["name"] for lays in LAYER_SETS.values() for lay in lays})
    raise ValueError(f"no layer {name!r}; the layers are {', '.join(names)}")


def profile(op: str, stage, layer: str, n: int = 0, defines: dict | None = None, device=None,
            activation: str = "none") -> dict:
    """Run ``stage`` of ``op`` once on ``layer`` (batch ``n``; 0: the layer's own), check it."""
    lay = find_layer(layer)
    if n:
        lay = dict(lay, n=n)
    plan = plan_stage(op, stage, ctx=device, defines=defines,
                      **op_module(op).layer_args(lay, activation=activation))
    plan.enqueue()
    result = check_plan(plan)
    return {"op": op, "stage": plan.stage.key, "path": plan.path, "layer": layer, "n": lay["n"],
            "defines": plan.jit_defines, "steps": [[s.kernel, list(s.global_size), list(s.local_size or ())]
                                               for s in plan.steps],
            "max_error": result.max_error}


def main(argv=None) -> int:
    from .engine.backends import BackendUnavailable
    from .engine.devices import NoDeviceError
    ap = argparse.ArgumentParser(prog="python -m helpers.profile_stage", description=__doc__.split("\n")[0])
    ap.add_argument("op")
    ap.add_argument("stage", help="name, number or key (python -m helpers.bench --help lists them)")
    ap.add_argument("--layer", required=True, help="a layer's name, e.g. res64@56 (helpers/ops/layers.py)")
    ap.add_argument("--n", type=int, default=0, help="batch (default: the layer's own)")
    ap.add_argument("--defines", default=None, help="JIT parameters, e.g. TY=8,XPW=8")
    ap.add_argument("--device", default=None, help="OpenCL stages: 'P:D' or part of a name")
    ap.add_argument("--activation", default="none")
    a = ap.parse_args(argv)
    try:
        stage = int(a.stage) if a.stage.isdigit() else a.stage
        out = profile(a.op, stage, a.layer, a.n, parse_defines(a.defines), a.device, a.activation)
    except (ValueError, TypeError, NoDeviceError, BackendUnavailable) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
