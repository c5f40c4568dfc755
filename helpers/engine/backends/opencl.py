"""The OpenCL backend: device tensors and plans on a pyopencl context.

Its services live beside it in the engine: choosing the device (engine/devices.py), building
programs (engine/build.py), profiling-event timing (engine/timing.py). Here: ``DeviceTensor``
(engine/tensor.py's interface, on one context and its in-order queue) and ``ClPlan`` (a stage
bound to a problem: buffers uploaded, program built, kernel arguments set, ready to enqueue).
pyopencl is imported here, by devices.py and build.py, and inside timing.py's event timing: nothing
a CUDA stage needs imports these (tests/test_backends.py runs the CUDA path with pyopencl absent).
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from ..build import build
from ..devices import describe, fault_report, get_context, get_queue
from ..plan import DeviceLimitError, Plan, PlanSpec, Step
from ..tensor import Tensor, check_host, default_dtype
from ..timing import time_enqueue, time_enqueue_steps


class DeviceTensor(Tensor):
    """A tensor on an OpenCL device, on one context and the in-order queue its launches use."""
    backend, backend_label = "opencl", "OpenCL"

    def __init__(self, ctx, queue, name: str, shape: tuple, host: np.ndarray | None = None,
                 guard: bool = False, is_input: bool = False, dtype: str = "float32", layout: str = "NCHW"):
        self.ctx, self.queue = ctx, queue
        self._lay_out(name, shape, host, guard, is_input, dtype, layout,
                      align=ctx.devices[0].mem_base_addr_align // 8)

    @classmethod
    def from_array(cls, ctx, array: np.ndarray, dtype: str | None = None, layout: str = "NCHW",
                   guard: bool = False, name: str = "tensor", queue=None) -> "DeviceTensor":
        """Upload ``array`` (a float32 or float16 NumPy array, converted to ``dtype``; default: its
        own): the rule of run_stage's arguments (check_host)."""
        check_host("array", array, dtype, "DeviceTensor.from_array")
        return cls(ctx, queue or get_queue(ctx), name, array.shape, array, guard, True,
                   dtype or default_dtype(array), layout)

    def _allocate(self, count: int):
        return cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, count * self.storage.itemsize)

    def _view(self, parent, offset: int, count: int):
        return parent.get_sub_region(offset * self.storage.itemsize, count * self.storage.itemsize)

    def _transfer(self, dest, src) -> None:
        cl.enqueue_copy(self.queue, dest, src)


class ClPlan(Plan):
    """A stage bound to a problem on an OpenCL device: buffers uploaded, program built, ready to enqueue."""
    backend, label, tensor_class = "opencl", "OpenCL", DeviceTensor
    faults = (cl.Error,)     # how a GPU reports a kernel that faulted (wrong values are the checker's)

    @staticmethod
    def context(ctx, inputs: dict) -> cl.Context:
        """The context a stage runs on: ``ctx`` (a context, device or selector), else that of a
        device tensor given, else the course's choice (engine/devices.py)."""
        if ctx is None:
            ctx = next((a.ctx for a in inputs.values() if isinstance(a, DeviceTensor)), None)
        return get_context(ctx)

    @staticmethod
    def describe(ctx: cl.Context) -> dict:
        """The device as tuned values are matched (helpers/tuned_values.py)."""
        return describe(ctx.devices[0])

    def __init__(self, spec: PlanSpec, ctx: cl.Context, guard: bool):
        given = [t for t in spec.problem.inputs.values() if isinstance(t, DeviceTensor)]
        self.queue = given[0].queue if given else get_queue(ctx)   # a chain runs on one in-order queue
        super().__init__(spec, ctx, guard)
        dev = ctx.devices[0]
        p = self.problem
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
        self.program = build(ctx, self.stage.kernel, self.jit_defines, source=self.source)
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
            sizes = dev.max_work_item_sizes          # per dimension (NVIDIA: 1024, 1024, 64)
            for axis, (n, most) in enumerate(zip(step.local_size, sizes)):
                if n > most:
                    raise DeviceLimitError(f"stage {self.stage.key}: work-group {tuple(step.local_size)} has {n} "
                                           f"work-items along dimension {axis}, but {dev.name.strip()} allows at "
                                           f"most {most} there ({tuple(sizes)})")
            if any(g < 1 for g in step.global_size):
                raise RuntimeError(f"registry bug: stage {self.stage.key}'s kernel {step.kernel} is launched "
                                   f"over an empty grid {tuple(step.global_size)}")
            self._check_grid(step, "work-group")
        k.set_args(*self._values(step))
        return k, step.global_size, step.local_size

    def _rebind(self, names: set, t: DeviceTensor) -> None:
        for k, args in self._args:
            for i, a in enumerate(args):
                if a in names:
                    k.set_arg(i, t.buffer)

    def fault_report(self, err: Exception) -> str:
        return fault_report(self.ctx, err)

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
