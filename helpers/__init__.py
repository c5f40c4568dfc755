"""The course's helpers: every notebook, test and benchmark imports from here.

Layers, each importing only from itself and the ones above it, in the order of ``LAYERS`` below
(the one statement of it: tests/test_layout.py checks every import against it, and this list):
    engine/     kernels (kernel files, their -D options), devices (choosing an OpenCL device), build
                (OpenCL programs, build errors with source lines), check (the one checker), timing
                (profiling events, median, spread), tensor (device tensors: dtype, shape, layout,
                guards), fragments (the mma.sync and ldmatrix fragment layouts: one model), plan
                (what a plan is on either backend), backends/ (opencl.py: DeviceTensor, ClPlan;
                cuda.py: CudaTensor, CudaPlan; nvrtc.py: PTX; emulated.py: CUDA kernels built with
                g++ and run on the CPU, for the tests; plan_class: a stage's backend to its plan class)
    ops/        each operation's argument checks (Problem), NumPy references, layer sets,
                vendor (cuDNN / PyTorch) and vendor_clblast (CLBlast SGEMM) timings
    launch/     one launcher per kernel family (direct, local, winograd, batchnorm, wgrad, gemm,
                tensor_cores): grids, multi-kernel steps and workspaces; unrolled.py generates the
                3x3 block of stages 07-08; local.py: the tiles of stages 09-10 (geometry, constraints)
    stages/     the one registry of stages, data only, one module per operation, validated when
                it loads (REGISTRY, stage_names, get_stage)
    tuned_values.py  the JIT parameters tuned per device that a stage builds with (results/tuned.json, a
                user's own search), inherited by vendor and architecture; chooser_model.py: the
                candidates ranked by their recorded speed on the nearest layer; chooser.py: stage auto
                (rank, time the best few once per device and shape, cache, run)
    runner.py   run_stage / plan_stage (plan_problem: for a prepared Problem): the one way to run a stage
                (guard regions for tests); emulated_stage.py: a CUDA stage's plan run on the CPU by
                engine/backends/emulated.py's emulator, and checked (tests)
    analysis/   reading recorded results, summaries, the ladder and roofline plots, compare (the
                best course stage per op, layer and GPU against the vendor), pairs (a recorded
                switch off and on; two stages of one run beside the vendor) (no OpenCL)
    peak.py     the measured roofline (copy bandwidth, FMA rate)
    tuning_trials.py  tuning candidates checked, then timed (Trial, search: bench --tune, ./course tune)
    bench.py    `python -m helpers.bench`: stages x layers on a device, JSON into results/
    tune.py     `./course tune`: a search of the stages' JIT parameters on this device, within a budget
    registers.py, timer_floor.py  NVIDIA register counts (chapters 07, 14); what each timer says of
                            an empty kernel, the floor under every recorded time (chapter 14)
    profile_stage.py        `python -m helpers.profile_stage`: one stage once on one layer (ncu)
    ncu_banks.py, tc_peak.py    chapter 10's ncu bank-conflict record; Hopper's bare wgmma rate
    torch.py    Conv1d/2d/3d and BatchNorm2d modules for PyTorch models whose forward and backward run
                the course's stages (run_stage; CUDA stages on PyTorch's CUDA tensors, OpenCL ones
                through the host)
    train/      chapter 15: a small CNN trained on the course's stages (data, model, the train
                kernels, the step on the device, the PyTorch twin, the loop, a ResNet stage's step; a
                ResNet of torch.py's modules beside torch.nn's); `python -m helpers.train` records a run
    record.py   `./course record`: the recording plan for a GPU, task by task
    course.py   `./course` itself (python -m helpers.course): the commands, standard library only
    chapters/   what notebooks call: notebook (first cell, source display, step_times), pictures*,
                exercises and kernel_exercises (checks), direct (models of chapters 03-05), local
                (reuse and bank accesses of chapters 09-10), banks (the bank model of chapters 10, 12,
                13), bank_evidence (ncu's counts beside it), winograd (Toom-Cook), winograd_accuracy
                (the kernels' error per layer, chapter 12a), tensor_cores (chapter 13: stages,
                recorded runs, accuracy), tensor_core_layouts, ptx, ncu_reports
    tools/      what builds and checks the course from its notebooks, not what they call: execute,
                editions (the student edition), site, lab_times, folders (output folders), needs
                (packages a test or notebook needs; a pytest plugin)
"""
import importlib

# The layers, lowest first: a module may import from its own layer or the ones before it.
LAYERS = ("helpers.engine", "helpers.ops", "helpers.launch", "helpers.stages", "helpers.tuned_values",
          "helpers.chooser_model", "helpers.chooser", "helpers.runner", "helpers.emulated_stage", "helpers.analysis",
          "helpers.peak", "helpers.tuning_trials", "helpers.bench", "helpers.tune", "helpers.registers",
          "helpers.timer_floor", "helpers.profile_stage", "helpers.ncu_banks", "helpers.tc_peak", "helpers.torch",
          "helpers.train", "helpers.record", "helpers.course",
          "helpers.chapters", "helpers.tools",
          "helpers.__init__", "helpers.__main__")

# The public names, loaded on first use (so that helpers.analysis runs without OpenCL or CUDA).
_PUBLIC = {
    "KernelBuildError": "engine.build", "build": "engine.build", "kernel": "engine.build",
    "kernel_source": "engine.build",
    "CheckResult": "engine.check", "MismatchError": "engine.check", "check_close": "engine.check",
    "DeviceLimitError": "engine.plan", "NoDeviceError": "engine.devices", "device_info": "engine.devices", "get_context": "engine.devices",
    "get_queue": "engine.devices", "list_devices": "engine.devices", "short_name": "engine.devices",
    "DeviceTensor": "engine.backends.opencl", "CudaTensor": "engine.backends.cuda",
    "GuardViolation": "engine.plan", "plan_stage": "runner", "prepare": "runner", "run_stage": "runner",
    "REGISTRY": "stages", "get_stage": "stages", "stage_names": "stages",
}


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")


__all__ = [
    "REGISTRY", "CheckResult", "CudaTensor", "DeviceLimitError", "DeviceTensor", "GuardViolation", "KernelBuildError", "MismatchError", "NoDeviceError",
    "build", "check_close", "check_stage", "device_info", "get_context", "get_queue", "get_stage",
    "kernel", "kernel_source", "list_devices", "plan_stage", "prepare", "run_stage", "short_name",
    "stage_names",
]


def check_stage(op: str, stage, *, ctx=None, defines=None, guard=False, workspace_limit=None,
                **kwargs):
    """Run a stage and check every output against the NumPy reference; raises on a mismatch."""
    from .runner import plan_stage
    plan = plan_stage(op, stage, ctx=ctx, defines=defines, guard=guard, workspace_limit=workspace_limit,
                      **kwargs)
    try:
        plan.enqueue()
        plan.queue.finish()
    except plan.faults as err:   # how the device reports a kernel that faulted (wrong values are checked below)
        raise RuntimeError(f"{plan.stage.key} {plan.fault_report(err)}") from err
    if guard:
        plan.check_guards()
    return check_outputs(plan)


def check_outputs(plan):
    """Compare a plan's current outputs with its operation's reference (runner.check_plan)."""
    from .runner import check_plan
    return check_plan(plan)
