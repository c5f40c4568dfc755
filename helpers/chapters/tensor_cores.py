"""Chapter 13's models and measurements: the mma fragment layout, the bank model of ldmatrix on
the padded, unpadded and swizzled shared layouts, the PTX of each stage, the recorded runs as
tables, and (on a GPU) how far each tensor-core precision lands from the exact input gradient.

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
import re
import sys

import numpy as np

from ..engine.fragments import fragment_owner, ldmatrix_rows
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
BK = 32          # reduction indices per shared row (kernels/conv_dgrad/13_*.cu)
DENSE_TF32 = DATA_SHEET["tf32"]   # TFLOP/s, H200 SXM data sheet (TF32 with 2:4 sparsity, halved): not measured


# -- the fragment layout of mma.sync.m16n8k8 (TF32): helpers/engine/fragments.py, the one model ----

def draw_fragments(axes=None):
    """The three operands of one m16n8k8 TF32 mma, each element labelled lane/register, coloured
    by lane: what each of the warp's 32 lanes holds in its registers."""
    import matplotlib.pyplot as plt
    shapes = {"A": (16, 8, "A (16 x 8): dy' rows = positions, columns = k"),
              "B": (8, 8, "B (8 x 8): w, rows = k, columns = channels"),
              "C": (16, 8, "C (16 x 8): fp32 sums, positions x channels")}
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(13, 6.5), gridspec_kw={"height_ratios": [1]})
    cmap = plt.get_cmap("tab20")
    for ax, (op, (rows, cols, title)) in zip(axes, shapes.items()):
        top = (16 + rows) / 2                     # an 8-row operand centred beside the 16-row ones
        for r in range(rows):
            for c in range(cols):
                lane, reg = fragment_owner(op, r, c)
                ax.add_patch(plt.Rectangle((c, top - 1 - r), 1, 1, color=cmap(lane % 20), alpha=0.35 + 0.4 * (lane // 20 % 2)))
                ax.text(c + 0.5, top - 0.5 - r, f"{lane}\n{op.lower()}{reg}", ha="center", va="center", fontsize=6.5)
        ax.set_xlim(0, cols)
        ax.set_ylim(0, 16)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(title, fontsize=9, y=top / 16)
    return axes


# -- step 8: the boxes the Tensor Memory Accelerator copies ----------------------------------

def tma_boxes(h0: int, w0: int, ph: int, pw: int, size: tuple, kernel: int = 3, pad: int = 1) -> list[dict]:
    """For a block whose patch starts at row h0, column w0 of dx (PH x PW positions per image;
    13_tc_nhwc.cu: TMA), the box of dy' each tap (r, s) copies: its first row and column in dy
    (h0 + pad - r, w0 + pad - s) and how many of its PH x PW positions lie outside the image of
    ``size`` (OH, OW), which the TMA fills with zeros instead of reading."""
    out = []
    for r in range(kernel):
        for s in range(kernel):
            top, left = h0 + pad - r, w0 + pad - s
            inside = (sum(0 <= top + i < size[0] for i in range(ph)) * sum(0 <= left + j < size[1] for j in range(pw)))
            out.append({"tap": (r, s), "row": top, "col": left, "zeros": ph * pw - inside})
    return out


def draw_tma_boxes(ax, h0: int = 0, w0: int = 0, ph: int = 8, pw: int = 8, size: tuple = (56, 56),
                   taps=((0, 0), (1, 1), (2, 2))):
    """dy' around a block's patch: the image's corner, the patch (dx positions), and the boxes of
    a few taps, each one copy instruction; the part of a box outside the image is hatched (zeros)."""
    import matplotlib.pyplot as plt
    boxes = {b["tap"]: b for b in tma_boxes(h0, w0, ph, pw, size)}
    lo, hi = min(h0, w0) - 2, max(h0 + ph, w0 + pw) + 2
    ax.add_patch(plt.Rectangle((0, 0), size[1], size[0], facecolor="0.93", edgecolor="0.3", lw=1.5))
    ax.add_patch(plt.Rectangle((w0, h0), pw, ph, facecolor="none", edgecolor="k", lw=2.5, ls="--"))
    for (r, s), color in zip(taps, ("tab:blue", "tab:orange", "tab:red")):
        b = boxes[r, s]
        ax.add_patch(plt.Rectangle((b["col"] + 0.08 * r, b["row"] + 0.08 * r), pw, ph, facecolor=color, alpha=0.18,
                                   edgecolor=color, lw=2, label=f"tap ({r}, {s}): box from ({b['row']}, {b['col']}), "
                                   f"{b['zeros']} zero-filled"))
    ax.add_patch(plt.Rectangle((lo, lo), -lo, hi - lo, facecolor="none", hatch="//", edgecolor="0.6", lw=0))
    ax.add_patch(plt.Rectangle((0, lo), hi, -lo, facecolor="none", hatch="//", edgecolor="0.6", lw=0))
    ax.set_xlim(lo, hi)
    ax.set_ylim(hi, lo)
    ax.set_aspect("equal")
    ax.set_xlabel("column of dy' (ow)")
    ax.set_ylabel("row of dy' (oh)")
    ax.set_title(f"dashed: the block's {ph} x {pw} positions of dx (per image); hatched: outside the image")
    ax.legend(loc="lower right", fontsize=8)
    return ax


# -- the bank model of the 16-bit stages' shared tiles ----------------------------------------

def shared_offset(layout: str, row: int, chunk: int) -> int:
    """Byte offset of 16-byte chunk ``chunk`` (8 values) of shared row ``row`` of a BK = 32 tile:
    'padded' (tc_fp16: rows of 40 values), 'plain' (rows of 32, unpadded), 'swizzled'
    (tc_fp16_ldm: chunk j stored at j ^ ((row / 2) % 4))."""
    if layout == "padded":
        return row * 80 + chunk * 16
    if layout == "plain":
        return row * 64 + chunk * 16
    if layout == "swizzled":
        return row * 64 + (chunk ^ ((row >> 1) & 3)) * 16
    raise ValueError(f"layout is 'padded', 'plain' or 'swizzled', not {layout!r}")


def ldmatrix_lanes(layout: str, ks: int = 0) -> list:
    """Word addresses (4 per lane) of ldmatrix.x4 loading a 16 x 16 A tile at k-step ``ks``:
    lane l names row l % 16, chunk ks / 8 + l / 16 (what the fragment layouts ask: ldmatrix_rows).
    Served 8 lanes (one 8x8 matrix) per part."""
    return [[shared_offset(layout, row, ks // 8 + chunk) // 4 + i for i in range(4)]
            for row, chunk in ldmatrix_rows("A")]


def row_store_lanes(layout: str, chunk: int = 0) -> list:
    """Word addresses of a warp's 16-byte stores of the gathered rows: lane l writes chunk
    ``chunk`` of row l (each thread owns one position's row)."""
    return [[shared_offset(layout, lane, chunk) // 4 + i for i in range(4)] for lane in range(32)]


def bank_table() -> list[tuple]:
    """(access, layout, passes, conflict-free passes) for the 16-bit stages' shared accesses."""
    from .pictures_winograd import passes
    rows = []
    for access, lanes_of in (("ldmatrix.x4 of A", ldmatrix_lanes), ("16-byte row stores", row_store_lanes)):
        for layout in ("padded", "plain", "swizzled"):
            rows.append((access, layout, passes(lanes_of(layout)), 4))
    return rows


# -- PTX ---------------------------------------------------------------------------------------

KEY_INSTRUCTIONS = ("mma.sync", "ldmatrix", "cp.async", "cvt.rna.tf32", "ld.shared", "st.shared")


def stage_ptx(stage: str, arch: str = "compute_80", layer: dict | None = None, defines: dict | None = None) -> str:
    """The PTX NVRTC makes of a stage's kernel (its defaults and ``defines``, for a 3x3 stride-1 layer)."""
    from ..engine.backends import nvrtc
    from ..runner import jit_defines, prepare, stage_source
    s = get_stage("conv_dgrad", stage)
    lay = layer or {"n": 1, "c": 64, "h": 8, "w": 8, "k": 64, "kernel": 3, "stride": 1, "padding": 1}
    problem = prepare("conv_dgrad", **conv_dgrad.layer_args(dict(lay, name="ptx")))
    jit = jit_defines(s, problem, {**s.defines, **(defines or {})})
    return nvrtc.compile_ptx(s.kernel, jit, arch, source=stage_source(s, jit))


def ptx_counts(ptx: str) -> dict:
    """How many PTX lines hold each key instruction (in the unrolled kernel body)."""
    return {k: sum(1 for line in ptx.splitlines() if line.strip().startswith(k)) for k in KEY_INSTRUCTIONS}


def ptx_excerpt(ptx: str, instruction: str, lines: int = 2) -> list[str]:
    """The first ``lines`` PTX lines starting with ``instruction``."""
    return [line.strip() for line in ptx.splitlines() if line.strip().startswith(instruction)][:lines]


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


def dy_offset(layout: str, dims: dict, n: int, h: int, w: int, k: int) -> int:
    """Where dy'[n, k, h, w] lies (in values) in step 5's copies: "nhwc" (N, OH, OW, K) or
    "nchw32" (N, KR/32, OH, OW, 32), KR = K padded to a multiple of 32 (13_tc_nhwc.cu: ILV)."""
    K, OH, OW = dims["K"], dims["OH"], dims["OW"]
    if layout == "nhwc":
        return ((n * OH + h) * OW + w) * K + k
    groups = -(-K // 32)
    return (((n * groups + k // 32) * OH + h) * OW + w) * 32 + k % 32


def layout_table(K: int, OH: int, OW: int, size: int = 2) -> list[tuple]:
    """(what, channel-last, interleaved) for a layer with K channels of OH x OW: the distances (in
    bytes of ``size``-byte values) that decide what one step of the product reads, and the padding."""
    d = {"K": K, "OH": OH, "OW": OW}

    def apart(layout, a, b):           # bytes from dy'[0, a] to dy'[0, b], a and b as (h, w, k)
        return (dy_offset(layout, d, 0, *b) - dy_offset(layout, d, 0, *a)) * size

    kr = -(-K // 32) * 32
    both = ("nhwc", "nchw32")
    return [("32 channels of one pixel", *(f"{apart(l, (0, 0, 0), (0, 0, 31)) + size} B in a row" for l in both)),
            ("to the same channels one pixel on", *(f"{apart(l, (0, 0, 0), (0, 1, 0)):,} B" for l in both)),
            ("to the next 32 channels", *(f"{apart(l, (0, 0, 0), (0, 0, 32)):,} B" for l in both)),
            ("32 channels of 128 pixels in a row", f"128 runs of {32 * size} B", f"one run of {128 * 32 * size:,} B"),
            ("channels the product reduces over", f"{K}", f"{kr} ({kr - K} zeros)" if kr > K else f"{kr}")]


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


# -- step 6: the forward pass on the same kernel (FWD = 1) -------------------------------------

def forward_blocks(kernel: str = "conv_dgrad/13_tc_nhwc.cu") -> list[tuple[int, list[str]]]:
    """The kernel's lines that only the forward pass compiles (switch_blocks of FWD)."""
    return switch_blocks("FWD", kernel)


def switch_blocks(switch: str, kernel: str = "conv_dgrad/13_tc_nhwc.cu") -> list[tuple[int, list[str]]]:
    """The kernel's lines that only a build with ``switch`` = 1 compiles: each ``#if <switch>``
    block up to its ``#else``, ``#elif`` or ``#endif``, as (first line number, lines)."""
    from ..engine.kernels import kernel_source
    lines = kernel_source(kernel).splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == f"#if {switch}":
            depth, j = 0, i + 1
            while depth or not lines[j].strip().startswith(("#else", "#elif", "#endif")):
                depth += lines[j].strip().startswith("#if")
                depth -= depth and lines[j].strip().startswith("#endif")
                j += 1
            out.append((i + 2, lines[i + 1:j]))
            i = j
        i += 1
    return out


def wgmma_rows(run: dict) -> list[dict]:
    """Per (layer, precision) of a recorded run holding step 5's and step 7's stages: both times,
    cuDNN's in that precision, the ratios (step 5 / step 7, each stage / cuDNN), and step 7's block
    width and split of the reduction (BN, SPLITK: as gemm.wgmma_fit and nhwc_splits chose them)."""
    return _step_rows(run, WGMMA_STAGES, "nhwc", "wgmma")


def tma_rows(run: dict) -> list[dict]:
    """wgmma_rows for step 7 (``wgmma_ms``) and step 8 (``tma_ms``), with step 8's patch (PN, PH,
    PW: gemm.tma_patch) and ``fallback``: True where step 8 ran another stage (a K its tensor map
    cannot stride: tma_patch's requirement, mma_nhwc_requires)."""
    return _step_rows(run, TMA_STAGES, "wgmma", "tma")


def tma_store_layers(sets=("resnet50", "vgg16")) -> list[dict]:
    """Per layer (at its batch) and TMA stage: its patch, whether the product writes dx by the TMA
    store (TMA_STORE as the launch sets it) and, where not, why (helpers/launch/gemm.py:
    tma_store_off). Decided on the host: no GPU needed."""
    from ..launch import gemm
    from ..runner import jit_defines, prepare
    out = []
    for set_name in sets:
        for lay in layer_set(set_name):
            p = prepare("conv_dgrad", **conv_dgrad.layer_args(lay))
            for stage in ("tc_tf32_tma", "tc_fp16_tma", "tc_bf16_tma"):
                s = get_stage("conv_dgrad", stage)
                jit = jit_defines(s, p, s.defines)
                out.append({"layer": lay["name"], "stage": stage, "precision": s.precision,
                            "patch": gemm.tma_patch(p), "store": bool(jit["TMA_STORE"]),
                            "why": gemm.tma_store_off(p, s.defines, 4 if jit.get("TF32") else 2)})
    return out


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


NCU_METRICS = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "Issue Slots Busy",
               "Executed Ipc Active", "Eligible Warps Per Scheduler", "Registers Per Thread",
               "Static Shared Memory Per Block", "Theoretical Occupancy", "Achieved Occupancy")
# step 7's report adds where the bytes come from and how full each scheduler is
NCU_MEMORY = ("L2 Cache Throughput", "L2 Hit Rate", "DRAM Throughput", "Dynamic Shared Memory Per Block",
              "Active Warps Per Scheduler")
TOP_PIPE = re.compile(r"(\S+) is the highest-utilized pipeline \(([\d.]+)%\)")
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio\s+\S+\s+([\d.]+)")


def ncu_summary(path: str = "tc/ncu_nhwc_nvidia-h200.txt", metrics=NCU_METRICS) -> dict:
    """{"stage layer": {metric: (value, unit)}} from a recorded Nsight Compute text report under
    results/ ("== stage layer" lines separate the runs; the ``metrics`` named, the pipeline ncu
    names as the most used, as "top pipeline": (percent, its name), and where the report holds
    them the warps' stall reasons, as "stalls": {reason: cycles per issued instruction})."""
    from ..analysis.results import RESULTS
    out, run = {}, None
    for line in (RESULTS / path).read_text().splitlines():
        if line.startswith("== "):
            run = line[3:].strip()
            out[run] = {}
            continue
        if run is None:
            continue
        top = TOP_PIPE.search(line)
        if top:
            out[run]["top pipeline"] = (float(top.group(2)), f"% ({top.group(1)})")
        stall = STALL.search(line)
        if stall:
            out[run].setdefault("stalls", {})[stall.group(1)] = float(stall.group(2))
        for name in metrics:
            if line.strip().startswith(name + " ") and name not in out[run]:   # the first: SpeedOfLight's
                parts = line.split()
                unit = " ".join(parts[len(name.split()):-1])
                out[run][name] = (float(parts[-1].replace(",", "")), unit)
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
