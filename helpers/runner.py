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

import numpy as np
import pyopencl as cl

from .build import build, kernel
from .devices import get_context, get_queue
from .ops import op_module
from .problem import Problem
from .stages import Stage, Step, get_stage
from .tuning import tuned_defines

CANARY = np.uint32(0xDEADBEEF)   # a float32 no kernel computes by chance (-6.26e18)
GUARD_BYTES = 4096


class GuardViolation(AssertionError):
    """A kernel wrote outside its tensors, or into an input."""


class DeviceArray:
    """A float32 tensor on the device, optionally inside guard zones."""

    def __init__(self, ctx, queue, name: str, shape: tuple, host: np.ndarray | None, guard: bool, is_input: bool):
        self.name, self.shape, self.is_input, self.guard = name, tuple(shape), is_input, guard
        self.size = int(np.prod(shape))
        self.host = host
        mf = cl.mem_flags
        if not guard:
            self.parent = None
            if host is not None:
                self.buffer = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)
            else:
                self.buffer = cl.Buffer(ctx, mf.READ_WRITE, 4 * self.size)
            return
        align = max(ctx.devices[0].mem_base_addr_align // 8, 4)
        self.pad = max(GUARD_BYTES, align) // 4            # float32 elements in each guard zone
        whole = np.empty(self.size + 2 * self.pad, dtype=np.float32)
        fill = np.float32(np.nan) if is_input else CANARY.view(np.float32)
        whole[:self.pad] = fill
        whole[self.pad + self.size:] = fill
        whole[self.pad:self.pad + self.size] = host.ravel() if host is not None else np.float32(np.nan)
        self.initial = whole
        # Allocate, then upload: NVIDIA's driver was seen to keep a sub-buffer's out-of-range writes
        # out of a parent created with COPY_HOST_PTR, which would hide exactly what guards look for.
        self.parent = cl.Buffer(ctx, mf.READ_WRITE, whole.nbytes)
        cl.enqueue_copy(queue, self.parent, whole)
        self.buffer = self.parent.get_sub_region(4 * self.pad, 4 * self.size)

    def read(self, queue) -> np.ndarray:
        out = np.empty(self.shape, dtype=np.float32)
        cl.enqueue_copy(queue, out, self.buffer)
        return out

    def check_guards(self, queue) -> None:
        if self.parent is None:
            return
        whole = np.empty_like(self.initial)
        cl.enqueue_copy(queue, whole, self.parent)
        zones = [slice(0, self.pad), slice(self.pad + self.size, None)]
        if self.is_input:
            zones.append(slice(self.pad, self.pad + self.size))  # inputs are read-only
        for zone in zones:
            changed = np.flatnonzero(whole[zone].view(np.uint32) != self.initial[zone].view(np.uint32))
            if changed.size:
                where = "inside the input" if zone.start == self.pad and zone.stop is not None else (
                    "before" if zone.start == 0 else "after")
                first = changed[0] + (zone.start or 0) - self.pad
                raise GuardViolation(f"{self.name}: {changed.size} float(s) changed {where} the tensor "
                                     f"(first at element offset {first})")


def resolve(op: str, stage, problem: Problem, ctx, defines: dict | None) -> tuple[Stage, dict]:
    """The stage that will actually run (following fallbacks) and its JIT parameters."""
    s = get_stage(op, stage)
    dev = ctx.devices[0].name
    seen = []
    while True:
        d = {**s.defines, **tuned_defines(op, s.key, dev), **{k: v for k, v in (defines or {}).items() if k in s.defines}}
        unknown = set(defines or {}) - set(s.defines) - set(problem.defines)
        if unknown and not seen:
            raise ValueError(f"stage {s.key} of {op} has no JIT parameter {', '.join(sorted(unknown))}; "
                             f"its parameters are {', '.join(sorted(s.defines)) or 'none'}")
        if s.choose is not None:                      # stage auto: another stage, chosen per device
            seen.append(s.key)
            s = get_stage(op, s.choose(problem, ctx, d))
            continue
        need = s.requires(problem, d) if s.requires else None
        if need is None:
            return s, d
        if s.fallback is None:
            raise ValueError(f"stage {s.key} of {op} cannot run this problem: {need}")
        seen.append(s.key)
        s = get_stage(op, s.fallback)
        if s.key in seen:
            raise RuntimeError(f"fallback cycle in the registry: {seen}")


class Plan:
    """A stage bound to a problem on a device: buffers uploaded, program built, ready to enqueue."""

    def __init__(self, op: str, stage, problem: Problem, ctx: cl.Context, defines: dict | None, guard: bool):
        self.op, self.problem, self.ctx, self.guard = op, problem, ctx, guard
        self.requested = get_stage(op, stage)
        self.stage, self.defines = resolve(op, stage, problem, ctx, defines)
        self.queue = get_queue(ctx)
        dev = ctx.devices[0]
        s, p = self.stage, problem
        jit = {**p.defines, **self.defines, **(s.jit(p, self.defines) if s.jit else {})}
        self.jit_defines = jit

        scratch = s.scratch(p, self.defines) if s.scratch else {}
        sizes = {name: a.nbytes for name, a in p.inputs.items() if name not in p.aliases}
        sizes.update({name: 4 * int(np.prod(shape)) for name, shape in p.outputs.items()})
        sizes.update({name: 4 * int(n) for name, n in scratch.items()})
        for name, nbytes in sizes.items():
            if nbytes > dev.max_mem_alloc_size:
                raise ValueError(f"{name} needs {nbytes / 2**20:,.0f} MiB but {dev.name.strip()} allocates at "
                                 f"most {dev.max_mem_alloc_size / 2**20:,.0f} MiB in one buffer; use a smaller "
                                 f"batch or size")
        if sum(sizes.values()) > dev.global_mem_size:
            raise ValueError(f"the tensors need {sum(sizes.values()) / 2**30:.2f} GiB, more than the "
                             f"{dev.global_mem_size / 2**30:.2f} GiB of {dev.name.strip()}; use a smaller batch")

        source = s.source(jit) if s.source else None
        self.program = build(ctx, s.kernel, jit, source=source)

        self.arrays: dict[str, DeviceArray] = {}
        for name, arr in p.inputs.items():
            if name in p.aliases:
                continue
            self.arrays[name] = DeviceArray(ctx, self.queue, name, arr.shape, arr, guard, True)
        for name, shape in p.outputs.items():
            self.arrays[name] = DeviceArray(ctx, self.queue, name, shape, None, guard, False)
        for name, n in scratch.items():
            self.arrays[name] = DeviceArray(ctx, self.queue, name, (int(n),), None, False, False)
        for name, target in p.aliases.items():
            self.arrays[name] = self.arrays[target]

        if s.steps is not None:
            self.steps = list(s.steps(self))
        else:
            gsize, lsize = s.geometry(p, self.defines)
            args = tuple(p.inputs) + tuple(p.outputs) + tuple(p.scalars)
            self.steps = [Step(s.entry or op, gsize, lsize, args)]
        self._bound = [self._bind(step, dev) for step in self.steps]

    def _bind(self, step: Step, dev) -> tuple:
        k = kernel(self.program, step.kernel)
        if step.local_size is not None:
            wg = int(np.prod(step.local_size))
            limit = k.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, dev)
            if wg > limit:
                raise ValueError(f"stage {self.stage.key}: work-group of {wg} work-items, but kernel "
                                 f"{step.kernel} allows at most {limit} on {dev.name.strip()}; lower WG")
            for g, l in zip(step.global_size, step.local_size):
                if g % l:
                    raise RuntimeError(f"registry bug: global size {step.global_size} is not a multiple "
                                       f"of the work-group {step.local_size}")
        values = []
        for a in step.args:
            if isinstance(a, str):
                if a in self.arrays:
                    values.append(self.arrays[a].buffer)
                elif a in self.problem.scalars:
                    values.append(np.int32(self.problem.scalars[a]))
                else:
                    raise RuntimeError(f"registry bug: step argument {a!r} is neither a tensor nor a scalar")
            else:
                values.append(a)
        k.set_args(*values)
        return k, step.global_size, step.local_size

    def enqueue(self) -> list:
        """Launch every kernel of the stage once; the events carry the profiling times."""
        return [cl.enqueue_nd_range_kernel(self.queue, k, g, l) for k, g, l in self._bound]

    def outputs(self) -> dict:
        return {name: self.arrays[name].read(self.queue) for name in self.problem.outputs}

    def check_guards(self) -> None:
        for name, arr in self.arrays.items():
            if name not in self.problem.aliases:
                arr.check_guards(self.queue)

    def result(self):
        """What run_stage returns: the outputs, read back (after a guard check when guarded)."""
        self.queue.finish()
        if self.guard:
            self.check_guards()
        return self.problem.result(self.outputs())


def prepare(op: str, **kwargs) -> Problem:
    """Validate an operation's arguments (raises TypeError/ValueError naming the problem)."""
    return op_module(op).prepare(**kwargs)


def plan_stage(op: str, stage, *, ctx=None, defines: dict | None = None, guard: bool = False, **kwargs) -> Plan:
    problem = prepare(op, **kwargs)
    return Plan(op, stage, problem, get_context(ctx), defines, guard)


def run_stage(op: str, stage, *, ctx=None, defines: dict | None = None, guard: bool = False, **kwargs):
    """Run one stage of an operation once and return its result as NumPy array(s).

    ``stage``: name or number (see stage_names(op)); ``ctx``: a context, device or selector
    (default: COURSE_DEVICE, PYOPENCL_CTX, else a GPU, else the CPU); ``defines``: JIT
    parameters overriding the stage's defaults; ``guard``: surround tensors with guard zones and
    check them. The other keyword arguments are the operation's (see helpers/ops/<op>.py).
    """
    plan = plan_stage(op, stage, ctx=ctx, defines=defines, guard=guard, **kwargs)
    plan.enqueue()
    return plan.result()
