"""One way to run a stage: run_stage(op, stage, ctx=..., **arguments) -> NumPy arrays.

    dx = run_stage("conv_dgrad", "naive", grad_output=dy, weight=w, input_shape=x.shape, padding=1)

Underneath, plan_stage() validates the arguments (helpers/ops), resolves the stage and its
fallback, merges the JIT parameters (registry defaults < tuned for this device < ``defines=``)
and decides the launches (a PlanSpec); the plan class of the stage's backend
(helpers/engine/backends/: ClPlan, CudaPlan) checks the device's limits, builds the kernels and
uploads the tensors: a Plan that can be enqueued many times (what the benchmark times) and read
back once. plan_problem() is plan_stage() for arguments already prepared (a Problem): the benchmark,
the tuning trials and stage auto validate a layer once and plan several stages on it.

With ``guard=True`` every tensor sits inside a larger buffer: inputs between NaN-filled guard
zones, outputs between canaries and pre-filled with NaN. After the run the guards are checked,
so a kernel that reads or writes outside its tensors, or leaves an output element unwritten,
fails loudly (GuardViolation, or NaN in the result).
"""
from __future__ import annotations

import functools
import time
import warnings
from dataclasses import replace

import numpy as np

from . import chooser
from .engine.backends import plan_class
from .engine.check import CheckResult, MismatchError, check_close
from .engine.plan import GuardViolation, PlanSpec  # noqa: F401 (GuardViolation: what run_stage raises)
from .engine.tensor import STORAGE
from .engine.timing import time_plan
from .ops import op_module, tolerance
from .ops.problem import Problem
from .stages import REGISTRY, Stage, get_stage, stages_of, twin_of
from .tuned_values import Tuned, tuned_for


class CannotRun(ValueError):
    """A stage that cannot run this problem (its requirement unmet, no fallback; or a workspace
    over the budget): the message names the need. A benchmark records it for that layer and goes on."""


def check_define_values(s: Stage, defines: dict) -> None:
    """A caller's JIT parameters, before anything is built: integers, >= 1 (0 or 1 for flags: a
    default of 0 or 1 whose tuning candidates, if any, are 0 and 1 too)."""
    for name, v in defines.items():
        if name not in s.defines:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"{name}={v!r} for stage {s.key}: JIT parameters are integers "
                             f"(e.g. {name}={s.defines[name]}; candidates {s.tune.get(name, [s.defines[name]])})")
        low = 0 if s.defines[name] in (0, 1) and set(s.tune.get(name, ())) <= {0, 1} else 1
        if v < low or (low == 0 and v > 1):
            accepted = "0 or 1" if low == 0 else ">= 1 (a positive integer)"
            raise ValueError(f"{name}={v} for stage {s.key}: {name} must be {accepted} "
                             f"(e.g. {name}={s.defines[name]}; candidates {s.tune.get(name, [s.defines[name]])})")


def choose_stage(op: str, problem: Problem, ctx, workspace_limit: int | None) -> str:
    """Stage auto's choice on ctx's device (helpers/chooser.py): the best-ranked candidates' kernels
    built side by side while the reference is computed, once for all of them (every candidate
    answers in fp32), then each candidate checked against it and timed. The reference is the
    spot check's (spot_reference): a first call on a large layer would otherwise spend most of
    its seconds in NumPy."""
    reference = functools.lru_cache(maxsize=None)(lambda: spot_reference(op, problem))

    def time_stage(name: str) -> float:
        plan = plan_problem(op, name, problem, ctx, None, False, workspace_limit, expected=reference)
        return time_plan(plan, **chooser.TIMING).median_ms

    def warm(names: list) -> dict:
        """Build these candidates' kernels in threads (the OpenCL compiler lets go of Python's lock)
        while the reference is computed; a failure here is met again, and reported, when timed.
        Returns how long each side took, in seconds ({"reference": s, "builds": s}): where a first
        call's time goes."""
        from concurrent.futures import ThreadPoolExecutor
        from .engine.build import build
        specs = []
        for name in names:
            try:
                specs.append(specify(op, name, problem, ctx, None, workspace_limit))
            except Exception:          # noqa: BLE001: the candidate's own error comes when it is timed
                pass

        def timed(side: str, fn, *args, **kwargs):
            began = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                took[side] = max(took.get(side, 0.0), time.perf_counter() - began)
        took = {}
        with ThreadPoolExecutor(max_workers=len(specs) + 1) as pool:
            jobs = [pool.submit(timed, "reference", reference)] + [
                pool.submit(timed, "builds", build, ctx, spec.stage.kernel, spec.jit_defines, source=spec.source)
                for spec in specs]
        for job in jobs:
            job.exception()            # waited for; raised again where it matters
        return {side: round(s, 3) for side, s in took.items()}
    # the parameters every candidate would build with: a choice made under other tuned values is made again
    tuned = {s.key: device_defines(op, s, ctx) for s in REGISTRY[op] if s.backend == "opencl" and not s.choose}
    from .engine.devices import is_gpu     # an OpenCL context here; the CUDA path never imports pyopencl
    dev = ctx.devices[0]
    return chooser.choose(problem, dev.name, workspace_limit, time_stage, tuned,
                          kind="GPU" if is_gpu(dev) else "CPU", vendor=dev.vendor.strip(), warm=warm)


def device_tuning(op: str, s: Stage, ctx) -> Tuned:
    """The values tuned for a stage on this device, and where they come from (helpers/tuned_values.py:
    this device's, else the closest recorded device's). A CUDA twin ('10_hoisted_cuda': the same
    algorithm and layout as '10_hoisted') with no values of its own takes its OpenCL stage's, so
    that the two are compared at the same tile. The CPU emulation of CUDA (``ctx.emulated``)
    describes itself as no recorded device."""
    dev = ctx.description if getattr(ctx, "emulated", False) else plan_class(s.backend).describe(ctx)
    tuned = tuned_for(op, s.key, dev)
    twin = twin_of(s)
    if not tuned.defines and twin is not None:
        of_twin = tuned_for(op, twin.key, dev)
        if of_twin.defines:
            tuned = Tuned({k: v for k, v in of_twin.defines.items() if k in s.defines},
                          f"{of_twin.source}, of its OpenCL twin {twin.key}")
    return tuned


def device_defines(op: str, s: Stage, ctx) -> dict:
    """A stage's JIT parameters on this device when none are given: its defaults, then the values
    tuned for the device (device_tuning)."""
    return {**s.defines, **device_tuning(op, s, ctx).defines}


def tuned_source(op: str, requested: Stage, s: Stage, ctx, defines: dict | None) -> str:
    """Where a plan's JIT parameters come from, in words (the benchmark records it per row)."""
    given_here = {k for k in (defines or {}) if k in s.defines} if s.key == requested.key else set()
    source = device_tuning(op, s, ctx).source
    if not given_here:
        return source
    return f"given: {', '.join(sorted(given_here))}" + (f"; the rest {source}" if set(s.defines) - given_here else "")


def resolve(op: str, stage, problem: Problem, ctx, defines: dict | None,
            workspace_limit: int | None = None) -> tuple[Stage, dict]:
    """The stage that will actually run (following fallbacks and stage auto's choice within
    ``workspace_limit`` bytes) and its JIT parameters."""
    s = get_stage(op, stage)
    check_define_values(s, defines or {})
    refuse = getattr(op_module(op), "stage_requires", None)      # needs no parameter can meet
    seen = []
    given = defines or {}          # for the stage asked for; a fallback runs with its own values
    while True:
        d = {**device_defines(op, s, ctx), **{k: v for k, v in given.items() if k in s.defines}}
        fixed = sorted(set(defines or {}) & set(problem.defines) - set(s.defines))
        if fixed and not seen:
            raise ValueError(f"stage {s.key} of {op}: {', '.join(f'{n}={problem.defines[n]}' for n in fixed)} "
                             f"{'is' if len(fixed) == 1 else 'are'} set by the problem itself (its arguments: the "
                             f"weight's shape, stride, padding, activation), not a JIT parameter to choose; the "
                             f"stage's parameters are {', '.join(sorted(s.defines)) or 'none'}")
        unknown = set(defines or {}) - set(s.defines) - set(problem.defines)
        if unknown and not seen:
            raise ValueError(f"stage {s.key} of {op} has no JIT parameter {', '.join(sorted(unknown))}; "
                             f"its parameters are {', '.join(sorted(s.defines)) or 'none'}")
        if s.choose:                                  # stage auto: another stage, chosen per device
            seen.append(s.key)
            s = get_stage(op, choose_stage(op, problem, ctx, workspace_limit))
            continue
        need = refuse(s, problem) if refuse else None
        if need is not None:
            able = ", ".join(x.name for x in REGISTRY[op] if refuse(x, problem) is None)
            raise CannotRun(f"stage {s.key} of {op} cannot run this problem: {need}; the stages that "
                             f"can are {able or 'none'}")
        need = s.requires(problem, d) if s.requires else None
        if need is None:
            return s, d
        if s.fallback is None:
            raise CannotRun(f"stage {s.key} of {op} cannot run this problem: {need}")
        seen.append(s.key)
        s, given = get_stage(op, s.fallback), {}
        if s.key in seen:
            raise RuntimeError(f"fallback cycle in the registry: {seen}")


def jit_defines(s: Stage, p: Problem, d: dict) -> dict:
    """Everything a stage is built with: the problem's defines, the stage's, and those its
    family derives from the problem (``jit``)."""
    return {**p.defines, **d, **(s.jit(p, d) if s.jit else {})}


def stage_source(s: Stage, jit: dict) -> str | None:
    """Generated kernel text for a stage whose family writes part of it, else None (the file)."""
    if s.source is not None:    # a test's planted fault or a kernel exercise's spliced text (a
        return s.source(jit)    # function of the defines, set with dataclasses.replace)
    return s.generate(s, jit) if s.generate else None


def path_taken(requested: Stage, ran: Stage, jit: dict) -> str:
    """Which path a problem took: "fallback" (another stage ran), "fast" or "general" (the
    stage's ``fast`` defines hold or not), "only" (a stage with one path)."""
    if requested.choose:                 # stage auto: the path of the stage it chose
        requested = ran
    if ran.key != requested.key:
        return "fallback"
    if not ran.fast:
        return "only"
    return "fast" if all(jit.get(k) == v for k, v in ran.fast.items()) else "general"


def path_of(op: str, stage, *, ctx=None, defines: dict | None = None, **kwargs) -> str:
    """The path run_stage would take for these arguments, decided on the host without a launch."""
    problem = prepare(op, **kwargs)
    requested = get_stage(op, stage)
    s, d = resolve(op, stage, problem, plan_class(requested.backend).context(ctx, problem.inputs), defines)
    return path_taken(requested, s, jit_defines(s, problem, d))


def workspace_bytes(op: str, stage, *, ctx=None, defines: dict | None = None, **kwargs) -> int:
    """Bytes of scratch the stage that would run (after fallbacks) needs for this problem:
    what a caller compares with its workspace budget before choosing an algorithm."""
    problem = prepare(op, **kwargs)
    ctx = plan_class(get_stage(op, stage).backend).context(ctx, problem.inputs)
    s, d = resolve(op, stage, problem, ctx, defines)
    return sum(w.nbytes for w in s.family.workspace(s, problem, d).values())


def check_workspace(s: Stage, workspace: dict, limit: int | None) -> None:
    """Refuse, before any allocation, a stage whose workspaces exceed the caller's budget."""
    need = sum(w.nbytes for w in workspace.values())
    if limit is not None and need > limit:
        parts = ", ".join(f"{n} {w.count:,} x {w.dtype}" for n, w in workspace.items())
        raise CannotRun(f"stage {s.key} needs {need:,} bytes of workspace ({parts}), more than the "
                         f"budget of {limit:,} bytes; raise workspace_limit or choose another stage")


def reference_for(plan) -> tuple:
    """The reference's (expected, magnitude) for what the plan's stage reads: its inputs rounded
    to the stage's precision (a reduced-precision stage's reference starts from the rounded inputs;
    a TF32 stage's from its mma operands rounded to TF32)."""
    return reference_of(plan.op, plan.problem, plan.stage.precision)


def reference_of(op: str, problem: Problem, precision: str) -> tuple:
    """The reference's (expected, magnitude) for a stage of ``precision`` on ``problem`` (reference_for)."""
    mod = op_module(op)
    tf32 = mod.mma_operands(problem) if precision == "tf32" else ()   # what a TF32 stage rounds
    return mod.reference(problem.on_host(STORAGE[precision], tf32=tf32))


# Auto's candidates are checked on a spot of the outputs: the first and the last image (forward pass,
# input gradient), or the first and the last filter's weights (weight gradient of an ungrouped layer):
# (the inputs cut along that axis, the axis, the output's axis) per op. A reference of the spot's
# sub-problem costs 2/N (2/K) of the whole and gives those outputs exactly: images are independent
# sums, and so are the filters of the weight gradient. Every stage is checked over every output of
# the grid by the tests, and the benchmark checks every output of what it times.
SPOT = {"conv_forward": (("input",), 0, 0), "conv_dgrad": (("grad_output", "output"), 0, 0),
        "conv_wgrad": (("grad_output", "output"), 1, 1)}


def spot_problem(op: str, problem: Problem) -> tuple[Problem, dict] | None:
    """The spot auto checks (SPOT): the sub-problem on host arrays, and per output the index of its
    outputs in the whole problem's; None where the op has no spot or the axis holds 2 or fewer."""
    if op not in SPOT or (op == "conv_wgrad" and problem.dims.get("groups", 1) != 1):
        return None
    names, axis, out_axis = SPOT[op]
    length = problem.inputs[names[0]].shape[axis]
    if length <= 2:
        return None
    idx = np.array([0, length - 1])
    host = problem.on_host("float32")
    inputs = {name: np.take(a, idx, axis=axis) if name in names else a for name, a in host.inputs.items()}
    outputs = {name: tuple(2 if i == out_axis else v for i, v in enumerate(shape))
               for name, shape in problem.outputs.items()}
    select = {name: (slice(None),) * out_axis + (idx,) for name in outputs}
    return replace(host, inputs=inputs, outputs=outputs), select


def spot_reference(op: str, problem: Problem) -> tuple:
    """(expected, magnitude, select) of auto's check in fp32: the spot's reference and where its outputs
    lie in the whole (spot_problem), or the whole reference (select None) where there is no spot."""
    spot = spot_problem(op, problem)
    if spot is None:
        return (*reference_of(op, problem, "fp32"), None)
    sub, select = spot
    return (*reference_of(op, sub, "fp32"), select)


def check_plan(plan, expected: tuple | None = None) -> CheckResult:
    """The one check: a plan's current outputs against its operation's reference (every output,
    per element and as a whole: ops.tolerance); raises MismatchError. ``expected``:
    reference_for(plan) (or a plan's of the same problem and precision), when the caller already
    has it, or spot_reference's (expected, magnitude, select): the outputs at ``select`` only. Marks
    the plan as checked."""
    expected, magnitude, *select = reference_for(plan) if expected is None else expected
    got = plan.outputs()
    if select and select[0]:
        got = {name: got[name][select[0][name]] for name in select[0]}
    tol = tolerance(plan.op, plan.problem, plan.stage)
    try:
        results = [check_close(got[name], expected[name], magnitude=magnitude[name], tolerance=tol[name],
                               name=name) for name in plan.problem.outputs]
    except MismatchError as err:
        note = nonfinite_inputs(plan.problem)
        if not note:
            raise
        raise MismatchError(f"{err}\n(the inputs are not all finite: {note}; the outputs they reach are NaN "
                            f"or inf in the reference too, and those match)", err.result) from None
    plan.checked = True
    names = " and ".join(plan.problem.outputs)
    return CheckResult(f"{plan.stage.key} {names}", sum(r.count for r in results),
                       max(r.max_error for r in results), max(r.worst_ratio for r in results), plan.path,
                       norm_ratio=max(r.norm_ratio for r in results), nonfinite=sum(r.nonfinite for r in results),
                       note=nonfinite_inputs(plan.problem))


def nonfinite_inputs(problem: Problem) -> str:
    """'grad_output holds 2 NaN' for the host inputs that hold NaN or inf (what a check names)."""
    parts = []
    for name, a in problem.inputs.items():
        if isinstance(a, np.ndarray) and name not in problem.aliases:
            nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
            if nan or inf:
                parts.append(f"{name} holds " + " and ".join(f"{n:,} {w}" for n, w in ((nan, "NaN"), (inf, "inf")) if n))
    return "; ".join(parts)


def check_array_dtype(op: str, s: Stage, name: str, a: np.ndarray) -> None:
    """A NumPy input of a float32-storing stage (fp32, tf32) must be float32; a reduced-precision
    stage converts float32 or float16 arrays on upload."""
    if STORAGE[s.precision] == "float32" and a.dtype != np.float32:
        raise TypeError(f"{op}: {name} must be float32 for stage {s.key} ({s.precision}), got "
                        f"{a.dtype}; float16 arrays go to fp16 stages")


def specify(op: str, stage, problem: Problem, ctx, defines: dict | None,
            workspace_limit: int | None, expected=None) -> PlanSpec:
    """Everything a plan needs decided before device work: the stage resolved (fallbacks, stage
    auto's choice), its JIT parameters, path, launches, workspaces (within the budget) and source;
    NumPy inputs of a float32-storing stage checked to be float32. ``expected``: a function giving
    the reference its check compares with (reference_of), when the caller shares one among plans."""
    requested = get_stage(op, stage)
    s, d = resolve(op, stage, problem, ctx, defines, workspace_limit)
    for name, a in problem.inputs.items():
        if isinstance(a, np.ndarray):
            check_array_dtype(op, s, name, a)
    jit = jit_defines(s, problem, d)
    workspace = s.family.workspace(s, problem, d)
    check_workspace(s, workspace, workspace_limit)
    return PlanSpec(op, requested, s, problem, d, jit, path_taken(requested, s, jit),
                    s.family.steps(s, problem, d), workspace, stage_source(s, jit),
                    STORAGE[s.precision],
                    lambda plan: check_plan(plan, expected() if expected else None),   # looked up when it runs
                    tuned_source(op, requested, s, ctx, defines))


def plan_problem(op: str, stage, problem: Problem, ctx, defines: dict | None, guard: bool,
                 workspace_limit: int | None = None, expected=None):
    """A plan of a stage for a prepared problem (prepare's Problem): the stage bound to it on a
    device, in its backend's plan class (ClPlan or CudaPlan, helpers/engine/backends/): device
    tensors of another backend refused first, the context chosen (OpenCL: ``ctx``, a device
    tensor's, or the course's choice), the stage resolved."""
    requested = get_stage(op, stage)
    cls = plan_class(requested.backend)
    cls.check_backends(problem.inputs, requested.key)
    ctx = cls.context(ctx, problem.inputs)
    return cls(specify(op, stage, problem, ctx, defines, workspace_limit, expected), ctx, guard)


def prepare(op: str, **kwargs) -> Problem:
    """Validate an operation's arguments (raises TypeError/ValueError naming the problem)."""
    stages_of(op)          # an operation of the registry (else: the error lists them)
    return op_module(op).prepare(**kwargs)


def plan_stage(op: str, stage, *, ctx=None, defines: dict | None = None, guard: bool = False,
               workspace_limit: int | None = None, **kwargs):
    """Validate, resolve, build and upload: a Plan to enqueue (see run_stage for the arguments)."""
    return plan_problem(op, stage, prepare(op, **kwargs), ctx, defines, guard, workspace_limit)


def run_stage(op: str, stage, *, ctx=None, defines: dict | None = None, guard: bool = False,
              workspace_limit: int | None = None, **kwargs):
    """Run one stage of an operation once and return its result as NumPy array(s).

    ``stage``: name or number (see stage_names(op)); ``ctx``: a context, device or selector
    (default: COURSE_DEVICE, PYOPENCL_CTX, else a GPU, else the CPU); ``defines``: JIT
    parameters overriding the stage's defaults; ``guard``: surround tensors with guard zones and
    check them (workspaces too); ``workspace_limit``: bytes of scratch the stage may use (refused
    before any allocation beyond it). The other keyword arguments are the operation's (see
    helpers/ops/<op>.py).

    Tensors are NumPy arrays or device tensors of the stage's backend (DeviceTensor for OpenCL,
    CudaTensor for CUDA; helpers/engine/backends/: used where they are, no upload). A
    reduced-precision stage (precision "fp16") stores its tensors in float16: float32
    arrays are rounded to float16 on upload and the result comes back as float32 holding the
    float16 values; given float16 arrays or float16 device tensors, it comes back as float16.
    A NaN or inf in a host input is named in a RuntimeWarning (the result is computed all the same).
    """
    plan = plan_stage(op, stage, ctx=ctx, defines=defines, guard=guard, workspace_limit=workspace_limit, **kwargs)
    if bad := nonfinite_inputs(plan.problem):       # computed all the same, as PyTorch does: said once
        warnings.warn(f"{op}: {bad}; every output that reads them is NaN or infinite too", RuntimeWarning, stacklevel=2)
    plan.enqueue()
    return plan.result()
