"""Tuning candidates, each checked against the reference before it is timed: ``Trial`` runs one
stage's candidates over a list of problems (the benchmark's search and `./course tune` both time
through it), ``search`` tries every combination of a stage's tune values (``bench --tune``).
"""
from __future__ import annotations

import itertools

from .analysis.summary import geomean
from .engine.timing import time_plan
from .ops import op_module
from .runner import check_plan, device_defines, plan_problem, prepare, reference_for, resolve


class Trial:
    """A stage's tuning candidates over a list of problems: each candidate built, checked against
    the reference (computed once per problem and precision, shared through ``expected``), then
    timed. On a problem the stage runs itself with its defaults, a candidate that falls back to
    another stage (a ring too big for shared memory, say) is refused, not timed under its name."""

    def __init__(self, op: str, stage, problems: list, ctx, warmup: int, repeats: int, expected: dict | None = None):
        self.op, self.stage, self.problems, self.ctx = op, stage, problems, ctx
        self.warmup, self.repeats = warmup, repeats
        self.expected = {} if expected is None else expected
        self.own = [resolve(op, stage.name, p, ctx, None)[0].key == stage.key for p in problems]

    def times(self, defines: dict) -> list[float]:
        """Median ms per problem with ``defines``; raises for a candidate that cannot run as itself."""
        times = []
        for i, problem in enumerate(self.problems):
            plan = plan_problem(self.op, self.stage.name, problem, self.ctx, defines, guard=False)
            if self.own[i] and plan.stage.key != self.stage.key:
                need = self.stage.requires(problem, {**self.stage.defines, **defines})
                raise ValueError(f"falls back to {plan.stage.key} on {problem.label}: {need}")
            plan.enqueue()
            key = (i, plan.stage.precision)
            if key not in self.expected:
                self.expected[key] = reference_for(plan)
            check_plan(plan, self.expected[key])           # a wrong candidate is never timed
            times.append(time_plan(plan, warmup=self.warmup, repeats=max(5, self.repeats // 4)).median_ms)
        return times

    def attempt(self, defines: dict) -> dict:
        """{'defines', 'geomean_ms', 'times_ms'} or {'defines', 'error'} (a combination the device
        cannot run: too many registers, too much local memory, a fallback, ...)."""
        try:
            times = self.times(defines)
        except Exception as err:
            return {"defines": defines, "error": str(err).splitlines()[0]}
        return {"defines": defines, "geomean_ms": geomean(times), "times_ms": times}


def search(op, stage, lays, ctx, activation, warmup, repeats, bar=None, only=None) -> dict:
    """Try every combination of the stage's tune candidates, each checked before it is timed;
    keep the best geometric-mean time. ``only``: search just these parameters; the others keep
    the values recorded for this device (or the defaults), and the result holds them all."""
    mod = op_module(op)
    names = sorted(n for n in stage.tune if only is None or n in only)
    problems = [prepare(op, **mod.layer_args(lay, activation=activation)) for lay in lays]
    trial = Trial(op, stage, problems, ctx, warmup, repeats)
    tried = []
    for values in itertools.product(*(stage.tune[n] for n in names)):
        result = trial.attempt(dict(zip(names, values)))
        result.pop("times_ms", None)
        tried.append(result)
        if bar is not None and "error" not in result:
            bar.set_description(f"tuning {stage.key} {result['defines']}")
    ok = [t for t in tried if "geomean_ms" in t]
    if not ok:
        raise RuntimeError(f"no tuning candidate of {stage.key} ran: {tried}")
    best = min(ok, key=lambda t: t["geomean_ms"])
    kept = {} if only is None else {n: v for n, v in device_defines(op, stage, ctx).items() if n in stage.tune}
    return {"defines": {**kept, **best["defines"]}, "geomean_ms": best["geomean_ms"], "tried": tried,
            **({"searched": names} if only is not None else {})}
