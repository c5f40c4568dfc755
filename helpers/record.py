"""Record a GPU into results/: the runs the chapters plot and the issues' targets are judged on,
in order of priority, one command per task, each short enough for one sitting on a shared machine.

    python -m helpers.record --list                          # the plan
    python -m helpers.record --device nvidia --list          # ... and what is recorded for that device
    python -m helpers.record --device nvidia --budget 9      # the next tasks not yet recorded, ~9 minutes
    python -m helpers.record --device nvidia --run floor,ladder-resnet50
    python -m helpers.record --device nvidia --budget 9 --dry-run   # print the commands only

Every task is a command the course already has (the benchmark, its tuning searches, the timer
floor, the training run, the GPU tests), written into results/ under the device's own name, the
same file names the H200's runs have, so the chapters and README's tables pick them up beside the
H200's. The plan opens with what the device gets untuned (COURSE_TUNED=none), then the tuning
searches, each before the runs that read its parameters. A task whose file exists for the device
is done (``--budget`` skips it; ``--run`` runs it again); a task that failed or wrote nothing there
last time (a CUDA task, or a register count, on another vendor's GPU, say) is left for ``--run``. Each task the recorder runs is
logged, with its command, exit status and wall time, in results/record_<device>.json.

``minutes`` are wall times on the H200 (builds, checks and the vendor's timing included), measured
for the tasks marked so and estimated for the others; the log holds what each run took.
Chapter 10's bank-conflict table (results/local/ncu_banks_conv_dgrad_*) is not in the plan: it was
written by ncu per stage with each row's tile, a command stored in the file, not one this recorder
can run.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .analysis import names
from .analysis.names import RESULTS
from .stages import LOCAL_TWINNED, REGISTRY

ROOT = RESULTS.parent


@dataclass(frozen=True)
class Task:
    name: str
    command: str      # run by bash from the repository root; {device}, {slug} and {python} filled in
    writes: str       # the file it writes, relative to results/, with {slug}
    minutes: float    # wall time on the H200: measured where ``measured``, else a rough estimate
    why: str          # what reads it
    measured: bool = False


def _bench(name: str, args: str, minutes: float, why: str, measured: bool = False, env: str = "") -> Task:
    """A benchmark task; the file it writes is the benchmark's own name for it (analysis/names.py),
    or its --out."""
    from .bench import parser
    a = parser().parse_args(args.replace("{slug}", "SLUG").split())
    if a.out:
        writes = a.out.removeprefix("results/").replace("SLUG", "{slug}")
    else:
        writes = names.bench(a.op, a.layers, "{slug}", a.activation, a.tag)
    if (a.tune or a.tune_only) and not a.commit:     # a recorded GPU's values go into results/tuned.json
        args += " --commit"
    return Task(name, env + "{python} -m helpers.bench --device {device} " + args, writes, minutes, why, measured)


def _tests(name: str, group: str, files: str, minutes: float, why: str, measured: bool = False) -> Task:
    """A group of the test suite run on the device, its output kept as a log."""
    log = names.test_log(group, "{slug}")
    return Task(name, f"{GPU_TESTS} {files} > results/{log} 2>&1", log, minutes, why, measured)


def _notebooks(part: int, minutes: float) -> Task:
    """One part of the notebooks run at full size under nbval on the device, its output kept as a log."""
    log = names.test_log("notebooks", "{slug}", f"nbval_full_{part}").replace("pytest_", "")
    files = " ".join(f"notebooks/{n}.ipynb" for n in NOTEBOOK_PARTS[part - 1].split())
    return Task(f"nbval-full-{part}", f"{NBVAL_FULL} {files} > results/{log} 2>&1", log, minutes,
                f"every chapter at full size on the device under nbval, part {part} of {len(NOTEBOOK_PARTS)}")


DGRAD_LADDER = "naive,memoized_bounds,weight_vec,input_vec,output_depth,input_depth,width,winograd"
LOCAL_STAGES = "naive,width,local_tile,register_block,prefetch,transposed,padded,swizzle"
LOCAL_TWINS = ",".join(f"{s},{s}_cuda" for s in LOCAL_TWINNED)
TC_STAGES = "tc_tf32,tc_fp16,tc_bf16,tc_fp16_ldm,tc_fp16_pipe,tc_fp16_nhwc,tc_bf16_nhwc,tc_tf32_nhwc," \
            "tc_fp16_nchw32,tc_bf16_nchw32,tc_tf32_nchw32"
HOPPER = "tc_tf32_wgmma,tc_fp16_wgmma,tc_bf16_wgmma,tc_tf32_tma,tc_fp16_tma,tc_bf16_tma"
UNTUNED = "naive,width,prefetch,hoisted,igemm_taps,winograd4,auto"
# the registry's defaults, and a choice cache of their own (auto searches again with them)
UNTUNED_ENV = "COURSE_TUNED=none COURSE_CHOICES=.cache/choices_untuned_{slug}.json "
# a learner's first ten minutes on the device: `./course tune` from nothing recorded for it (its
# entry in results/tuned.json left out; its own cache, kept as the record), then auto with those values
FRESH_ENV = (f"COURSE_TUNED=fresh COURSE_TUNE_CACHE=results/{names.tune_fresh('{slug}')} "
             "COURSE_CHOICES=.cache/choices_fresh_{slug}.json ")
# -v: each test's verdict as it finishes, so a run cut short by a time limit still names what passed;
# --durations: the slowest tests (and notebook cells) named at the end, where the minutes went
GPU_TESTS = ("COURSE_TEST_DEVICES={device} {python} -m pytest -v --no-header -p no:cacheprovider -p no:benchmark "
             "--durations=25 --durations-min=5 -n 8")
# every notebook at full size under nbval (as ./course test runs them, with COURSE_SIZE=full), in
# parts of about equal length (the chapters' class times, notebooks/INSTRUCTORS.md, guide them)
# MPLBACKEND: Jupyter's inline backend, whatever the shell exported (with Agg the kernels draw no
# figure, and a checked cell that shows one misses its stored output)
NBVAL_FULL = ("MPLBACKEND=module://matplotlib_inline.backend_inline COURSE_DEVICE={device} COURSE_SIZE=full "
              "{python} -m pytest -v --no-header -p no:cacheprovider -p no:benchmark "
              "--durations=25 --durations-min=5 "
              "-n 4 --dist loadscope --nbval-lax --nbval-current-env --nbval-kernel-startup-timeout 300 "
              "--nbval-sanitize-with tests/nbval_sanitize.cfg")
NOTEBOOK_PARTS = [
    "00_devices_and_timing 01_backprop_math 01a_execution_and_memory_model 02_naive_dgrad 03_memoized_bounds "
    "04_weight_vectorization 05_input_vectorization 06_combining_output_depth 07_combining_input_depth",
    "08_combining_width 09_local_memory 10_bank_conflicts 10b_bank_conflicts_evidence 12_winograd",
    "11_conv_as_gemm 11b_conv_as_gemm_evidence 12a_winograd_f4x4 12b_winograd_evidence 14_batch_norm",
    "13_tensor_cores 13b_hopper_wgmma_tma 13c_tensor_cores_evidence 14b_batch_norm_evidence 15_training "
    "15b_course_summary 15c_torch_resnet 16_any_shape",
]
# the suite split into four device runs of a few minutes each; tests-others takes every other file
TESTS_WINOGRAD = ["tests/test_conv_forward.py", "tests/test_winograd.py"]
TESTS_GEMM = ["tests/test_conv_gemm.py", "tests/test_gemm.py", "tests/test_chooser.py"]
TESTS_CUDA = ["tests/test_cuda.py", "tests/test_cuda_plans.py"]
# the notebooks' own checks: no device in them, and they need nbformat, which a bare GPU machine lacks
TESTS_NOTEBOOK_ONLY = ["tests/test_editions.py", "tests/test_answer_leaks.py", "tests/test_prose_numbers.py"]

# chapter 16's sets and operations, with the minutes estimated for each: a set's layers times the
# wall time of its heaviest layer through the benchmark on the H200 (the host's float64 reference
# is most of it) for the depthwise, 3-D and 4-D gradients but ConvNeXt's weight gradient; the
# others (grouped, dilated, the forward passes, ConvNeXt's weight gradient) guessed from those
def candidates(op: str) -> list[str]:
    """The stages auto chooses among for ``op``, from the registry: the OpenCL float32 kernels."""
    return [s.name for s in REGISTRY[op] if s.backend == "opencl" and s.precision == "fp32" and not s.choose]


def _takes_conv_layers(op: str) -> bool:
    from .ops import op_module
    from .ops.layers import op_layers
    try:
        return op_layers(op_module(op))[0] == "conv"
    except ValueError:              # an op with no layer sets to benchmark
        return False


# the operations the zoo is recorded for: those that take its layers (2-D convolutions)
ZOO_OPS = tuple(op for op in REGISTRY if _takes_conv_layers(op))


def zoo_parts(op: str, size: int = 5) -> list[tuple[str, list[str]]]:
    """``op``'s candidates in parts of ``size`` stages, named a, b, c, ... (a tag ending in a digit
    would read as a switch's setting, which the chooser's model leaves out). About a minute a stage
    over the zoo on the H200 (11_igemm of conv_forward: 56 s), so a part fits one device call."""
    names = candidates(op)
    return [(chr(ord("a") + i), names[j:j + size]) for i, j in enumerate(range(0, len(names), size))]


# chapter 16's direct stage and its implicit GEMM, and auto choosing among every stage that runs the set
ANY_SHAPE_STAGES = {op: "any_shape,igemm_nd,auto" for op in ("conv_forward", "conv_dgrad", "conv_wgrad")}
# chapter 14's batch-norm ladder, stages 01-05 (06_one_pass and auto are timed in runs of their own)
BN_LADDER = "naive,local_two_pass,welford,vec4,fused"
# the depthwise sets' gradients also run chapter 16's depthwise ladder
DEPTHWISE_STAGES = ",dw_tiles,dw_regs"
ANY_SHAPE_TASKS = [
    ("mobilenetv2_dw", "conv_dgrad", 1.6, "MobileNetV2's depthwise input gradients beside PyTorch's"),
    ("mobilenetv2_dw", "conv_wgrad", 1.2, "MobileNetV2's depthwise weight gradients beside PyTorch's"),
    ("convnext_dw", "conv_dgrad", 1.5, "ConvNeXt's 7x7 depthwise input gradients beside PyTorch's"),
    ("convnext_dw", "conv_wgrad", 1.5, "ConvNeXt's 7x7 depthwise weight gradients beside PyTorch's"),
    ("resnext_grouped", "conv_forward", 1.0, "ResNeXt's grouped forward pass beside PyTorch's"),
    ("resnext_grouped", "conv_dgrad", 1.5, "ResNeXt's grouped input gradients beside PyTorch's"),
    ("resnext_grouped", "conv_wgrad", 1.5, "ResNeXt's grouped weight gradients beside PyTorch's"),
    ("deeplab_dilated", "conv_forward", 1.2, "DeepLab's dilated forward pass beside PyTorch's"),
    ("deeplab_dilated", "conv_dgrad", 1.5, "DeepLab's dilated input gradients beside PyTorch's"),
    ("deeplab_dilated", "conv_wgrad", 1.5, "DeepLab's dilated weight gradients beside PyTorch's"),
    ("video3d", "conv_forward", 1.0, "the 3-D forward pass beside PyTorch's conv3d"),
    ("video3d", "conv_dgrad", 1.0, "the 3-D input gradients beside PyTorch's conv3d"),
    ("video3d", "conv_wgrad", 1.5, "the 3-D weight gradients beside PyTorch's conv3d"),
    ("conv4d", "conv_forward", 0.4, "the 4-D forward pass beside the recursion over conv3d"),
    ("conv4d", "conv_dgrad", 0.4, "the 4-D input gradients beside the recursion over conv3d"),
    ("conv4d", "conv_wgrad", 0.3, "the 4-D weight gradients beside the recursion over conv3d"),
]

PLAN = [
    # the timers, then what the device gets untuned and after a fresh tune, then the ladders
    Task("floor", "{python} -m helpers.timer_floor --device {device}", names.timer_floor("{slug}"), 0.3,
         "chapter 14 and README: the floor of each timer", True),
    _bench("untuned-resnet50", f"--layers resnet50 --stages {UNTUNED} --tag untuned", 2.7,
           "chapter 10: a GPU nobody tuned for (the registry's defaults), never slower than the naive stage",
           True, UNTUNED_ENV),
    _bench("untuned-edge", f"--layers edge --stages {UNTUNED} --tag untuned", 0.5,
           "chapter 10: the same at batch 1 and 8", True, UNTUNED_ENV),
    Task("tune-fresh", FRESH_ENV + "{python} -m helpers.tune --device {device} --budget 10", names.tune_fresh("{slug}"),
         10.5, "README and chapter 10: what ./course tune finds in its ten minutes (longer than one device call: "
               "interrupt it and run it again, it resumes)", True),
    _bench("auto-fresh-resnet50", "--layers resnet50 --stages auto --tag fresh", 2.4,
           "chapter 10: auto after a fresh tune, beside cuDNN on ResNet-50 (at least x1.0 on every layer)",
           True, FRESH_ENV),
    _bench("auto-fresh-vgg16", "--layers vgg16 --stages auto --tag fresh", 8.2, "chapter 10: the same on VGG-16",
           True, FRESH_ENV),
    _bench("ladder-resnet50", f"--layers resnet50 --stages {DGRAD_LADDER} --tune", 4,
           "chapters 02-08 and 12, README's headline (the baseline of chapters 09-10: stage 08)", True),
    # chapters 09-10: tiles searched, then the ladder 02-10 and the final stages beside stage 08
    _bench("tune-local", "--layers resnet50 --stages local_tile,register_block,prefetch,transposed,padded,swizzle "
           "--tune --no-vendor --repeats 8 --out results/local/run2_tune_conv_dgrad_resnet50_09_10_{slug}.json", 1.7,
           "chapters 09-10: the tiles for the device", True),
    _bench("tune-hoisted", "--layers resnet50 --stages hoisted --tune --no-vendor --repeats 8 "
           "--out results/local/run4_tune_conv_dgrad_resnet50_10_hoisted_{slug}.json", 0.4,
           "chapter 10: stage 10_hoisted's tile", True),
    _bench("local-resnet50", f"--layers resnet50 --stages {LOCAL_STAGES} --repeats 12 "
           "--out results/local/run2_conv_dgrad_resnet50_02_10_{slug}.json", 0.5, "chapters 09-10: the ladder 02-10",
           True),
    _bench("local-final-resnet50", "--layers resnet50 --stages naive,width,padded,hoisted "
           "--out results/local/run4_conv_dgrad_resnet50_{slug}.json", 0.4,
           "chapter 10's targets: 50 % of the FMA peak, x4 stage 08 on res64@56", True),
    # chapters 09-10's OpenCL stages and their CUDA twins at the same tiles (a twin takes its
    # OpenCL stage's tuned values), cuDNN beside them
    *(_bench(f"local-twins-{layers}", f"--layers {layers} --stages {LOCAL_TWINS} "
             f"--out results/local/run5_twins_conv_dgrad_{layers}_{{slug}}.json", minutes,
             "chapter 10: the OpenCL stages and their CUDA twins over each layer set", True)
      for layers, minutes in (("resnet50", 1.1), ("edge", 0.3), ("vgg16", 1.9))),
    # chapter 11: the course GEMM beside cuBLAS (and CLBlast where installed), the implicit GEMM, the chooser
    _bench("gemm", "--op gemm --layers gemm --tune", 1.5, "chapter 11: the course GEMM beside cuBLAS and CLBlast",
           True),
    _bench("tune-taps", "--layers resnet50 --stages igemm_taps --tune-only TM,TN,WM,WN --no-vendor --repeats 8 "
           "--tag taps_tuned", 0.7, "chapter 11: igemm_taps' tile for the device", True),
    _bench("tune-taps-split", "--layers edge --stages igemm_taps --tune-only SPLIT_TARGET --no-vendor --repeats 8 "
           "--tag taps_splitk_tuned", 0.5, "chapter 11: split-K for small batches", True),
    _bench("taps-resnet50", "--layers resnet50 --stages igemm_phases,igemm_taps,auto --tag taps", 2.5,
           "chapter 11: the implicit GEMM's share of the FMA peak; the chooser against its best candidate", True),
    _bench("taps-edge", "--layers edge --stages igemm_phases,igemm_taps,auto --tag taps", 0.5,
           "chapter 11: split-K at batch 1 and 8", True),
    _bench("taps-vgg16", "--layers vgg16 --stages igemm_phases,igemm_taps --tag taps", 0.6,
           "chapter 11: the tap order over VGG-16", True),
    # chapter 12a: Winograd F(4x4) searched, then the chooser against cuDNN on every set
    _bench("wino4-forward", "--op conv_forward --layers winograd6 --stages wino_blocked,wino4_blocked --tune --tag wino4",
           1.6, "chapter 12a: the forward pass on the six shapes", True),
    _bench("tune-wino4", "--layers resnet50 --stages winograd4 --tune-only TM,TN,TK,WM,WN,GEMM_LDS4,GEMM_PREFETCH "
           "--no-vendor --repeats 8 --tag wino4_tuned", 3.6, "chapter 12a: F(4x4)'s tiles for the input gradient", True),
    _bench("tune-wino4-wg", "--layers resnet50 --stages winograd4 --tune-only WG --no-vendor --repeats 8 "
           "--tag wino4_wg_tuned", 0.5, "chapter 12a: the work-group of F(4x4)'s transforms, at the tiles just searched",
           True),
    _bench("wino4-dgrad", "--layers vgg16 --stages winograd,winograd4 --tag wino4", 0.6,
           "chapter 12a: F(2x2) and F(4x4) beside cuDNN on VGG-16", True),
    *(_bench(f"channel-major{v}", f"--layers resnet50 --stages winograd4 --defines WINO_CHANNEL_MAJOR={v} "
             f"--tag channel_major{v}", 0.4, "chapter 12a: F(4x4)'s V and M layouts, a recorded pair", True)
      for v in (0, 1)),
    _bench("auto-resnet50", "--layers resnet50 --stages auto --tag auto", 2.5,
           "chapters 11 and 15, README: auto beside cuDNN on every ResNet-50 layer", True),
    _bench("auto-edge", "--layers edge --stages auto --tag auto", 0.6, "chapter 11: auto at batch 1 and 8", True),
    _bench("auto-vgg16", "--layers vgg16 --stages auto --tag auto", 8.5,
           "chapter 11, README: auto beside cuDNN on every VGG-16 layer (the longest search)", True),
    # chapter 14: batch norm
    _bench("bn-forward", f"--op batchnorm_forward --layers bn --stages {BN_LADDER} --tune", 2.1, "chapter 14's ladder", True),
    _bench("bn-backward", f"--op batchnorm_backward --layers bn --stages {BN_LADDER} --activation relu --tune", 3,
           "chapter 14's ladder"),
    _bench("bn-forward-onepass", "--op batchnorm_forward --layers bn --stages fused,one_pass --tag vendor_events", 0.5,
           "chapter 14: the forward against PyTorch, by both timers", True),
    _bench("bn-backward-onepass", "--op batchnorm_backward --layers bn --stages fused,one_pass --activation relu "
           "--tag vendor_events", 0.5, "chapter 14: the backward against PyTorch, by both timers", True),
    # chapter 13: the tensor-core stages (CUDA) against cuDNN in each precision; Hopper's steps 7 and 8
    _bench("tc-resnet50", f"--layers resnet50 --stages {TC_STAGES} --tune --tag tc", 4.6,
           "chapter 13: each precision against cuDNN in that precision", True),
    _bench("tune-wgmma", "--layers resnet50 --stages tc_tf32_wgmma,tc_fp16_wgmma,tc_bf16_wgmma --tune --tune-only "
           "STAGES --no-vendor --tag wgmma_tuned", 1, "chapter 13: step 7's ring for the device", True),
    _bench("tune-tma", "--layers resnet50 --stages tc_tf32_tma,tc_fp16_tma,tc_bf16_tma --tune --tune-only STAGES "
           "--no-vendor --tag tma_tuned", 1.2, "chapter 13: step 8's ring for the device", True),
    _bench("tma-resnet50", f"--layers resnet50 --stages {HOPPER} --tag tma", 1.1,
           "chapter 13: Hopper's steps on ResNet-50, against the best fp32 stage (sm_90 only)", True),
    _bench("tma-vgg16", f"--layers vgg16 --stages {HOPPER} --tag tma", 2,
           "chapter 13: Hopper's steps against the dense TF32 peak on VGG-16 (sm_90 only)", True),
    Task("tc-peak", "{python} -m helpers.tc_peak", names.wgmma_peak("{slug}"), 0.1,
         "chapter 13: the measured tensor-core rate (sm_90 only)", True),
    # the ladders of the other sets, the forward pass, the weight gradient, the training run
    _bench("ladder-vgg16", f"--layers vgg16 --stages {DGRAD_LADDER}", 1.6, "chapters 02-08, 12", True),
    _bench("ladder-edge", f"--layers edge --stages {DGRAD_LADDER}", 0.3, "chapters 02-08, 12", True),
    _bench("forward-winograd6", "--op conv_forward --layers winograd6 --stages direct,wino_naive,wino_tiles,wino_local,"
           "wino_transposed,wino_blocked --tune", 0.5, "chapter 12's ladder", True),
    _bench("forward-vgg16", "--op conv_forward --layers vgg16 --stages direct,wino_naive,wino_tiles,wino_local,"
           "wino_transposed,wino_blocked", 1.9, "chapter 12, README's forward row", True),
    # the forward pass's faster stages on ResNet-50's layers and the small-batch edge set, beside
    # cuDNN: what the chooser's model knows of them on layers like a learner's (not the zoo's own)
    *(_bench(f"forward-{layers}", f"--op conv_forward --layers {layers} --stages wino_blocked,wino4_blocked,im2col,"
             "igemm,igemm_nd", 1, "chapter 11b: auto's model of the forward stages, README's forward rows", True)
      for layers in ("resnet50", "edge")),
    _bench("wgrad-resnet50", "--op conv_wgrad --layers resnet50 --tune", 5.5, "chapter 15's ladder"),
    _bench("wgrad-phases-resnet50", "--op conv_wgrad --layers resnet50 --stages igemm,igemm_phases --tag phases", 1,
           "chapter 15: the strided layer's phase split (stage 05) beside stage 03 and cuDNN, at the tiles just searched"),
    _bench("tune-wgrad-blocked", "--op conv_wgrad --layers resnet50 --stages igemm_blocked --tune --no-vendor "
           "--repeats 8 --tag blocked_tuned", 2.1, "chapter 15: stage 06's tiles and slices for the device", True),
    _bench("wgrad-blocked-resnet50", "--op conv_wgrad --layers resnet50 --stages igemm,winograd,igemm_blocked "
           "--tag blocked", 0.9, "chapter 15: stage 06 beside stages 03, 04 and cuDNN, at the tiles just searched", True),
    _bench("wgrad-blocked-vgg16", "--op conv_wgrad --layers vgg16 --stages igemm,winograd,igemm_blocked "
           "--tag blocked", 3.1, "chapter 15: the same on VGG-16", True),
    # stage 04's transforms through local memory, recorded pairs: neither (the x patches on no
    # layer: LOAD_LOCAL_W=1 << 20), the output transform's stores alone (STORE_LOCAL), both (the x
    # patches on every layer: LOAD_LOCAL_W=1), all six in one call so that they share a machine
    *(_bench(f"wgrad-local{a}{b}-{layers}", f"--op conv_wgrad --layers {layers} --stages winograd "
             f"--defines LOAD_LOCAL_W={1 if a else 1 << 20},STORE_LOCAL={b} --tag local{a}{b}", minutes,
             "chapter 15: stage 04's x patches and taps through local memory, a recorded step", True)
      for layers, minutes in (("resnet50", 0.3), ("vgg16", 0.6)) for a, b in ((0, 0), (0, 1), (1, 1))),
    Task("training", "{python} -m helpers.train --device {device} --size full --out results/" + names.training("{slug}"),
         names.training("{slug}"), 0.6, "chapter 15: the network trained on the course's stages, its step against "
                                         "PyTorch's (at most x1.0)"),
    Task("training-resnet-stage", "{python} -m helpers.train --network resnet_stage --device {device} --size full "
         "--out results/" + names.training("{slug}", "resnet_stage"), names.training("{slug}", "resnet_stage"), 6,
         "chapter 15: a kernel-dominated step (five 3x3 conv + batch norm + ReLU blocks of a ResNet stage, batch 64) "
         "against PyTorch's (at most x0.9); the chooser times every stage of each layer first"),
    Task("training-torch-resnet", "{python} -m helpers.train --network torch_resnet --device {device} --size full "
         "--out results/" + names.training("{slug}", "torch_resnet"), names.training("{slug}", "torch_resnet"), 2,
         "chapter 15's deep dive 15c: a small ResNet of helpers.torch's modules (the course's stages, OpenCL through the host) "
         "trained beside the same ResNet on cuDNN: loss curves and step times"),
    # chapter 16: the convolutions of any shape, each set beside PyTorch's own convolution (on 4-D,
    # the recursion over conv3d)
    *(_bench(f"anyshape-{layers}-{op}", f"--op {op} --layers {layers} --stages {ANY_SHAPE_STAGES[op]}"
             + (DEPTHWISE_STAGES if layers.endswith("_dw") and op != "conv_forward" else ""), minutes,
             f"chapter 16: {why}")
      for layers, op, minutes, why in ANY_SHAPE_TASKS),
    # register counts (NVIDIA's compiler; other drivers report none and the command writes nothing)
    *(Task(f"registers-{table.replace('_', '-') if table != 'conv_dgrad' else 'direct'}",
           "{python} -m helpers.registers" + (f" --table {table}" if table != "conv_dgrad" else "") + " --device {device}",
           names.registers(table, "{slug}"), minutes, why, measured)
      for table, minutes, why, measured in (
          ("conv_dgrad", 1, "chapter 07: stages 07-08's registers and spills", False),
          ("one_pass", 0.5, "chapter 14: batch norm's one-pass kernel", False),
          ("local", 0.3, "chapter 10: the OpenCL stages' registers beside their CUDA twins'", True),
          ("split_k", 0.2, "chapter 11: the phase split's registers per SPLITS", True))),
    # the GPU's own test runs: every stage checked on it, guards included
    _tests("tests-winograd", "winograd", " ".join(TESTS_WINOGRAD), 0.7, "the Winograd stages' tests on the device", True),
    _tests("tests-gemm", "gemm", " ".join(TESTS_GEMM), 0.8, "chapter 11's tests on the device", True),
    _tests("tests-cuda", "tc", " ".join(TESTS_CUDA), 2.9, "the CUDA stages' tests on the device", True),
    # every other test file that can touch a device (the direct, local-memory, batch norm and
    # weight-gradient grids, the boundaries, the tuning candidates, the exercises' checkers, ...)
    _tests("tests-others", "engine", "tests " + " ".join(f"--ignore={f}" for f in TESTS_WINOGRAD + TESTS_GEMM + TESTS_CUDA
                                                       + TESTS_NOTEBOOK_ONLY), 9, "the rest of the test suite on the device", True),
    *(_notebooks(part, minutes) for part, minutes in enumerate((3, 3, 4, 4), 1)),
    # the forward implicit GEMM's tile, its two copy switches, then its split-K, searched on ResNet-50's
    # bottleneck 1x1 layers (none in the zoo, which stays a set nobody tuned for): before the zoo's
    # runs, which take the tuned values
    _bench("tune-igemm-fwd", "--op conv_forward --layers bottleneck --stages igemm --tune-only "
           "TM,TN,WM,WN,GEMM_LDS4,GEMM_PREFETCH --no-vendor --repeats 8 --tag igemm_tuned", 3,
           "chapter 11b: 11_igemm's tile for the device, on 1x1 layers", True),
    _bench("tune-igemm-fwd-split", "--op conv_forward --layers bottleneck --stages igemm --tune-only SPLIT_TARGET "
           "--no-vendor --repeats 8 --tag split_tuned", 0.5,
           "chapter 11b: 11_igemm's split-K for the device, on 1x1 layers", True),
    # the input gradient's stages that no untagged run had timed on the H200 (chapters 09-10's were
    # recorded only beside a switch's other setting), on ResNet-50 and the small-batch edge set: a
    # stage the model has no run of is timed blind, and the zoo's batch-1 layer ran 10_swizzle so
    *(_bench(f"model-dgrad-{layers}", f"--op conv_dgrad --layers {layers} --stages local_tile,register_block,prefetch,"
             "transposed,padded,swizzle,hoisted,igemm_analytic,igemm_delta,igemm_nhwc --no-vendor --tag model", 1,
             "chapter 11b: auto's model of the input gradient's direct and implicit-GEMM stages", True)
      for layers in ("resnet50", "edge")),
    # 16_igemm_nd's tile and copy switches, per op, on Inception-v3's factorized layers (not the zoo's)
    *(_bench(f"tune-igemm-nd-{op}", f"--op {op} --layers asymmetric --stages igemm_nd --tune-only "
             "TN,WM,WN,GEMM_LDS4,GEMM_PREFETCH --no-vendor --repeats 8 --tag nd_tuned", 1.5,
             "chapter 16: 16_igemm_nd's tile for the device, on 1x7/7x1 and 1x3/3x1 layers", True)
      for op in ZOO_OPS),
    # the 1x1 layers' stages of each convolution beside cuDNN: what the chooser's model knows of 1x1
    # layers (the zoo's own runs are never read)
    *(_bench(f"bottleneck-{op}", f"--op {op} --layers bottleneck --stages {stages}", 1,
             "chapter 11b: auto's model of the 1x1 layers", True)
      for op, stages in (("conv_forward", "im2col,igemm,igemm_nd"),
                         ("conv_dgrad", "hoisted,igemm_analytic,igemm_taps,igemm_nd"),
                         ("conv_wgrad", "igemm_blocked,igemm_nd"))),
    # the same for the factorized layers, and the input gradient's for the stems (three input
    # channels: a product with three rows, where the implicit GEMMs' tiles are mostly empty)
    *(_bench(f"{layers}-{op}", f"--op {op} --layers {layers} --stages {stages}", 1,
             f"chapter 11b: auto's model of the {why}", True)
      for layers, why, ops in (("asymmetric", "1x7/7x1 and 1x3/3x1 layers", ZOO_OPS),
                               ("stems", "first layers", ("conv_dgrad",)))
      for op, stages in (("conv_forward", "im2col,igemm,igemm_nd,any_shape"),
                         ("conv_dgrad", "igemm_analytic,igemm_phases,igemm_taps,gemm_col2im,igemm_nd,any_shape"),
                         ("conv_wgrad", "igemm,igemm_phases,igemm_blocked,igemm_nd,any_shape")) if op in ops),
    # the weight gradient's fill (SPLIT_TARGET: slices shortened where a launch has few work-groups)
    # for the three stages that have it, searched on the small-batch edge set (not the zoo, which
    # stays a set nobody tuned for): before the zoo's runs, which take the tuned values
    _bench("tune-wgrad-fill", "--op conv_wgrad --layers edge --stages winograd,igemm_blocked,igemm_nd "
           "--tune-only SPLIT_TARGET --no-vendor --repeats 8 --tag fill_tuned", 1.5,
           "chapter 15: the weight gradient's SPLIT_TARGET for the device (stages 04, 06, 16_igemm_nd)", True),
    # the chooser's model learns the zoo's kinds of layer (1x1, 5x5, 1x7, batch 1): every stage auto
    # chooses among, each timed on every zoo layer at its tuned values (the model's ranking reads
    # these, so they come before the auto runs), in parts of a few stages that fit a device call
    *(_bench(f"zoo-stages-{op}-{part}", f"--op {op} --layers zoo --stages {','.join(stages)} --tag stages_{part}",
             len(stages), "chapter 11b and the chooser's model (tests/test_chooser_model.py): each candidate stage "
             "on the zoo's layers")
      for op in ZOO_OPS for part, stages in zoo_parts(op)),
    # chapter 11b and issue targets: auto on real layers nobody tuned for, beside cuDNN, each row's
    # first call (the model's ranking, builds, timings) in seconds, from an empty choice cache
    *(_bench(f"zoo-{op}", f"--op {op} --layers zoo --stages auto", 3,
             "chapter 11b: auto on the zoo's real layers beside cuDNN, with each layer's first-call seconds",
             env=f"rm -f .cache/choices_zoo_{op}_{{slug}}.json; COURSE_CHOICES=.cache/choices_zoo_{op}_{{slug}}.json ")
      for op in ZOO_OPS),
]


def slug_of(device: str) -> str:
    """The device's name as the result files spell it (analysis/names.py)."""
    from .engine.devices import device_info, get_context
    return names.slug(device_info(get_context(device))["name"])


def get_task(name: str, plan=None) -> Task:
    plan = PLAN if plan is None else plan
    for t in plan:
        if t.name == name:
            return t
    raise ValueError(f"no task {name!r} in the recording plan; the tasks are {', '.join(t.name for t in plan)}")


def recorded(task: Task, slug: str) -> bool:
    return (RESULTS / task.writes.format(slug=slug)).is_file()


def log_path(slug: str) -> Path:
    return RESULTS / names.record_log(slug)


def left_out(slug: str) -> set:
    """Tasks whose last run on the device failed or wrote nothing (a CUDA task, or a register
    count, on another vendor's GPU, say)."""
    path = log_path(slug)
    last = {e["task"]: e for e in json.loads(path.read_text())} if path.is_file() else {}
    return {name for name, e in last.items() if e["exit"] or not e.get("wrote")}


def pending(slug: str, budget: float, plan=PLAN) -> list[Task]:
    """The tasks not yet recorded for the device, in the plan's order, as many as fit the budget
    (minutes, by the plan's estimates); the first pending task always, even if it alone is longer.
    A task that failed or wrote nothing on the device last time is left for ``--run``."""
    out, used, skip = [], 0.0, left_out(slug)
    for t in plan:
        if recorded(t, slug) or t.name in skip:
            continue
        if out and used + t.minutes > budget:
            break
        out.append(t)
        used += t.minutes
    return out


def command(task: Task, device: str, slug: str, python: str = sys.executable) -> str:
    return task.command.format(device=shlex.quote(device), slug=slug, python=shlex.quote(python))


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def blas_threads(cmd: str, lanes: int = 1, cores: int | None = None) -> int:
    """The threads each process of a task gets for NumPy's BLAS (the float64 references): the
    machine's cores shared among its lanes and the task's pytest workers (-n N). Left to itself each
    process starts a thread per core, and processes that together start many more threads than there
    are cores make every reference slower (4 processes on 2 cores: 32 s each, against 9 s with one
    thread each)."""
    workers = re.search(r"(?:^|\s)-n (\d+)", cmd)
    return max(1, (cores or os.cpu_count() or 1) // (lanes * (int(workers[1]) if workers else 1)))


_LOG_LOCK = threading.Lock()      # lanes append to one log


def without_paths(text: str) -> str:
    """A log as the repository keeps it: this checkout's folder dropped from paths (they become
    relative), and the Python installation's and any PYTHONPATH folder's written as <python>."""
    places = {str(ROOT) + os.sep: ""}
    for prefix in {sys.prefix, sys.base_prefix, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))}:
        if prefix and os.path.isabs(prefix) and prefix.rstrip(os.sep) != str(ROOT):
            places[prefix.rstrip(os.sep)] = "<python>"
    for old in sorted(places, key=len, reverse=True):
        text = text.replace(old, places[old])
    return text.replace(str(ROOT), ".")


def run_task(task: Task, device: str, slug: str, log: Path | None = None, gpu: int | None = None,
             stop: threading.Event | None = None, lanes: int = 1) -> int:
    """Run one task from the repository root; append its command, exit status and wall time to
    ``log`` (default results/record_<slug>.json). ``gpu``: the GPU of the lane it runs in
    (CUDA_VISIBLE_DEVICES; NVIDIA's OpenCL and CUDA both honour it). Ctrl-C, or a time limit's
    SIGINT, reaches the task too: it is given a minute to write its summary (pytest -v's verdicts so
    far), its entry is logged as interrupted, and KeyboardInterrupt goes on up. In a lane (a thread,
    which never sees the KeyboardInterrupt) ``stop`` says the run was interrupted. Each process's
    BLAS threads are its share of the cores (blas_threads) unless the caller set them."""
    cmd = command(task, device, slug)
    lane = "" if gpu is None else f" (GPU {gpu})"
    threads = str(blas_threads(cmd, lanes))
    env = {**{name: threads for name in BLAS_THREADS}, **os.environ,
           **({} if gpu is None else {"CUDA_VISIBLE_DEVICES": str(gpu)})}
    (RESULTS / task.writes.format(slug=slug)).parent.mkdir(parents=True, exist_ok=True)
    print(f"[record] {task.name}{lane}: {cmd}", flush=True)
    start = time.perf_counter()
    # Ctrl-C, or a time limit's SIGINT, reaches the task too: let it write its summary. One that comes
    # while the task is being started is noted, not raised, so the task is always waited for.
    caught, main = [], threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGINT, lambda *_: caught.append(True)) if main else None
    try:
        proc = subprocess.Popen(["bash", "-o", "pipefail", "-c", cmd], cwd=ROOT, env=env)
    finally:
        if main:
            signal.signal(signal.SIGINT, before)
    interrupted = bool(caught)
    if not interrupted:
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            interrupted = True
    if interrupted:
        try:
            rc = proc.wait(timeout=60)
        except (KeyboardInterrupt, subprocess.TimeoutExpired):
            proc.kill()
            rc = proc.wait()
    interrupted = interrupted or (stop is not None and stop.is_set())
    minutes = (time.perf_counter() - start) / 60
    print(f"[record] {task.name}{lane}: {'interrupted, ' if interrupted else ''}exit {rc} after {minutes:.1f} min",
          flush=True)
    written = RESULTS / task.writes.format(slug=slug)
    if written.suffix == ".log" and written.is_file():     # the log is kept in results/: no machine's paths in it
        written.write_text(without_paths(written.read_text(errors="replace")))
    log = log or log_path(slug)
    with _LOG_LOCK:
        entries = json.loads(log.read_text()) if log.is_file() else []
        entries.append({"task": task.name, "command": cmd.replace(sys.executable, "python"), "exit": rc,
                        "minutes": round(minutes, 2), "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                        "wrote": task.writes.format(slug=slug) if rc == 0 and recorded(task, slug) else None,
                        **({"gpu": gpu} if gpu is not None else {}), **({"interrupted": True} if interrupted else {})})
        log.write_text(json.dumps(entries, indent=1) + "\n")
    if interrupted and stop is None:
        raise KeyboardInterrupt
    return rc


def lanes(tasks: list, count: int) -> list[list]:
    """The tasks dealt to ``count`` lanes of about equal minutes (the longest first, each to the
    lane with the fewest minutes so far), each lane keeping the plan's order."""
    out, load = [[] for _ in range(count)], [0.0] * count
    for t in sorted(tasks, key=lambda t: -t.minutes):
        i = load.index(min(load))
        out[i].append(t)
        load[i] += t.minutes
    return [sorted(lane, key=tasks.index) for lane in out]


def gpu_count() -> int:
    """The NVIDIA GPUs this process may use: CUDA_VISIBLE_DEVICES's list where it is set, else
    those nvidia-smi lists; 1 where neither says (a machine without nvidia-smi)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return max(1, len([g for g in visible.split(",") if g.strip()]))
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 1
    return max(1, sum(line.startswith("GPU ") for line in listed.splitlines()))


def run_lanes(tasks: list, device: str, slug: str, count: int, gpus: int | None = None) -> list[str]:
    """Run the tasks in ``count`` lanes side by side, one task after another in each; the names of
    the tasks that failed. Lane i runs on GPU i modulo ``gpus`` (default: gpu_count()): more lanes
    than GPUs share them, as two lanes share the one GPU of a single-GPU machine."""
    failed = []
    gpus = gpus or gpu_count()

    stop = threading.Event()        # Ctrl-C (it reaches the main thread; the tasks' processes get it too)

    def work(i: int, lane: list) -> None:
        for t in lane:
            if stop.is_set():
                return
            if run_task(t, device, slug, gpu=i % gpus, stop=stop, lanes=count):
                failed.append(t.name)
    threads = [threading.Thread(target=work, args=(i, lane)) for i, lane in enumerate(lanes(tasks, count))]
    for th in threads:
        th.start()
    try:
        for th in threads:
            th.join()
    except KeyboardInterrupt:
        stop.set()
        for th in threads:          # each lane's running task writes its summary and its log entry
            th.join()
        raise
    return failed


def listing(slug: str | None, plan=PLAN) -> str:
    width = max(len(t.name) for t in plan)
    lines = [f"{'task':<{width}} {'minutes':>7}  {'recorded' if slug else '':<9} what it is for"]
    for t in plan:
        mark = ("yes" if recorded(t, slug) else "-") if slug else ""
        lines.append(f"{t.name:<{width}} {('' if t.measured else '~') + format(t.minutes, 'g'):>7}  {mark:<9} {t.why}")
    total = sum(t.minutes for t in plan)
    left = sum(t.minutes for t in plan if slug and not recorded(t, slug))
    lines.append(f"about {total:g} minutes in all" + (f"; about {left:g} not yet recorded for {slug}" if slug else "")
                 + " (H200 wall times; ~: an estimate, the others measured)")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.record", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="the GPU to record ('nvidia', or part of its name)")
    ap.add_argument("--list", action="store_true", help="print the plan (with --device: what is recorded)")
    ap.add_argument("--budget", type=float, default=None, help="minutes: run the next tasks not yet recorded")
    ap.add_argument("--run", default=None, help="comma-separated task names, run in the plan's order")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    ap.add_argument("--lanes", type=int, default=1, help="run the tasks side by side in this many lanes, lane i on "
                                                         "GPU i (CUDA_VISIBLE_DEVICES), modulo the GPUs there are")
    a = ap.parse_args(argv)
    try:
        chosen = [get_task(n.strip()) for n in a.run.split(",")] if a.run else None
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.lanes < 1:
        print(f"error: --lanes {a.lanes}: one lane per GPU, 1 or more", file=sys.stderr)
        return 2
    if a.budget is not None and not a.budget > 0:
        print(f"error: --budget {a.budget:g}: the minutes to spend on tasks, more than 0 (e.g. --budget 9)",
              file=sys.stderr)
        return 2
    if not a.device and not (a.list or (a.budget is None and chosen is None)):
        print("error: name the device to record (--device nvidia, or part of its name)", file=sys.stderr)
        return 2
    from .engine.devices import NoDeviceError
    try:
        slug = slug_of(a.device) if a.device else None
    except NoDeviceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.list or (a.budget is None and chosen is None):
        print(listing(slug))
        return 0
    tasks = [t for t in PLAN if t in chosen] if chosen else pending(slug, a.budget)
    skipped = [] if chosen else sorted(left_out(slug) - {t.name for t in PLAN if recorded(t, slug)})
    if skipped:
        print(f"left out, as they failed or wrote nothing here last time (run one again by --run NAME): "
              f"{', '.join(skipped)}")
    if not tasks:
        print(f"every task of the plan is recorded for {slug}" + (" or left out" if skipped else ""))
        return 0
    failed = []
    if a.dry_run:
        for i, lane in enumerate(lanes(tasks, a.lanes)):
            gpu = f"# GPU {i % gpu_count()}: " if a.lanes > 1 else ""
            print("\n".join(gpu + command(t, a.device, slug) for t in lane))
    else:
        try:
            failed = (run_lanes(tasks, a.device, slug, a.lanes) if a.lanes > 1
                      else [t.name for t in tasks if run_task(t, a.device, slug)])
        except KeyboardInterrupt:
            print(f"interrupted: the tasks that ran are logged in results/record_{slug}.json, the one cut short "
                  f"marked \"interrupted\"; run the rest again by --run", file=sys.stderr)
            return 130
    if failed:
        print(f"failed: {', '.join(failed)} (see the output above; results/record_{slug}.json logs each task)",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
