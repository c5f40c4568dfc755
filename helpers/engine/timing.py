"""The one benchmark helper: profiling events, warm-up, repeats, median and spread.

    t = time_plan(plan, warmup=3, repeats=20)
    t.median_ms, t.q1_ms, t.q3_ms     # spread as the inter-quartile range

Each repetition's time is the device's own (profiling events: end of the last kernel of the
stage minus start of the first), not the host's wall clock. On GPUs a buffer larger than the
last-level cache is overwritten between repetitions, so no repetition finds its inputs already
cached by the previous one (a real network's layer does not either).

time_plan and time_steps serve both backends (a plan times itself with its backend's events);
the functions below them that take an OpenCL queue import pyopencl when they run, so a CUDA
plan is timed without it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyopencl as cl


@dataclass
class Timing:
    times_ms: list = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return float(np.median(self.times_ms))

    @property
    def q1_ms(self) -> float:
        return float(np.percentile(self.times_ms, 25))

    @property
    def q3_ms(self) -> float:
        return float(np.percentile(self.times_ms, 75))

    @property
    def min_ms(self) -> float:
        return float(np.min(self.times_ms))

    @property
    def max_ms(self) -> float:
        return float(np.max(self.times_ms))

    def summary(self) -> dict:
        return {"median_ms": self.median_ms, "q1_ms": self.q1_ms, "q3_ms": self.q3_ms,
                "min_ms": self.min_ms, "max_ms": self.max_ms, "repeats": len(self.times_ms)}

    def __str__(self) -> str:
        return (f"median {self.median_ms:.4g} ms (IQR {self.q1_ms:.4g}-{self.q3_ms:.4g} ms, "
                f"{len(self.times_ms)} runs)")


_flush_buffers: dict = {}


def default_flush_bytes(ctx: cl.Context) -> int:
    """GPUs: 4x the reported cache, at least 128 MiB. CPUs: 0 (PoCL's timings are long enough)."""
    from .devices import is_gpu
    dev = ctx.devices[0]
    if not is_gpu(dev):
        return 0
    return int(min(max(4 * dev.global_mem_cache_size, 128 * 2**20), dev.max_mem_alloc_size // 2))


def flush_cache(queue: cl.CommandQueue, nbytes: int):
    """Overwrite ``nbytes`` of device memory (evicting the cache); returns the event or None."""
    if nbytes <= 0:
        return None
    import pyopencl as cl
    key = (queue.context.int_ptr, nbytes)
    buf = _flush_buffers.get(key)
    if buf is None:
        buf = _flush_buffers[key] = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, nbytes)
    return cl.enqueue_fill_buffer(queue, buf, np.uint32(0), 0, nbytes)


def time_events(events) -> float:
    """Milliseconds from the start of the first event to the end of the last."""
    return (events[-1].profile.end - events[0].profile.start) * 1e-6


def time_enqueue(enqueue, queue: cl.CommandQueue, *, warmup: int = 3, repeats: int = 20,
                 flush_bytes: int | None = None) -> Timing:
    """Time ``enqueue()`` (which returns the events of one run) ``repeats`` times after warm-up."""
    if repeats < 3:
        raise ValueError("repeats must be >= 3 to report a median and a spread")
    import pyopencl as cl
    if flush_bytes is None:
        flush_bytes = default_flush_bytes(queue.context)
    for _ in range(warmup):
        enqueue()
    queue.finish()
    times = []
    for _ in range(repeats):
        flush_cache(queue, flush_bytes)
        events = enqueue()
        cl.wait_for_events(events)
        times.append(time_events(events))
    return Timing(times)


def time_plan(plan, **kwargs) -> Timing:
    """Time a Plan (helpers.plan_stage) with its backend's events (``plan.time``: time_enqueue on
    OpenCL; CUDA events in helpers/engine/backends/cuda.py), with the same warm-up and cache
    flush. A plan not checked yet is checked first (runner.check_plan): nothing wrong is ever
    timed, and a re-bound plan is checked again."""
    if kwargs.get("repeats", 20) < 3:
        raise ValueError("repeats must be >= 3 to report a median and a spread")
    if hasattr(plan, "ensure_checked"):
        plan.ensure_checked()
    if hasattr(plan, "time"):
        return Timing(plan.time(**kwargs))
    return time_enqueue(plan.enqueue, plan.queue, **kwargs)


def as_dict(timing: Timing) -> dict:
    return {**timing.summary(), "times_ms": list(timing.times_ms)} if timing.times_ms else asdict(timing)


def time_enqueue_steps(enqueue, queue: cl.CommandQueue, *, warmup: int = 3, repeats: int = 20,
                       flush_bytes: int | None = None) -> list:
    """Milliseconds of each event ``enqueue()`` returns, per repetition (one list per launch), after
    warm-up, the cache flushed before each repetition (OpenCL profiling events)."""
    if flush_bytes is None:
        flush_bytes = default_flush_bytes(queue.context)
    for _ in range(warmup):
        enqueue()
    queue.finish()
    per_step = None
    for _ in range(repeats):
        flush_cache(queue, flush_bytes)
        events = enqueue()
        queue.finish()
        per_step = per_step or [[] for _ in events]
        for times, ev in zip(per_step, events):
            times.append(time_events([ev]))
    return per_step


def time_steps(plan, *, warmup: int = 3, repeats: int = 20, flush_bytes: int | None = None) -> list:
    """Each kernel launch of a Plan timed alone by its backend's events (``plan.time_steps``), after
    the same warm-up and with the last-level cache flushed before each repetition:
    [(kernel name, Timing), ...]. A plan not checked yet is checked first, as time_plan does."""
    if repeats < 3:
        raise ValueError("repeats must be >= 3 to report a median and a spread")
    if hasattr(plan, "ensure_checked"):
        plan.ensure_checked()
    kw = dict(warmup=warmup, repeats=repeats, flush_bytes=flush_bytes)
    per_step = plan.time_steps(**kw) if hasattr(plan, "time_steps") else time_enqueue_steps(plan.enqueue, plan.queue, **kw)
    return [(step.kernel, Timing(times)) for step, times in zip(plan.steps, per_step)]
