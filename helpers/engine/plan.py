"""What a plan is on either backend: launches described, tensors held, bound, read back, guarded.

The running layer (helpers/runner.py) decides everything that depends on the registry and the
operation: which stage runs, with which JIT parameters, as which launches (``Step``s) over which
scratch buffers (``Workspace``s), from which source, and how its outputs are checked. It hands
that over as a ``PlanSpec`` to a backend's plan class (backends/opencl.py: ClPlan,
backends/cuda.py: CudaPlan), which builds the kernels and makes the tensors. ``Plan`` holds what
the two share: one device tensor per input, output and workspace (a caller's tensors used where
they are), ``tensor`` and ``bind``, outputs read back, guard checks, and nothing timed before it
was checked once. A backend's class adds its memory limits, the build, its tensor class
(``tensor_class``, ``_new``), how kernel arguments are set (``_bind``, ``_rebind``), and
``enqueue``, ``time`` and ``time_steps``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .tensor import Tensor


class DeviceLimitError(ValueError):
    """A configuration this device cannot launch (more work-items per group than the compiled
    kernel allows here); raised before any launch. Another device, or other JIT parameters, may run it."""


class GuardViolation(AssertionError):
    """A kernel wrote outside its tensors, or into an input."""


@dataclass(frozen=True)
class Step:
    """One kernel launch: kernel name, grid of work-items (global size), block (work-group) and
    the arguments: tensor or scalar names of the problem, workspace names, or typed NumPy scalars."""
    kernel: str
    global_size: tuple
    local_size: tuple | None
    args: tuple
    shared: int = 0        # CUDA: bytes of dynamic shared memory per block (0: none)


@dataclass(frozen=True)
class TensorMap:
    """A kernel argument of a CUDA stage that copies by Hopper's Tensor Memory Accelerator: the
    address of a tensor map made on the host for ``tensor`` (a tensor or workspace name) viewed
    as a contiguous array of extents ``dims`` (innermost first), read in boxes of ``box``
    elements, a box written to shared memory with the 128-byte swizzle, or without it (``swizzle``
    False: the box lies densely, as a TMA store reads it) (helpers/engine/backends/cuda.py:
    tensor_map)."""
    tensor: str
    dims: tuple
    box: tuple
    swizzle: bool = True


@dataclass(frozen=True)
class Workspace:
    """A scratch buffer of a stage: element type and number of elements."""
    dtype: str
    count: int

    @property
    def nbytes(self) -> int:
        return np.dtype(self.dtype).itemsize * int(self.count)


@dataclass
class PlanSpec:
    """A stage resolved for a problem, before any device work (helpers/runner.py makes it)."""
    op: str
    requested: object          # the Stage asked for (helpers/stages: Stage)
    stage: object              # the Stage that runs (after fallbacks and stage auto's choice)
    problem: object            # the validated arguments (helpers/ops/problem.py: Problem)
    defines: dict              # the stage's JIT parameters (registry < tuned < the caller's)
    jit_defines: dict          # everything it is built with (the problem's, derived ones too)
    path: str                  # "fast", "general", "only" or "fallback" (runner.path_taken)
    steps: list                # [Step, ...]: its launches in order
    workspace: dict            # {name: Workspace}: its scratch buffers
    source: str | None         # generated kernel text, or None: the kernel file as it is
    dtype: str                 # what its tensors are stored in (engine/tensor.py: STORAGE)
    check: Callable            # plan -> CheckResult: its outputs against the reference
    tuned_source: str = ""     # where its JIT parameters come from, in words (helpers/tuned_values.py)


def out_dtype(inputs: dict, dtype: str):
    """NumPy out in the inputs' precision: float16 when the caller gave float16 to a float16
    stage, else float32 (bfloat16 is returned as float32, exactly)."""
    given16 = any(getattr(a, "dtype", None) in ("float16", np.float16) for a in inputs.values())
    return np.float16 if given16 and dtype == "float16" else np.float32


class Plan:
    """The plan of a stage on either backend: the spec's fields as attributes (``stage``,
    ``jit_defines``, ``steps``, ``path``...), the device tensors, and what a caller does with them."""
    backend = ""
    label = ""              # the backend as messages name it ("OpenCL", "CUDA")
    tensor_class = Tensor
    checked = False
    faults: tuple = ()      # the errors by which the backend reports a kernel that faulted (check_stage)

    def __init__(self, spec: PlanSpec, ctx, guard: bool):
        self.op, self.requested, self.stage, self.problem = spec.op, spec.requested, spec.stage, spec.problem
        self.defines, self.jit_defines, self.path = spec.defines, spec.jit_defines, spec.path
        self.steps, self.workspace, self.source, self.dtype = spec.steps, spec.workspace, spec.source, spec.dtype
        self._check, self.ctx, self.guard = spec.check, ctx, guard
        self.tuned_source = spec.tuned_source
        for name, a in self.problem.inputs.items():
            if isinstance(a, Tensor):
                self._given(name, a, self.dtype)

    @classmethod
    def check_backends(cls, inputs: dict, key: str) -> None:
        """Refuse, before anything is resolved or built, a device tensor of another backend."""
        for name, t in inputs.items():
            if isinstance(t, Tensor) and t.backend != cls.backend:
                raise TypeError(f"{name}: stage {key} runs on {cls.label}, but the {type(t).__name__} given "
                                f"lives on {t.backend_label}; "
                                f"pass a NumPy array or a {cls.tensor_class.__name__}")

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

    def _given(self, name: str, t: Tensor, dtype: str) -> Tensor:
        """A caller's device tensor for ``name``, checked against what the stage reads or writes."""
        self.check_backends({name: t}, self.requested.key)
        self._check_device(name, t)
        if t.dtype != dtype:
            raise TypeError(f"{name}: stage {self.stage.key} reads {dtype} tensors, got a {t.dtype} "
                            f"device tensor; pass a NumPy array (converted on upload) or a {dtype} tensor")
        return t

    def _values(self, step: Step, tensor_map: Callable | None = None) -> tuple:
        """A step's kernel arguments: tensors by name (their ``buffer``: an OpenCL buffer or a CuPy
        array), the problem's int32 scalars by name, typed literals as they are, tensor maps made
        by ``tensor_map`` (CUDA: a device copy of the map, kept with the launch)."""
        values = []
        for a in step.args:
            if isinstance(a, TensorMap):
                values.append(tensor_map(self.arrays[a.tensor], a.dims, a.box, a.swizzle))
            elif not isinstance(a, str):
                values.append(a)
            elif a in self.arrays:
                values.append(self.arrays[a].buffer)
            elif a in self.problem.scalars:
                values.append(np.int32(self.problem.scalars[a]))
            else:
                raise RuntimeError(f"registry bug: step argument {a!r} is neither a tensor nor a scalar")
        return tuple(values)

    def _check_grid(self, step: Step, block_word: str) -> None:
        for g, l in zip(step.global_size, step.local_size):
            if g % l:
                raise RuntimeError(f"registry bug: global size {step.global_size} is not a multiple "
                                   f"of the {block_word} {step.local_size}")

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
        to = out_dtype(self.problem.inputs, self.dtype)
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

    def fault_report(self, err: Exception) -> str:
        """What a fault (one of ``faults``) means and what to do."""
        return f"stopped with a fault on the device ({err})"

    def ensure_checked(self) -> None:
        """Run once and check against the reference, unless that was done already (time_plan
        calls it, so every configuration that is timed was checked first)."""
        if not self.checked:
            self.enqueue()
            self._check(self)
