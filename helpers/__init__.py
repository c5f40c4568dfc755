"""The course's helpers: every notebook, test and benchmark imports from here.

Where things live:
    devices.py    choosing an OpenCL device (never prompts), device facts
    build.py      building kernels/ with -D JIT parameters, build errors with source lines
    stages.py     the one registry of stages (REGISTRY), stage_names, get_stage
    ops/          each operation's argument checks, reference and tolerance
    runner.py     run_stage / plan_stage: the one way to run a stage (guard regions for tests)
    reference.py  NumPy references (conv forward, input and weight gradients, activations)
    check.py      the one checker (tolerance scaled by magnitude, prints mismatches, raises)
    timing.py     the one benchmark helper (profiling events, warm-up, median and spread)
    peak.py       measured copy bandwidth and FMA rate of a device (the roofline)
    layers.py     named layer sets (resnet50, vgg16, edge, ci)
    bench.py      `python -m helpers.bench`: stages x layers on a device, JSON into results/
    results.py    reading recorded results
    plots.py      the speed-up ladder and the roofline
    pictures*.py  pictures of memory accesses (pictures_direct: chapters 03-05, pictures_combining:
                  06-08, pictures_gemm: 11, pictures_winograd: 12, pictures_batchnorm: 14)
    direct.py     models of the direct kernels' checks and loads (chapters 03-05)
    combining.py  generated unrolled code and launch geometry of stages 07-08, register counts
    registers.py  `python -m helpers.registers`: NVIDIA's register/spill counts into results/
    winograd.py   Winograd transforms derived by Toom-Cook, checked exactly
    gemm.py       launch geometry and requirements of the GEMM family (chapter 11: op gemm,
                  implicit GEMM, phase split, delta tables, im2col/col2im, NHWC, vol2col)
    chooser.py    stage auto: time the registered stages once per device and shape, cache, run
    vendor*.py    cuDNN / PyTorch reference timings where PyTorch with CUDA is installed
    tuning.py     per-device JIT parameters recorded by the benchmark (results/tuned.json)
    notebook.py   what every chapter's first cell calls; kernel source and diff display
    execute.py    `python -m helpers.execute`: re-run notebooks in place
    exercises.py  checks for the chapters' exercises
"""
from .build import KernelBuildError, build, kernel, kernel_source
from .check import CheckResult, MismatchError, check_close
from .devices import NoDeviceError, device_info, get_context, get_queue, list_devices, short_name
from .runner import GuardViolation, plan_stage, prepare, run_stage
from .stages import REGISTRY, get_stage, stage_names

__all__ = [
    "REGISTRY", "CheckResult", "GuardViolation", "KernelBuildError", "MismatchError", "NoDeviceError",
    "build", "check_close", "check_stage", "device_info", "get_context", "get_queue", "get_stage",
    "kernel", "kernel_source", "list_devices", "plan_stage", "prepare", "run_stage", "short_name",
    "stage_names",
]


def check_stage(op: str, stage, *, ctx=None, defines=None, guard=False, **kwargs) -> CheckResult:
    """Run a stage and check every output against the NumPy reference; raises on a mismatch."""
    plan = plan_stage(op, stage, ctx=ctx, defines=defines, guard=guard, **kwargs)
    plan.enqueue()
    plan.queue.finish()
    if guard:
        plan.check_guards()
    return check_outputs(plan)


def check_outputs(plan) -> CheckResult:
    """Compare a plan's current outputs with its operation's reference (the last check returned)."""
    from .ops import op_module
    mod = op_module(plan.op)
    expected, magnitude = mod.reference(plan.problem)
    got = plan.outputs()
    results = [check_close(got[name], expected[name], magnitude=magnitude[name],
                           rtol=mod.rtol(plan.problem), name=name) for name in plan.problem.outputs]
    names = " and ".join(plan.problem.outputs)
    return CheckResult(f"{plan.stage.key} {names}", sum(r.count for r in results),
                       max(r.max_error for r in results), max(r.worst_ratio for r in results))
