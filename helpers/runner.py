"""One way to run a stage: run_stage(op, stage, ctx=..., **arguments) -> NumPy arrays.

    dx = run_stage("conv_dgrad", "naive", grad_output=dy, weight=w, input_shape=x.shape, padding=1)

Underneath, plan_stage() validates the arguments (helpers/ops), resolves the stage and its
fallback, merges the JIT parameters (registry defaults < tuned for this device < ``defines=``),
checks the device's limits, builds the program and uploads the tensors: a Plan that can be
enqueued many times (what the benchmark times) and read back once.

With ``guard=True`` every tensor sits inside a larger buffer: inputs between NaN-filled guard
zones, outputs between canaries and pre-filled with NaN. After the run the guards are checked,
so a kernel that reads or writes outside its tensors, or leaves an output element unwritten,
fails loudly (GuardViolation, or NaN in the result).
"""
from __future__ import annotations

import functools

import numpy as np
import pyopencl as cl

from .engine.backends import cuda
from .engine.build import build
from . import chooser
from .engine.check import CheckResult, MismatchError, check_close, tolerance_stored
from .engine.devices import DeviceLimitError, describe, get_context, get_queue
from .engine.tensor import STORAGE, DeviceTensor, Tensor
from .engine.timing import time_enqueue, time_enqueue_steps, time_plan
from .launch import Step, TensorMap, family, hook
from .ops import op_module
from .ops.problem import Problem
from .stages import REGISTRY, Stage, get_stage, twin_of
from .tuning import Tuned, tuned_for


class GuardViolation(AssertionError):
    """A kernel wrote outside its tensors, or into an input."""


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
    """Stage auto's choice on ctx's device (helpers/chooser.py), each candidate checked, then timed."""
    def time_stage(name: str) -> float:
        plan = ClPlan(op, name, problem, ctx, None, False, workspace_limit)
        return time_plan(plan, **chooser.TIMING).median_ms
    # the parameters every candidate would build with: a choice made under other tuned values is made again
    tuned = {s.key: device_defines(op, s, ctx) for s in REGISTRY[op] if s.backend == "opencl" and not s.choose}
    return chooser.choose(problem, ctx.devices[0].name, workspace_limit, time_stage, tuned)


def device_tuning(op: str, s: Stage, ctx) -> Tuned:
    """The values tuned for a stage on this device, and where they come from (helpers/tuning.py:
    this device's, else the closest recorded device's). A CUDA twin ('10_hoisted_cuda': the same
    algorithm and layout as '10_hoisted') with no values of its own takes its OpenCL stage's, so
    that the two are compared at the same tile."""
    if getattr(ctx, "emulated", False):          # the CPU emulation of CUDA: like no recorded device
        dev = ctx.description
    else:
        dev = cuda.describe() if s.backend == "cuda" else describe(ctx.devices[0])
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
            raise ValueError(f"stage {s.key} of {op} cannot run this problem: {need}; the stages that "
                             f"can are {able or 'none'}")
        requires = hook(s, "requires")
        need = requires(problem, d) if requires else None
        if need is None:
            return s, d
        if s.fallback is None:
            raise ValueError(f"stage {s.key} of {op} cannot run this problem: {need}")
        seen.append(s.key)
        s, given = get_stage(op, s.fallback), {}
        if s.key in seen:
            raise RuntimeError(f"fallback cycle in the registry: {seen}")


def jit_defines(s: Stage, p: Problem, d: dict) -> dict:
    """Everything a stage is built with: the problem's defines, the stage's, and those its
    family derives from the problem (``jit``)."""
    derive = hook(s, "jit")
    return {**p.defines, **d, **(derive(p, d) if derive else {})}


def stage_source(s: Stage, jit: dict) -> str | None:
    """Generated kernel text for a stage whose family writes part of it, else None (the file)."""
    if callable(s.source):      # a test's planted fault or a kernel exercise's spliced text (a
        return s.source(jit)    # function of the defines, set with dataclasses.replace)
    generate = hook(s, "source")
    return generate(s, jit) if generate else None


PATHS = ("fast", "general", "only", "fallback")


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
    s, d = resolve(op, stage, problem, None if requested.backend == "cuda" else get_context(ctx), defines)
    return path_taken(requested, s, jit_defines(s, problem, d))


def workspace_bytes(op: str, stage, *, ctx=None, defines: dict | None = None, **kwargs) -> int:
    """Bytes of scratch the stage that would run (after fallbacks) needs for this problem:
    what a caller compares with its workspace budget before choosing an algorithm."""
    problem = prepare(op, **kwargs)
    s = get_stage(op, stage)
    s, d = resolve(op, stage, problem, None if s.backend == "cuda" else get_context(ctx), defines)
    return sum(w.nbytes for w in family(s.family).workspace(s, problem, d).values())


def check_workspace(s: Stage, workspace: dict, limit: int | None) -> None:
    """Refuse, before any allocation, a stage whose workspaces exceed the caller's budget."""
    need = sum(w.nbytes for w in workspace.values())
    if limit is not None and need > limit:
        parts = ", ".join(f"{n} {w.count:,} x {w.dtype}" for n, w in workspace.items())
        raise ValueError(f"stage {s.key} needs {need:,} bytes of workspace ({parts}), more than the "
                         f"budget of {limit:,} bytes; raise workspace_limit or choose another stage")


def reference_for(plan) -> tuple:
    """The reference's (expected, magnitude) for what the plan's stage reads: its inputs rounded
    to the stage's precision (a reduced-precision stage's reference starts from the rounded inputs;
    a TF32 stage's from its mma operands rounded to TF32)."""
    mod = op_module(plan.op)
    precision = plan.stage.precision
    tf32 = mod.mma_operands(plan.problem) if precision == "tf32" else ()   # what a TF32 stage rounds
    return mod.reference(plan.problem.on_host(STORAGE[precision], tf32=tf32))


def check_plan(plan, expected: tuple | None = None) -> CheckResult:
    """The one check: a plan's current outputs against its operation's reference (every output,
    the op's tolerance scaled by magnitude); raises MismatchError. ``expected``: reference_for(plan)
    (or a plan's of the same problem and precision), when the caller already has it. Marks the
    plan as checked."""
    mod = op_module(plan.op)
    precision = plan.stage.precision
    expected, magnitude = reference_for(plan) if expected is None else expected
    got = plan.outputs()
    op_rtol = mod.rtol(plan.problem, mma=precision) if plan.stage.tensor_cores else mod.rtol(plan.problem)
    rtol, atol = tolerance_stored(op_rtol, precision)
    try:
        results = [check_close(got[name], expected[name], magnitude=magnitude[name],
                               rtol=rtol, atol=atol, name=name) for name in plan.problem.outputs]
    except MismatchError as err:
        note = nonfinite_inputs(plan.problem)
        if not note:
            raise
        raise MismatchError(f"{err}\n(the inputs are not all finite: {note}; the outputs they reach are NaN "
                            f"or inf in the reference too, and those match)") from None
    plan.checked = True
    names = " and ".join(plan.problem.outputs)
    return CheckResult(f"{plan.stage.key} {names}", sum(r.count for r in results),
                       max(r.max_error for r in results), max(r.worst_ratio for r in results), plan.path,
                       sum(r.nonfinite for r in results), nonfinite_inputs(plan.problem))


def nonfinite_inputs(problem: Problem) -> str:
    """'grad_output holds 2 NaN' for the host inputs that hold NaN or inf (what a check names)."""
    parts = []
    for name, a in problem.inputs.items():
        if isinstance(a, np.ndarray) and name not in problem.aliases:
            nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
            if nan or inf:
                parts.append(f"{name} holds " + " and ".join(f"{n:,} {w}" for n, w in ((nan, "NaN"), (inf, "inf")) if n))
    return "; ".join(parts)


def step_values(plan, step: Step) -> tuple:
    """A step's kernel arguments: tensors by name (their ``buffer``: an OpenCL buffer or a CuPy
    array), the problem's int32 scalars by name, typed literals as they are, tensor maps made
    (CUDA: a device copy of the map, kept with the launch)."""
    values = []
    for a in step.args:
        if isinstance(a, TensorMap):      # made the way the plan's backend reads it
            make = getattr(plan, "tensor_map", cuda.tensor_map)
            values.append(make(plan.arrays[a.tensor], a.dims, a.box, a.swizzle))
        elif not isinstance(a, str):
            values.append(a)
        elif a in plan.arrays:
            values.append(plan.arrays[a].buffer)
        elif a in plan.problem.scalars:
            values.append(np.int32(plan.problem.scalars[a]))
        else:
            raise RuntimeError(f"registry bug: step argument {a!r} is neither a tensor nor a scalar")
    return tuple(values)


def check_array_dtype(op: str, s: Stage, name: str, a: np.ndarray) -> None:
    """A NumPy input of a float32-storing stage (fp32, tf32) must be float32; a reduced-precision
    stage converts float32 or float16 arrays on upload."""
    if STORAGE[s.precision] == "float32" and a.dtype != np.float32:
        raise TypeError(f"{op}: {name} must be float32 for stage {s.key} ({s.precision}), got "
                        f"{a.dtype}; float16 arrays go to fp16 stages")


def out_dtype(p: Problem, dtype: str):
    """NumPy out in the inputs' precision: float16 when the caller gave float16 to a float16
    stage, else float32 (bfloat16 is returned as float32, exactly)."""
    given16 = any(getattr(a, "dtype", None) in ("float16", np.float16) for a in p.inputs.values())
    return np.float16 if given16 and dtype == "float16" else np.float32


BACKEND_NAMES = {"opencl": "OpenCL", "cuda": "CUDA"}


class BasePlan:
    """What the plans of both backends share: the stage resolved with its steps and workspaces,
    one device tensor per input, output and workspace (a caller's tensors used where they are),
    ``tensor`` and ``bind``, outputs read back, guard checks; nothing is timed before it was
    checked once. A backend's plan adds its memory limits, the build, the tensor class
    (``tensor_class``, ``_new``) and how kernel arguments are set (``_bind``, ``_rebind``)."""
    backend = ""
    tensor_class = Tensor
    checked = False

    def _plan(self, op: str, stage, problem: Problem, ctx, defines: dict | None, guard: bool,
              workspace_limit: int | None) -> None:
        """Everything before the build: tensors given on the device checked, stage resolved."""
        self.op, self.problem, self.ctx, self.guard = op, problem, ctx, guard
        self.requested = get_stage(op, stage)
        given = {name: a for name, a in problem.inputs.items() if isinstance(a, Tensor)}
        for name, t in given.items():
            self._check_backend(name, t)
        self.stage, self.defines = resolve(op, stage, problem, ctx, defines, workspace_limit)
        s = self.stage
        given_here = {k for k in (defines or {}) if k in s.defines} if s.key == self.requested.key else set()
        tuned = device_tuning(op, s, ctx)
        # where this plan's parameters come from, in words (the benchmark records it per row)
        self.tuned_source = (tuned.source if not given_here else
                             f"given: {', '.join(sorted(given_here))}" + (f"; the rest {tuned.source}" if set(s.defines) - given_here else ""))
        self.dtype = STORAGE[s.precision]      # tensors stored in the stage's precision (tf32: float32)
        for name, a in problem.inputs.items():
            if name in given:
                self._given(name, a, self.dtype)
            else:
                check_array_dtype(op, s, name, a)
        self.jit_defines = jit = jit_defines(s, problem, self.defines)
        self.path = path_taken(self.requested, s, jit)
        self.steps = family(s.family).steps(s, problem, self.defines)
        self.workspace = family(s.family).workspace(s, problem, self.defines)
        check_workspace(s, self.workspace, workspace_limit)

    def _make_tensors(self) -> None:
        """A caller's device tensors as they are, NumPy inputs uploaded (converted to the stage's
        storage), outputs and workspaces allocated; an alias shares its target's tensor."""
        p = self.problem
        self.arrays = {}
        for name, a in p.inputs.items():
            if name not in p.aliases:
                self.arrays[name] = a if isinstance(a, Tensor) else self._new(name, a.shape, a, True, self.dtype)
        for name, shape in p.outputs.items():
            self.arrays[name] = self._new(name, shape, None, False, self.dtype)
        for name, w in self.workspace.items():
            self.arrays[name] = self._new(name, (int(w.count),), None, False, w.dtype)
        for name, target in p.aliases.items():
            self.arrays[name] = self.arrays[target]

    def _check_backend(self, name: str, t: Tensor) -> None:
        if t.backend != self.backend:
            raise TypeError(f"{name}: stage {self.requested.key} runs on {BACKEND_NAMES[self.backend]}, but "
                            f"the {type(t).__name__} given lives on {BACKEND_NAMES.get(t.backend, t.backend)}; "
                            f"pass a NumPy array or a {self.tensor_class.__name__}")

    def _given(self, name: str, t: Tensor, dtype: str) -> Tensor:
        """A caller's device tensor for ``name``, checked against what the stage reads or writes."""
        self._check_backend(name, t)
        self._check_device(name, t)
        if t.dtype != dtype:
            raise TypeError(f"{name}: stage {self.stage.key} reads {dtype} tensors, got a {t.dtype} "
                            f"device tensor; pass a NumPy array (converted on upload) or a {dtype} tensor")
        return t

    def tensor(self, name: str) -> Tensor:
        """The device tensor bound to ``name`` (an input, output or workspace): stays on the device,
        so another plan can take it as an input without a host copy."""
        if name not in self.arrays:
            raise KeyError(f"stage {self.stage.key} has no tensor {name!r}; it has {', '.join(self.arrays)}")
        return self.arrays[name]

    def bind(self, **tensors: Tensor) -> None:
        """Re-bind inputs or outputs to other device tensors of the same backend, dtype, shape and
        layout, resetting those kernel arguments (nothing is rebuilt or copied); an input that
        another one shares (an alias) follows it; the plan must be checked again."""
        for name, t in tensors.items():
            old = self.tensor(name)
            if name in self.problem.aliases:
                raise ValueError(f"bind: {name} is unused in this problem and shares "
                                 f"{self.problem.aliases[name]}'s tensor; bind {self.problem.aliases[name]}")
            if not isinstance(t, Tensor):
                raise TypeError(f"bind: {name} must be a {self.tensor_class.__name__}, got {type(t).__name__}")
            t = self._given(name, t, old.dtype)
            if t.shape != old.shape or t.layout != old.layout:
                raise ValueError(f"bind: {name} must have shape {old.shape} ({old.layout}), got {t.shape} ({t.layout})")
            names = {name} | {a for a, target in self.problem.aliases.items() if target == name}
            for n in names:
                self.arrays[n] = t
                if n in self.problem.inputs:
                    self.problem.inputs[n] = t
            self._rebind(names, t)
        self.checked = False

    def outputs(self) -> dict:
        to = out_dtype(self.problem, self.dtype)
        return {name: self.arrays[name].read().astype(to, copy=False) for name in self.problem.outputs}

    def check_guards(self) -> None:
        for name, arr in self.arrays.items():
            if name not in self.problem.aliases:
                bad = arr.check_guards()
                if bad:
                    raise GuardViolation(bad)

    def result(self):
        """What run_stage returns: the outputs, read back (after a guard check when guarded)."""
        self.queue.finish()
        if self.guard:
            self.check_guards()
        return self.problem.result(self.outputs())

    def ensure_checked(self) -> None:
        """Run once and check against the reference, unless that was done already (time_plan
        calls it, so every configuration that is timed was checked first)."""
        if not self.checked:
            self.enqueue()
            check_plan(self)


class ClPlan(BasePlan):
    """A stage bound to a problem on an OpenCL device: buffers uploaded, program built, ready to enqueue."""
    backend, tensor_class = "opencl", DeviceTensor

    def __init__(self, op: str, stage, problem: Problem, ctx: cl.Context, defines: dict | None, guard: bool,
                 workspace_limit: int | None = None):
        given = [t for t in problem.inputs.values() if isinstance(t, DeviceTensor)]
        self.queue = given[0].queue if given else get_queue(ctx)   # a chain runs on one in-order queue
        self._plan(op, stage, problem, ctx, defines, guard, workspace_limit)
        dev = ctx.devices[0]
        s, p = self.stage, problem
        sizes = {name: a.nbytes for name, a in p.inputs.items() if name not in p.aliases}
        sizes.update({name: 4 * int(np.prod(shape)) for name, shape in p.outputs.items()})  # an upper bound
        sizes.update({name: w.nbytes for name, w in self.workspace.items()})
        for name, nbytes in sizes.items():
            if nbytes > dev.max_mem_alloc_size:
                raise ValueError(f"{name} needs {nbytes / 2**20:,.0f} MiB but {dev.name.strip()} allocates at "
                                 f"most {dev.max_mem_alloc_size / 2**20:,.0f} MiB in one buffer; use a smaller "
                                 f"batch or size")
        if sum(sizes.values()) > dev.global_mem_size:
            raise ValueError(f"the tensors need {sum(sizes.values()) / 2**30:.2f} GiB, more than the "
                             f"{dev.global_mem_size / 2**30:.2f} GiB of {dev.name.strip()}; use a smaller batch")
        self.program = build(ctx, s.kernel, self.jit_defines, source=stage_source(s, self.jit_defines))
        self._make_tensors()
        self._args = []
        self._bound = [self._bind(step, dev) for step in self.steps]

    def _new(self, name: str, shape: tuple, host, is_input: bool, dtype: str) -> DeviceTensor:
        return DeviceTensor(self.ctx, self.queue, name, shape, host, self.guard, is_input, dtype)

    def _check_device(self, name: str, t: DeviceTensor) -> None:
        if t.ctx != self.ctx:
            raise ValueError(f"{name}: the device tensor lives on another context than the stage's")

    def _bind(self, step: Step, dev) -> tuple:
        # a kernel object of this plan's own: kernel arguments live in the object, so two plans of
        # one program (the same stage on two layers) sharing one would overwrite each other's
        k = cl.Kernel(self.program, step.kernel)
        self._args.append((k, step.args))
        if step.local_size is not None:
            wg = int(np.prod(step.local_size))
            limit = k.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, dev)
            if wg > limit:
                raise DeviceLimitError(f"stage {self.stage.key}: work-group of {wg} work-items, but kernel "
                                 f"{step.kernel} allows at most {limit} on {dev.name.strip()}; lower WG")
            for g, l in zip(step.global_size, step.local_size):
                if g % l:
                    raise RuntimeError(f"registry bug: global size {step.global_size} is not a multiple "
                                       f"of the work-group {step.local_size}")
        k.set_args(*step_values(self, step))
        return k, step.global_size, step.local_size

    def _rebind(self, names: set, t: DeviceTensor) -> None:
        for k, args in self._args:
            for i, a in enumerate(args):
                if a in names:
                    k.set_arg(i, t.buffer)

    def enqueue(self) -> list:
        """Launch every kernel of the stage once; the events carry the profiling times."""
        return [cl.enqueue_nd_range_kernel(self.queue, k, g, l) for k, g, l in self._bound]

    def time(self, **kwargs) -> list:
        """Milliseconds per repetition, by profiling events (engine/timing.py); use time_plan,
        which checks the plan first."""
        return time_enqueue(self.enqueue, self.queue, **kwargs).times_ms

    def time_steps(self, **kwargs) -> list:
        """Milliseconds per repetition of each launch alone (a list per step); use
        engine/timing.py: time_steps, which checks the plan first."""
        return time_enqueue_steps(self.enqueue, self.queue, **kwargs)


class CudaPlan(BasePlan):
    """A CUDA stage bound to a problem on CuPy's current device: the same contract as ClPlan
    (enqueue, tensor, bind, outputs, check_guards, result, queue.finish); launches go to CuPy's
    current stream, in order, so plans chain as on one OpenCL queue."""
    backend, tensor_class = "cuda", cuda.CudaTensor

    class _Queue:
        finish = staticmethod(cuda.synchronize)

    def __init__(self, op: str, stage, problem: Problem, ctx, defines: dict | None, guard: bool,
                 workspace_limit: int | None = None):
        self.queue = self._Queue()
        self._plan(op, stage, problem, ctx, defines, guard, workspace_limit)
        s, p = self.stage, problem
        dev = cuda.device()
        item = 2 if self.dtype != "float32" else 4
        need = sum(item * a.size for n, a in p.inputs.items() if n not in p.aliases and not isinstance(a, Tensor))
        need += sum(item * int(np.prod(shape)) for shape in p.outputs.values())
        need += sum(w.nbytes for w in self.workspace.values())
        if need > dev["total_memory"]:
            raise ValueError(f"the tensors need {need / 2**30:.2f} GiB, more than the "
                             f"{dev['total_memory'] / 2**30:.2f} GiB of {dev['name']}; use a smaller batch")
        if s.arch and f"sm_{dev['compute_capability']}a" != s.arch:
            raise DeviceLimitError(f"stage {s.key} is built for {s.arch} (its instructions exist on no other "
                                   f"GPU), but {dev['name']} is sm_{dev['compute_capability']}; run a stage "
                                   f"built for any GPU instead (chapter 13's tc_*_nhwc: the same product on mma.sync)")
        self.module = cuda.build(s.kernel, self.jit_defines, source=stage_source(s, self.jit_defines), arch=s.arch)
        self._make_tensors()
        self._bound = [self._bind(step, dev) for step in self.steps]

    def _new(self, name: str, shape: tuple, host, is_input: bool, dtype: str) -> cuda.CudaTensor:
        return cuda.CudaTensor(name, shape, host, self.guard, is_input, dtype)

    def _check_device(self, name: str, t: cuda.CudaTensor) -> None:
        if t.device != cuda.device()["id"]:
            raise ValueError(f"{name}: the device tensor lives on CUDA device {t.device}, the stage "
                             f"runs on device {cuda.device()['id']}")

    def _bind(self, step: Step, dev: dict) -> tuple:
        k = self.module.get_function(step.kernel)
        threads = int(np.prod(step.local_size))
        limit = min(k.max_threads_per_block, dev["max_threads_per_block"])
        if threads > limit:
            raise DeviceLimitError(f"stage {self.stage.key}: blocks of {threads} threads, but kernel {step.kernel} "
                             f"allows at most {limit} on {dev['name']}; lower WG")
        for g, l in zip(step.global_size, step.local_size):
            if g % l:
                raise RuntimeError(f"registry bug: global size {step.global_size} is not a multiple "
                                   f"of the block {step.local_size}")
        if step.shared:
            if step.shared > dev["max_shared_per_block"]:
                raise DeviceLimitError(f"stage {self.stage.key}: {step.shared:,} bytes of shared memory per block, "
                                       f"but {dev['name']} allows {dev['max_shared_per_block']:,}; lower STAGES")
            k.max_dynamic_shared_size_bytes = step.shared    # beyond 48 KiB a kernel must opt in
        return k, step.global_size, step.local_size, step_values(self, step), step.shared

    def _rebind(self, names: set, t: cuda.CudaTensor) -> None:
        """A launch's arguments are a tuple of this plan's: rebuilt from the tensors now bound."""
        self._bound = [(k, g, l, step_values(self, step), sh) for (k, g, l, _, sh), step in zip(self._bound, self.steps)]

    def enqueue(self) -> list:
        """Launch every kernel of the stage once (asynchronously)."""
        for k, g, l, args, shared in self._bound:
            cuda.launch(k, g, l, args, shared)
        return []

    def _launches(self) -> list:
        return [functools.partial(cuda.launch, k, g, l, args, shared) for k, g, l, args, shared in self._bound]

    def time(self, **kwargs) -> list:
        """Milliseconds per repetition, by CUDA events (backends/cuda.py); use time_plan, which
        checks the plan first."""
        return cuda.time_launches(self._launches(), **kwargs)

    def time_steps(self, **kwargs) -> list:
        """Milliseconds per repetition of each launch alone (a list per step); use
        engine/timing.py: time_steps, which checks the plan first."""
        return cuda.time_launches(self._launches(), each=True, **kwargs)


def Plan(op: str, stage, problem: Problem, ctx, defines: dict | None, guard: bool,
         workspace_limit: int | None = None):
    """A stage bound to a problem on a device, in its backend (ClPlan or CudaPlan)."""
    cls = CudaPlan if get_stage(op, stage).backend == "cuda" else ClPlan
    return cls(op, stage, problem, ctx, defines, guard, workspace_limit)


def prepare(op: str, **kwargs) -> Problem:
    """Validate an operation's arguments (raises TypeError/ValueError naming the problem)."""
    return op_module(op).prepare(**kwargs)


def plan_stage(op: str, stage, *, ctx=None, defines: dict | None = None, guard: bool = False,
               workspace_limit: int | None = None, **kwargs):
    """Validate, resolve, build and upload: a Plan to enqueue (see run_stage for the arguments)."""
    problem = prepare(op, **kwargs)
    if get_stage(op, stage).backend == "cuda":
        return CudaPlan(op, stage, problem, ctx, defines, guard, workspace_limit)
    if ctx is None:     # a device tensor's context, where one is given
        ctx = next((a.ctx for a in problem.inputs.values() if isinstance(a, DeviceTensor)), None)
    return ClPlan(op, stage, problem, get_context(ctx), defines, guard, workspace_limit)


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
    CudaTensor for CUDA; helpers/engine/tensor.py: used where they are, no upload). A reduced-precision stage (precision "fp16") stores its tensors in float16: float32
    arrays are rounded to float16 on upload and the result comes back as float32 holding the
    float16 values; given float16 arrays or float16 device tensors, it comes back as float16.
    """
    plan = plan_stage(op, stage, ctx=ctx, defines=defines, guard=guard, workspace_limit=workspace_limit, **kwargs)
    plan.enqueue()
    return plan.result()
