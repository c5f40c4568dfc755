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
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .analysis.results import RESULTS
from .stages import LOCAL_TWINNED

ROOT = RESULTS.parent


@dataclass(frozen=True)
class Task:
    name: str
    command: str      # run by bash from the repository root; {device}, {slug} and {python} filled in
    writes: str       # the file it writes, relative to results/, with {slug}
    minutes: float    # wall time on the H200: measured where ``measured``, else a rough estimate
    why: str          # what reads it
    measured: bool = False


def _bench(args: str, writes: str, minutes: float, why: str, name: str, measured: bool = False, env: str = "") -> Task:
    return Task(name, env + "{python} -m helpers.bench --device {device} " + args, writes, minutes, why, measured)


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
FRESH_ENV = ("COURSE_TUNED=fresh COURSE_TUNE_CACHE=results/tune/tune_fresh_{slug}.json "
             "COURSE_CHOICES=.cache/choices_fresh_{slug}.json ")
GPU_TESTS = "COURSE_TEST_DEVICES={device} {python} -m pytest -q -p no:cacheprovider -p no:benchmark -n 8"
# the suite split into four device runs of a few minutes each; tests-others takes every other file
TESTS_WINOGRAD = ["tests/test_conv_forward.py", "tests/test_winograd.py"]
TESTS_GEMM = ["tests/test_conv_gemm.py", "tests/test_gemm.py", "tests/test_chooser.py"]
TESTS_CUDA = ["tests/test_cuda.py", "tests/test_cuda_plans.py"]
# the notebooks' own checks: no device in them, and they need nbformat, which a bare GPU machine lacks
TESTS_NOTEBOOK_ONLY = ["tests/test_editions.py", "tests/test_prose_numbers.py"]

PLAN = [
    # the timers, then the direct ladder (chapters 02-08) with its search: every later comparison starts here
    Task("floor", "{python} -m helpers.floor --device {device}", "engine/timer_floor_{slug}.json", 0.3,
         "chapter 14 and README: the floor of each timer", True),
    # what a device nobody tuned for gets (the registry's defaults; chapter 10), before any search
    _bench(f"--layers resnet50 --stages {UNTUNED} --tag untuned", "conv_dgrad_resnet50_untuned_{slug}.json", 2.7,
           "issue 9: the defaults never slower than naive", "untuned-resnet50", True, UNTUNED_ENV),
    _bench(f"--layers edge --stages {UNTUNED} --tag untuned", "conv_dgrad_edge_untuned_{slug}.json", 0.5,
           "issue 9: the same at batch 1 and 8", "untuned-edge", True, UNTUNED_ENV),
    Task("tune-fresh", FRESH_ENV + "{python} -m helpers.tune --device {device} --budget 10", "tune/tune_fresh_{slug}.json",
         10.5, "README and chapter 10: what ./course tune finds in its ten minutes (longer than one device call: "
               "interrupt it and run it again, it resumes)"),
    _bench("--layers resnet50 --stages auto --tag fresh", "conv_dgrad_resnet50_fresh_{slug}.json", 2.5,
           "chapter 10: auto after a fresh tune, beside cuDNN on ResNet-50 (at least x1.0 on every layer)",
           "auto-fresh-resnet50", False, FRESH_ENV),
    _bench("--layers vgg16 --stages auto --tag fresh", "conv_dgrad_vgg16_fresh_{slug}.json", 8.5,
           "chapter 10: the same on VGG-16", "auto-fresh-vgg16", False, FRESH_ENV),
    _bench(f"--layers resnet50 --stages {DGRAD_LADDER} --tune", "conv_dgrad_resnet50_{slug}.json", 4,
           "chapters 02-08 and 12, README's headline (issue 9's baseline, stage 08)", "ladder-resnet50", True),
    # issue 9: chapters 09-10 (tiles searched, then the ladder 02-10 and the final stages beside stage 08)
    _bench("--layers resnet50 --stages local_tile,register_block,prefetch,transposed,padded,swizzle --tune --no-vendor "
           "--repeats 8 "
           "--out results/local/run2_tune_conv_dgrad_resnet50_09_10_{slug}.json",
           "local/run2_tune_conv_dgrad_resnet50_09_10_{slug}.json", 1.7, "issue 9: chapter 09-10 tiles for the device",
           "tune-local", True),
    _bench("--layers resnet50 --stages hoisted --tune --no-vendor --repeats 8 "
           "--out results/local/run4_tune_conv_dgrad_resnet50_10_hoisted_{slug}.json",
           "local/run4_tune_conv_dgrad_resnet50_10_hoisted_{slug}.json", 0.4, "issue 9: stage 10_hoisted's tile",
           "tune-hoisted", True),
    _bench(f"--layers resnet50 --stages {LOCAL_STAGES} --repeats 12 "
           "--out results/local/run2_conv_dgrad_resnet50_02_10_{slug}.json",
           "local/run2_conv_dgrad_resnet50_02_10_{slug}.json", 0.5, "chapters 09-10: the ladder 02-10", "local-resnet50",
           True),
    _bench("--layers resnet50 --stages naive,width,padded,hoisted "
           "--out results/local/run4_conv_dgrad_resnet50_{slug}.json", "local/run4_conv_dgrad_resnet50_{slug}.json", 0.4,
           "issue 9's targets: 50 % of the FMA peak, x4 stage 08 on res64@56", "local-final-resnet50", True),
    # chapters 09-10's OpenCL stages and their CUDA twins at the same tiles (a twin takes its
    # OpenCL stage's tuned values), cuDNN beside them
    *(_bench(f"--layers {layers} --stages {LOCAL_TWINS} "
             f"--out results/local/run5_twins_conv_dgrad_{layers}_{{slug}}.json",
             f"local/run5_twins_conv_dgrad_{layers}_{{slug}}.json", minutes,
             "issue 9: OpenCL and CUDA twins over each layer set (chapter 10)", f"local-twins-{layers}", True)
      for layers, minutes in (("resnet50", 1.1), ("edge", 0.3), ("vgg16", 1.9))),
    # issue 10: the course GEMM beside cuBLAS (and CLBlast where installed), the implicit GEMM, the chooser
    _bench("--op gemm --layers gemm --tune", "gemm_gemm_{slug}.json", 1.5,
           "issue 10: x0.7 cuBLAS, x0.8 CLBlast on 4096 (chapter 11)", "gemm", True),
    _bench("--layers resnet50 --stages igemm_taps --tune-only TM,TN,WM,WN --no-vendor --repeats 8 --tag taps_tuned",
           "conv_dgrad_resnet50_taps_tuned_{slug}.json", 0.7, "issue 10: igemm_taps' tile for the device", "tune-taps",
           True),
    _bench("--layers edge --stages igemm_taps --tune-only SPLIT_TARGET --no-vendor --repeats 8 --tag taps_splitk_tuned",
           "conv_dgrad_edge_taps_splitk_tuned_{slug}.json", 0.5, "issue 10: split-K for small batches", "tune-taps-split",
           True),
    _bench("--layers resnet50 --stages igemm_phases,igemm_taps,auto --tag taps", "conv_dgrad_resnet50_taps_{slug}.json",
           2.5, "issue 10: 55 % of the FMA peak; the chooser within 3 % (chapter 11)", "taps-resnet50", True),
    _bench("--layers edge --stages igemm_phases,igemm_taps,auto --tag taps", "conv_dgrad_edge_taps_{slug}.json",
           0.5, "issue 10: split-K at batch 1 and 8 (chapter 11)", "taps-edge", True),
    _bench("--layers vgg16 --stages igemm_phases,igemm_taps --tag taps", "conv_dgrad_vgg16_taps_{slug}.json",
           0.6, "chapter 11: the tap order over VGG-16", "taps-vgg16", True),
    # issue 11: Winograd F(4x4) searched, then the chooser against cuDNN on every set
    _bench("--op conv_forward --layers winograd6 --stages wino_blocked,wino4_blocked --tune --tag wino4",
           "conv_forward_winograd6_wino4_{slug}.json", 1.6, "issue 11: the forward pass on the six shapes (chapter 12a)",
           "wino4-forward", True),
    _bench("--layers resnet50 --stages winograd4 --tune-only TM,TN,TK,WM,WN,GEMM_LDS4,GEMM_PREFETCH --no-vendor "
           "--repeats 8 --tag wino4_tuned", "conv_dgrad_resnet50_wino4_tuned_{slug}.json", 3.6,
           "issue 11: Winograd F(4x4)'s tiles for the input gradient", "tune-wino4", True),
    _bench("--layers resnet50 --stages winograd4 --tune-only WG --no-vendor --repeats 8 --tag wino4_wg_tuned",
           "conv_dgrad_resnet50_wino4_wg_tuned_{slug}.json", 0.5,
           "issue 11: the work-group of F(4x4)'s transforms, at the tiles just searched", "tune-wino4-wg", True),
    _bench("--layers vgg16 --stages winograd,winograd4 --tag wino4", "conv_dgrad_vgg16_wino4_{slug}.json", 0.6,
           "issue 11: F(2x2) and F(4x4) beside cuDNN on VGG-16 (chapter 12a)", "wino4-dgrad", True),
    *(_bench(f"--layers resnet50 --stages winograd4 --defines WINO_CHANNEL_MAJOR={v} --tag channel_major{v}",
             f"conv_dgrad_resnet50_channel_major{v}_{{slug}}.json", 0.4,
             "issue 11: F(4x4)'s V and M layouts, a recorded pair (chapter 12a)", f"channel-major{v}", True)
      for v in (0, 1)),
    _bench("--layers resnet50 --stages auto --tag auto", "conv_dgrad_resnet50_auto_{slug}.json", 2.5,
           "issue 11: auto >= cuDNN on every ResNet-50 layer", "auto-resnet50", True),
    _bench("--layers edge --stages auto --tag auto", "conv_dgrad_edge_auto_{slug}.json", 0.6,
           "issue 11: auto >= 0.8x cuDNN on every edge layer", "auto-edge", True),
    _bench("--layers vgg16 --stages auto --tag auto", "conv_dgrad_vgg16_auto_{slug}.json", 8.5,
           "issue 11: auto >= cuDNN on every VGG-16 layer (the longest search)", "auto-vgg16", True),
    _bench("--op batchnorm_forward --layers bn --tune", "batchnorm_forward_bn_{slug}.json", 2.1,
           "chapter 14's ladder", "bn-forward", True),
    _bench("--op batchnorm_backward --layers bn --activation relu --tune", "batchnorm_backward_bn_relu_{slug}.json", 3,
           "chapter 14's ladder", "bn-backward"),
    _bench("--op batchnorm_forward --layers bn --stages fused,one_pass --tag vendor_events",
           "batchnorm_forward_bn_vendor_events_{slug}.json", 0.5,
           "issue 11: batch norm forward >= PyTorch, by both timers", "bn-forward-onepass", True),
    _bench("--op batchnorm_backward --layers bn --stages fused,one_pass --activation relu --tag vendor_events",
           "batchnorm_backward_bn_relu_vendor_events_{slug}.json", 0.5, "issue 11: batch norm backward >= PyTorch",
           "bn-backward-onepass", True),
    # issue 12: the tensor-core stages (CUDA) against cuDNN in each precision; Hopper's steps 7 and 8
    _bench(f"--layers resnet50 --stages {TC_STAGES} --tune --tag tc", "conv_dgrad_resnet50_tc_{slug}.json", 4.6,
           "issue 12: TF32 >= 0.6x cuDNN TF32, fp16 >= 0.5x cuDNN fp16 (chapter 13)", "tc-resnet50", True),
    _bench("--layers resnet50 --stages tc_tf32_wgmma,tc_fp16_wgmma,tc_bf16_wgmma --tune --tune-only STAGES --no-vendor "
           "--tag wgmma_tuned", "conv_dgrad_resnet50_wgmma_tuned_{slug}.json", 1, "issue 12: step 7's ring for the device",
           "tune-wgmma", True),
    _bench("--layers resnet50 --stages tc_tf32_tma,tc_fp16_tma,tc_bf16_tma --tune --tune-only STAGES --no-vendor "
           "--tag tma_tuned", "conv_dgrad_resnet50_tma_tuned_{slug}.json", 1.2, "issue 12: step 8's ring for the device",
           "tune-tma", True),
    _bench(f"--layers resnet50 --stages {HOPPER} --tag tma", "conv_dgrad_resnet50_tma_{slug}.json", 1.1,
           "issue 12: x3 the best fp32 on res64@56 (sm_90 only)", "tma-resnet50", True),
    _bench(f"--layers vgg16 --stages {HOPPER} --tag tma", "conv_dgrad_vgg16_tma_{slug}.json", 2,
           "issue 12: 60 % of the dense TF32 peak on VGG-16 (sm_90 only)", "tma-vgg16", True),
    Task("tc-peak", "{python} -m helpers.tc_peak", "tc/wgmma_peak_{slug}.json", 0.1,
         "chapter 13: the measured tensor-core rate (sm_90 only)", True),
    # the ladders of the other sets, the forward pass, the weight gradient, the training run
    _bench(f"--layers vgg16 --stages {DGRAD_LADDER}", "conv_dgrad_vgg16_{slug}.json", 1.6, "chapters 02-08, 12",
           "ladder-vgg16", True),
    _bench(f"--layers edge --stages {DGRAD_LADDER}", "conv_dgrad_edge_{slug}.json", 0.3, "chapters 02-08, 12",
           "ladder-edge", True),
    _bench("--op conv_forward --layers winograd6 --stages direct,wino_naive,wino_tiles,wino_local,wino_transposed,"
           "wino_blocked --tune", "conv_forward_winograd6_{slug}.json", 0.5, "chapter 12's ladder", "forward-winograd6",
           True),
    _bench("--op conv_forward --layers vgg16 --stages direct,wino_naive,wino_tiles,wino_local,wino_transposed,"
           "wino_blocked", "conv_forward_vgg16_{slug}.json", 1.9, "chapter 12, README's forward row", "forward-vgg16",
           True),
    _bench("--op conv_wgrad --layers resnet50 --tune", "conv_wgrad_resnet50_{slug}.json", 5.5, "chapter 15's ladder",
           "wgrad-resnet50"),
    Task("training", "{python} -m helpers.train --device {device} --size full --out results/training_{slug}.json",
         "training_{slug}.json", 0.6, "chapter 15: the network trained on the course's stages", True),
    # register counts (NVIDIA's compiler; other drivers report none and the command writes nothing)
    Task("registers-direct", "{python} -m helpers.registers --device {device}", "registers_conv_dgrad_{slug}.json", 1,
         "chapter 07: stages 07-08's registers and spills"),
    Task("registers-one-pass", "{python} -m helpers.registers --table one_pass --device {device}",
         "registers_one_pass_{slug}.json", 0.5, "chapter 14: batch norm's one-pass kernel"),
    Task("registers-local", "{python} -m helpers.registers --table local --device {device}",
         "registers_local_{slug}.json", 0.3, "chapter 10: the OpenCL stages' registers beside their CUDA twins'", True),
    Task("registers-split-k", "{python} -m helpers.registers --table split_k --device {device}",
         "registers_split_k_{slug}.json", 0.2, "chapter 11: the phase split's registers per SPLITS", True),
    # the GPU's own test runs: every stage checked on it, guards included
    Task("tests-winograd", GPU_TESTS + f" {' '.join(TESTS_WINOGRAD)} "
         "> results/winograd/pytest_{slug}.log 2>&1", "winograd/pytest_{slug}.log", 0.7,
         "the Winograd stages' tests on the device", True),
    Task("tests-gemm", GPU_TESTS + f" {' '.join(TESTS_GEMM)} "
         "> results/gemm/pytest_{slug}.log 2>&1", "gemm/pytest_{slug}.log", 0.8, "chapter 11's tests on the device", True),
    Task("tests-cuda", GPU_TESTS + f" {' '.join(TESTS_CUDA)} "
         "> results/tc/pytest_{slug}.log 2>&1", "tc/pytest_{slug}.log", 2.9, "the CUDA stages' tests on the device", True),
    # every other test file that can touch a device (the direct, local-memory, batch norm and
    # weight-gradient grids, the boundaries, the tuning candidates, the exercises' checkers, ...)
    Task("tests-others", GPU_TESTS + " tests "
         + " ".join(f"--ignore={f}" for f in TESTS_WINOGRAD + TESTS_GEMM + TESTS_CUDA + TESTS_NOTEBOOK_ONLY)
         + " > results/engine/pytest_{slug}.log 2>&1", "engine/pytest_{slug}.log", 5,
         "the rest of the test suite on the device"),
]


def slug_of(device: str) -> str:
    """The device's name as the result files spell it (the benchmark's naming)."""
    from .bench import slug
    from .engine.devices import device_info, get_context
    return slug(device_info(get_context(device))["name"])


def get_task(name: str, plan=PLAN) -> Task:
    for t in plan:
        if t.name == name:
            return t
    raise ValueError(f"no task {name!r} in the recording plan; the tasks are {', '.join(t.name for t in plan)}")


def recorded(task: Task, slug: str) -> bool:
    return (RESULTS / task.writes.format(slug=slug)).is_file()


def log_path(slug: str) -> Path:
    return RESULTS / f"record_{slug}.json"


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


def run_task(task: Task, device: str, slug: str, log: Path | None = None) -> int:
    """Run one task from the repository root; append its command, exit status and wall time to
    ``log`` (default results/record_<slug>.json)."""
    cmd = command(task, device, slug)
    (RESULTS / task.writes.format(slug=slug)).parent.mkdir(parents=True, exist_ok=True)
    print(f"[record] {task.name}: {cmd}", flush=True)
    start = time.perf_counter()
    rc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=ROOT).returncode
    minutes = (time.perf_counter() - start) / 60
    print(f"[record] {task.name}: exit {rc} after {minutes:.1f} min", flush=True)
    log = log or log_path(slug)
    entries = json.loads(log.read_text()) if log.is_file() else []
    entries.append({"task": task.name, "command": cmd.replace(sys.executable, "python"), "exit": rc,
                    "minutes": round(minutes, 2), "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                    "wrote": task.writes.format(slug=slug) if rc == 0 and recorded(task, slug) else None})
    log.write_text(json.dumps(entries, indent=1) + "\n")
    return rc


def listing(slug: str | None, plan=PLAN) -> str:
    lines = [f"{'task':<22} {'minutes':>7}  {'recorded' if slug else '':<9} what it is for"]
    for t in plan:
        mark = ("yes" if recorded(t, slug) else "-") if slug else ""
        lines.append(f"{t.name:<22} {('' if t.measured else '~') + format(t.minutes, 'g'):>7}  {mark:<9} {t.why}")
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
    a = ap.parse_args(argv)
    try:
        chosen = [get_task(n.strip()) for n in a.run.split(",")] if a.run else None
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
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
    for t in tasks:
        if a.dry_run:
            print(command(t, a.device, slug))
        elif run_task(t, a.device, slug):
            failed.append(t.name)
    if failed:
        print(f"failed: {', '.join(failed)} (see the output above; results/record_{slug}.json logs each task)",
              file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
