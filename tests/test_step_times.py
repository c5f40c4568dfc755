"""helpers.chapters.notebook.step_times and switch_times: the per-kernel timings that credit each
change of a multi-kernel stage (chapters 12 and 14)."""
from types import SimpleNamespace

import helpers
from helpers.chapters.notebook import step_times, switch_times
from helpers.ops.batchnorm_forward import random_args


class FakePlan:
    """Steps and events of a stage that launches one kernel twice (none in the registry does)."""

    def __init__(self, queue):
        self.queue, self.checked = queue, False
        self.steps = [SimpleNamespace(kernel=k) for k in ("partial", "apply", "partial")]

    def ensure_checked(self):
        self.checked = True

    def enqueue(self):
        return [SimpleNamespace(profile=SimpleNamespace(start=0, end=1_000_000 * (i + 1))) for i in range(3)]


def test_step_times_keeps_a_repeated_kernel_apart_and_checks_first(ctx):
    plan = FakePlan(helpers.get_queue(ctx))
    t = step_times(plan, repeats=3, warmup=1)
    assert plan.checked
    assert list(t) == ["partial", "apply", "partial (2)"]
    assert [v["median_ms"] for v in t.values()] == [1.0, 2.0, 3.0]


def test_switch_times_times_each_setting_kernel_by_kernel(ctx):
    t = switch_times("batchnorm_forward", "fused", "REVERSE", ctx, repeats=3, **random_args(2, 3, 5, 7, seed=1))
    assert set(t) == {0, 1}
    assert list(t[0]) == list(t[1]) and len(t[0]) == 2           # stage 05: two kernels
    assert all(v["q1_ms"] <= v["median_ms"] <= v["q3_ms"] for kernels in t.values() for v in kernels.values())
