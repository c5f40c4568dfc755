"""CUDA stages run on the CPU by the emulator (helpers/engine/backends/emulated.py), checked by the
one checker: what the tests use where there is no NVIDIA GPU.

    result = check_emulated("conv_dgrad", "tc_fp16", guard=True, **problem)   # a CheckResult, or raises

An EmulatedPlan is a plan like a backend's (helpers/engine/plan.py: Plan) from the same PlanSpec
(runner.specify): the same resolution of the stage and its fallback, the same Steps and
workspaces from the stage's launch family, the same tensors with guard zones, the same reference
and tolerance (runner.check_plan); only the launches differ, each kernel built with g++ and run on
the host. The registry's defines are used (no device was tuned for), overridden by ``defines``.
Not timed: the emulator says what a kernel computes, not how fast.
"""
from __future__ import annotations

from .engine.backends import emulated
from .engine.check import CheckResult
from .engine.plan import Plan, PlanSpec, Step
from .runner import check_plan, prepare, specify
from .stages import get_stage


class EmulatedPlan(Plan):
    """A CUDA stage bound to a problem, its kernels built for the CPU: enqueue runs them to the end."""
    backend, label, tensor_class = "cuda", "CUDA (emulated on the CPU)", emulated.HostTensor

    class _Queue:
        @staticmethod
        def finish():
            """Launches run when enqueued: nothing is pending."""

    def __init__(self, spec: PlanSpec, guard: bool = False, schedule: str = "lazy"):
        if schedule not in emulated.SCHEDULES:
            raise ValueError(f"the schedule is one of {', '.join(emulated.SCHEDULES)}, not {schedule!r}")
        self.queue, self.schedule = self._Queue(), schedule
        super().__init__(spec, emulated.DEVICE, guard)
        s = self.stage
        for st in self.steps:
            if st.shared > emulated.DYNAMIC_SHARED_BYTES:
                raise emulated.EmulationError(f"stage {s.key}: {st.shared:,} bytes of dynamic shared memory, more "
                                              f"than the {emulated.DYNAMIC_SHARED_BYTES:,} a Hopper block may use")
        self.library = emulated.build(s.kernel, self.jit_defines, [st.kernel for st in self.steps],
                                      source=self.source, arch=s.arch)
        self._make_tensors()
        self._bound = [self._bind(step) for step in self.steps]

    def _new(self, name: str, shape: tuple, host, is_input: bool, dtype: str) -> emulated.HostTensor:
        return emulated.HostTensor(name, shape, host, self.guard, is_input, dtype)

    def _check_device(self, name: str, t) -> None:
        if not isinstance(t, emulated.HostTensor):
            raise TypeError(f"{name}: an emulated stage takes NumPy arrays or HostTensors, not a {type(t).__name__}")

    def _bind(self, step: Step) -> tuple:
        block = tuple(int(v) for v in step.local_size) + (1,) * (3 - len(step.local_size))
        glob = tuple(int(v) for v in step.global_size) + (1,) * (3 - len(step.global_size))
        self._check_grid(step, "block")
        return step, tuple(g // b for g, b in zip(glob, block)), block

    def _rebind(self, names: set, t) -> None:
        """Arguments are read from the bound tensors at each launch: nothing to do."""

    def enqueue(self) -> list:
        """Run every kernel of the stage once, in order, on the host."""
        for step, grid, block in self._bound:
            self.library.launch(step.kernel, grid, block, self._values(step, emulated.tensor_map), self.schedule)
        return []

    def time(self, **kwargs) -> list:
        raise RuntimeError("an emulated stage is checked, not timed: the CPU says nothing of the GPU's speed")

    time_steps = time


def emulate_stage(op: str, stage, *, defines: dict | None = None, guard: bool = False,
                  workspace_limit: int | None = None, schedule: str = "lazy", **kwargs) -> EmulatedPlan:
    """Validate, resolve, build for the CPU, upload and run once: the plan, its outputs ready.
    ``schedule``: "lazy" or "eager" (emulated.Library.launch)."""
    problem = prepare(op, **kwargs)
    s = get_stage(op, stage)
    if s.backend != "cuda":
        raise ValueError(f"stage {s.key} of {op} is an OpenCL stage: the emulator runs CUDA stages "
                         f"(OpenCL stages run on the CPU through PoCL)")
    EmulatedPlan.check_backends(problem.inputs, s.key)
    plan = EmulatedPlan(specify(op, stage, problem, emulated.DEVICE, defines, workspace_limit), guard, schedule)
    plan.enqueue()
    return plan


def check_emulated(op: str, stage, *, defines: dict | None = None, guard: bool = False, schedule: str = "lazy",
                   **kwargs) -> CheckResult:
    """Run a CUDA stage on the CPU and check it as check_stage checks a stage: guard zones (with
    ``guard``), then every output against the reference (runner.check_plan); raises on a mismatch."""
    plan = emulate_stage(op, stage, defines=defines, guard=guard, schedule=schedule, **kwargs)
    if guard:
        plan.check_guards()
    return check_plan(plan)
