"""Chapter 13's measurements: its stages, their recorded runs as tables, and (on a GPU) how far
each tensor-core precision lands from the exact input gradient. The chapter's host models are in
tensor_core_layouts.py, its PTX in ptx.py, its Nsight Compute reports in ncu_reports.py, its
pictures in pictures_tensor_cores.py.

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

from ..ops import conv_dgrad, tolerance
from ..ops.layers import layer_set
from ..runner import plan_stage
from ..stages import get_stage
from ..tc_peak import DATA_SHEET

STAGES = ("memoized_bounds_cuda", "tc_tf32", "tc_fp16", "tc_bf16")   # fp32 first: the float32 result
NHWC_STAGES = ("tc_fp16_nhwc", "tc_bf16_nhwc", "tc_tf32_nhwc")      # step 5: one file, three precisions
NCHW32_STAGES = ("tc_fp16_nchw32", "tc_bf16_nchw32", "tc_tf32_nchw32")   # the same kernel, dy' interleaved
TC_STAGES = ("tc_tf32", "tc_fp16", "tc_bf16", "tc_fp16_ldm", "tc_fp16_pipe") + NHWC_STAGES + NCHW32_STAGES
WGMMA_STAGES = ("tc_fp16_wgmma", "tc_bf16_wgmma", "tc_tf32_wgmma")   # step 7: step 5's kernel on wgmma (sm_90a)
TMA_STAGES = ("tc_fp16_tma", "tc_bf16_tma", "tc_tf32_tma")           # step 8: step 7's copies by the TMA
DENSE_TF32 = DATA_SHEET["tf32"]   # TFLOP/s, H200 SXM data sheet (TF32 with 2:4 sparsity, halved): not measured


# -- recorded runs -----------------------------------------------------------------------------

def recorded_rows(run: dict) -> list[dict]:
    """Per (layer, stage): time, TFLOP/s, cuDNN's time in the stage's precision and the ratio."""
    vendor = {(v["layer"], v.get("precision", "fp32")): v for v in run["vendor"]}
    out = []
    for r in run["rows"]:
        v = vendor.get((r["layer"], r["precision"]))
        out.append({"layer": r["layer"], "stage": r["stage"], "precision": r["precision"], "path": r["path"],
                    "defines": r["defines"], "ms": r["median_ms"], "tflops": r["gflops"] / 1e3,
                    "cudnn_ms": v["median_ms"] if v else float("nan"),
                    "cudnn_tflops": v["gflops"] / 1e3 if v else float("nan"),
                    "x_cudnn": r.get("x_vendor", float("nan"))})
    return out


def dy_copy_ms(row: dict) -> float:
    """The time of a recorded row's copy of dy' (dy_to_nhwc or dy_to_nchw32) alone."""
    return next(ms for name, ms in row["steps_ms"] if name.startswith("dy_to_"))


def step_rows(run: dict, stages=NHWC_STAGES) -> list[dict]:
    """Per (layer, stage) of a recorded run: each kernel's median time alone (the bench records
    them for multi-kernel stages) and the share of the layout copies in their sum."""
    out = []
    for r in run["rows"]:
        if r["stage"] in stages and "steps_ms" in r:
            t = dict(r["steps_ms"])
            copies = sum(v for k, v in t.items() if k != "conv_dgrad")
            out.append({"layer": r["layer"], "stage": r["stage"], "dy_ms": dy_copy_ms(r), "w_ms": t["w_to_crsk"],
                        "product_ms": t["conv_dgrad"], "stage_ms": r["median_ms"],
                        "copy_share": copies / (copies + t["conv_dgrad"])})
    return out


def layout_rows(run: dict) -> list[dict]:
    """Per (layer, precision) of a recorded run: the channel-last and the interleaved stage side by
    side, whole stage and dy' copy."""
    by = {(r["layer"], r["stage"]): r for r in run["rows"]}
    out = []
    for a, b in zip(NHWC_STAGES, NCHW32_STAGES):
        for layer in dict.fromkeys(r["layer"] for r in run["rows"]):
            if (layer, a) in by and (layer, b) in by:
                ra, rb = by[layer, a], by[layer, b]
                out.append({"layer": layer, "precision": ra["precision"], "nhwc_ms": ra["median_ms"],
                            "nchw32_ms": rb["median_ms"], "nhwc_dy_ms": dy_copy_ms(ra), "nchw32_dy_ms": dy_copy_ms(rb),
                            "ratio": ra["median_ms"] / rb["median_ms"]})
    return out


def best_fp32(layer: str, layer_set: str = "resnet50", device: str = "NVIDIA H200") -> dict:
    """The fastest float32 row on ``layer`` over every recorded conv_dgrad run of the layer set on
    that device (the ladder and the tagged runs, OpenCL and CUDA twins): the course's best fp32.
    Stage auto is left out: it runs one of the stages, so its row is that stage timed once more."""
    from ..analysis import results
    return results.best_row("conv_dgrad", layer_set, layer, device, skip=("auto",))


def split_rows(split: dict, unsplit: dict) -> list[dict]:
    """Per (layer, stage) of two recorded runs of the same stages, one with split-K as chosen per
    layer and one with it off (SPLIT_TARGET = 1): both times with their quartiles, the runs the
    reduction was cut into, and unsplit / split."""
    off = {(r["layer"], r["stage"]): r for r in unsplit["rows"]}
    out = []
    for r in split["rows"]:
        o = off[r["layer"], r["stage"]]
        out.append({"layer": r["layer"], "stage": r["stage"], "splits": r["defines"].get("SPLITK", 1),
                    "ms": r["median_ms"], "q": (r["q1_ms"], r["q3_ms"]), "off_ms": o["median_ms"],
                    "off_q": (o["q1_ms"], o["q3_ms"]), "speedup": o["median_ms"] / r["median_ms"],
                    "x_cudnn": r["x_vendor"]})
    return out


def wgmma_rows(run: dict) -> list[dict]:
    """Per (layer, precision) of a recorded run holding step 5's and step 7's stages: both times,
    cuDNN's in that precision, the ratios (step 5 / step 7, each stage / cuDNN), and step 7's block
    width and split of the reduction (BN, SPLITK: as helpers/launch/tensor_cores.py: wgmma_fit and
    nhwc_splits chose them)."""
    return _step_rows(run, WGMMA_STAGES, "nhwc", "wgmma")


def tma_rows(run: dict) -> list[dict]:
    """wgmma_rows for step 7 (``wgmma_ms``) and step 8 (``tma_ms``), with step 8's patch (PN, PH,
    PW: the launch's tma_patch) and ``fallback``: True where step 8 ran another stage (a K its tensor map
    cannot stride: tma_patch's requirement, mma_nhwc_requires)."""
    return _step_rows(run, TMA_STAGES, "wgmma", "tma")


def _step_rows(run: dict, stages: tuple, old: str, new: str) -> list[dict]:
    rows = recorded_rows(run)
    by = {(r["layer"], r["stage"]): r for r in rows}
    out = []
    for r in rows:
        if r["stage"] in stages:
            before, d = by[r["layer"], r["stage"].replace(f"_{new}", f"_{old}")], r["defines"]
            patch = (128 // (d["PH"] * d["PW"]), d["PH"], d["PW"]) if d.get("TMA") else None
            out.append({"layer": r["layer"], "precision": r["precision"], f"{old}_ms": before["ms"],
                        f"{new}_ms": r["ms"], "tflops": r["tflops"], "cudnn_ms": r["cudnn_ms"],
                        "speedup": before["ms"] / r["ms"], "x_cudnn": r["x_cudnn"],
                        f"{old}_x_cudnn": before["x_cudnn"], "bn": d["BN"], "splits": d.get("SPLITK", 1),
                        "patch": patch, "fallback": r["path"] == "fallback"})
    return out


def forward_rows(with_epilogue: dict, bare: dict) -> list[dict]:
    """Per (layer, stage) of two recorded conv_forward runs of the same stages, one with a bias and
    an activation and one without: each stage's time and cuDNN's (PyTorch adds the bias and
    applies the activation in kernels of their own) in both, and what the epilogue adds to each."""
    a, b = recorded_rows(with_epilogue), recorded_rows(bare)
    kernels = lambda run: {(v["layer"], v["precision"]): v["kernels_per_call"] for v in run["vendor"]}
    ka, kb = kernels(with_epilogue), kernels(bare)
    by = {(r["layer"], r["stage"]): r for r in b}
    out = []
    for r in a:
        o = by[r["layer"], r["stage"]]
        key = (r["layer"], r["precision"])
        out.append({"layer": r["layer"], "stage": r["stage"], "precision": r["precision"],
                    "ms": r["ms"], "bare_ms": o["ms"], "cudnn_ms": r["cudnn_ms"], "cudnn_bare_ms": o["cudnn_ms"],
                    "x_cudnn": r["x_cudnn"], "x_cudnn_bare": o["x_cudnn"],
                    "epilogue": r["ms"] / o["ms"], "cudnn_epilogue": r["cudnn_ms"] / o["cudnn_ms"],
                    "cudnn_kernels": ka[key], "cudnn_bare_kernels": kb[key]})
    return out


def tested_rtol(problem, stage) -> float:
    """The relative tolerance (of the sum of |terms|) stage is checked to on this problem."""
    return tolerance("conv_dgrad", problem, get_stage("conv_dgrad", stage))["grad_input"].rtol


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
    out = {"kind": "accuracy", "op": "conv_dgrad", "layer_set": a.layers, "tag": "tc_accuracy",
           "device": {"name": device()["name"], "type": "GPU"},
           "settings": {"command": "python -m helpers.chapters.tensor_cores " + " ".join(argv or sys.argv[1:]), "n": a.n},
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
