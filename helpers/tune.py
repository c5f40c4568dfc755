"""`./course tune`: search the stages' JIT parameters on your own device, within a time budget.

    ./course tune                       # about 10 minutes: auto's candidates first, then the other ops
    ./course tune --budget 3            # a shorter search; `./course tune` again goes on from there
    ./course tune --show                # what each stage builds with on this device, and from where
    ./course tune --commit              # also write the values into results/tuned.json (recording a GPU)

Where the values start: what the device has already (helpers/tuned_values.py: its own values, else
those of the closest recorded device, else the registry's defaults). The order: the input
gradient's float32 stages, the ones stage ``auto`` chooses among, come first, each timed once at
its starting values and then tuned fastest first: the fastest stage is the one auto picks, so its
tuning is the likeliest to pay. Then the other operations' stages the same way. Each stage is tuned
one parameter at a time (every candidate value of one parameter with the others fixed, the best
kept, then the next parameter), in rounds until a round changes nothing. Every candidate is checked
against the reference before it is timed, on the layers of a full set on a GPU (ResNet-50's for
the convolutions) and of a small one on a CPU.

What is found goes into your own cache after every candidate (tuned_values.user_cache(), outside the
checkout), where run_stage reads it at once, and stage auto times its candidates again under the
new values. The search stops before a candidate that would end past the budget (judged by the
median candidate so far). Ctrl-C stops it too; nothing tried is lost, and `./course tune` resumes
with what was left of the budget.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path

from . import tuned_values
from .tuning_trials import Trial
from .engine.devices import NoDeviceError, describe, get_context
from .engine.progress import progress as progress_bar
from .ops import op_module
from .ops.layers import layer_set, op_layers
from .runner import device_tuning, prepare
from .stages import REGISTRY

OPS = ("conv_dgrad", "conv_wgrad", "conv_forward", "batchnorm_forward", "batchnorm_backward", "gemm")
SETS = {True: {"conv": "resnet50", "gemm": "gemm", "batchnorm": "bn"},        # on a GPU
        False: {"conv": "small", "gemm": "gemm_small", "batchnorm": "bn_small"}}
DEFAULT_MINUTES = 10


class OutOfTime(Exception):
    """The next candidate would end past the budget."""


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def key_of(defines: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(defines.items()))


def phases(ops=OPS, names=None) -> list[tuple[str, list]]:
    """(op, stages) in the order they are tuned: the input gradient's float32 OpenCL stages (auto's
    candidates) first, then the other ops', then the input gradient's other precisions."""
    def pick(op, keep):
        return [s for s in REGISTRY[op] if s.backend == "opencl" and s.tune and not s.choose and keep(s)
                and (names is None or s.name in names)]
    out = [(op, pick(op, lambda s: op != "conv_dgrad" or s.precision == "fp32")) for op in ops]
    if "conv_dgrad" in ops:
        out.append(("conv_dgrad", pick("conv_dgrad", lambda s: s.precision != "fp32")))
    return [(op, stages) for op, stages in out if stages]


class Budget:
    """Seconds to spend: a progress bar over them, each candidate's cost kept to judge the next."""

    def __init__(self, seconds: float, progress: bool):
        self.seconds, self.start = seconds, time.perf_counter()
        self.costs: list = []
        self.bar = progress_bar(max(1, round(seconds)), progress, "tune")
        self.shown = 0

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def check(self) -> None:
        # the median candidate, or the last one if slower: a stage's candidates cost alike
        typical = max(sorted(self.costs)[len(self.costs) // 2], self.costs[-1]) if self.costs else 0.0
        if self.elapsed() + typical > self.seconds:
            raise OutOfTime

    def spent(self, seconds: float, what: str) -> None:
        self.costs.append(seconds)
        self.bar.set_description(f"tune: {what}")
        step = min(round(self.elapsed()), round(self.seconds)) - self.shown
        if step > 0:
            self.bar.update(step)
            self.shown += step


class Tuner:
    """One device's search, kept in the learner's cache after every candidate."""

    def __init__(self, ctx, cache: Path, budget: Budget, run: dict):
        self.ctx, self.cache, self.budget, self.run = ctx, cache, budget, run
        self.device = describe(ctx.devices[0])
        self.entries = tuned_values.read(cache).get(self.device["name"], {})

    def entry(self, op: str, stage) -> dict:
        return self.entries.get(op, {}).get(stage.key, {})

    def start_values(self, op: str, stage) -> dict:
        """The stage's tunable parameters as it builds now (its own, inherited or default values)."""
        d = {**stage.defines, **device_tuning(op, stage, self.ctx).defines}
        return {n: d[n] for n in stage.tune if n in d}

    def attempt(self, op: str, trial: Trial, defines: dict, lset: str) -> dict:
        """A candidate's result: from the cache when tried before, else checked, timed and saved."""
        tried = self.entry(op, trial.stage).get("tried", {})
        k = key_of(defines)
        if k in tried:
            return tried[k]
        self.budget.check()
        t = time.perf_counter()
        result = trial.attempt(defines)
        result.pop("times_ms", None)
        self.budget.spent(time.perf_counter() - t, f"{op} {trial.stage.name} {k}")
        tried = {**tried, k: result}
        ok = [r for r in tried.values() if "geomean_ms" in r]
        best = min(ok, key=lambda r: r["geomean_ms"]) if ok else None
        self.save(op, trial.stage, {"tried": tried, "layer_set": lset, "done": False,
                                    **({"defines": best["defines"], "geomean_ms": best["geomean_ms"]} if best else {})})
        return result

    def save(self, op: str, stage, entry: dict) -> None:
        entry = {**entry, "date": now()}
        self.entries.setdefault(op, {})[stage.key] = entry
        self.run["spent_s"] = round(self.budget.elapsed(), 1)
        runs = {**read_runs(self.cache), self.device["name"]: self.run}
        tuned_values.record(self.cache, self.device, {op: {stage.key: entry}}, {"runs": runs})


def read_runs(cache: Path) -> dict:
    return json.loads(cache.read_text()).get("runs", {}) if cache.is_file() else {}


def coordinate_search(tuner: Tuner, op: str, trial: Trial, start: dict, lset: str) -> tuple[dict, float]:
    """One parameter at a time from ``start``, in rounds until a round changes nothing; returns
    the best defines and their geometric-mean time (inf if no candidate ran)."""
    best = dict(start)
    best_ms = tuner.attempt(op, trial, best, lset).get("geomean_ms", float("inf"))
    changed = True
    while changed:
        changed = False
        for name in sorted(trial.stage.tune):
            for value in trial.stage.tune[name]:
                ms = tuner.attempt(op, trial, {**best, name: value}, lset).get("geomean_ms", float("inf"))
                if ms < best_ms:
                    best, best_ms, changed = {**best, name: value}, ms, True
    return best, best_ms


def tune_op(tuner: Tuner, op: str, stages: list, lset: str, say) -> None:
    """Time each stage once at its start values, then tune them fastest first."""
    problems = [prepare(op, **op_module(op).layer_args(lay)) for lay in layer_set(lset)]
    expected: dict = {}                          # the reference of each layer, computed once
    trials = {s.key: Trial(op, s, problems, tuner.ctx, 2, 20, expected) for s in stages}
    start = {}
    for s in stages:
        if not tuner.entry(op, s).get("done"):
            start[s.key] = tuner.attempt(op, trials[s.key], tuner.start_values(op, s), lset).get("geomean_ms",
                                                                                                 float("inf"))
    for key in sorted(start, key=start.get):
        trial = trials[key]
        values = tuner.start_values(op, trial.stage)
        best, best_ms = coordinate_search(tuner, op, trial, values, lset)
        entry = tuner.entry(op, trial.stage)
        tuner.save(op, trial.stage, {**entry, "done": True, **({"defines": best, "geomean_ms": best_ms}
                                                               if best_ms < float("inf") else {})})
        say(f"  {op} {key}: {start[key]:.4f} -> {best_ms:.4f} ms, geometric mean over {lset} "
            f"({', '.join(f'{n}={v}' for n, v in sorted(best.items()))})")


def tune(ctx, seconds: float, ops=OPS, names=None, layers: str | None = None, cache: Path | None = None,
         progress: bool = True, say=print) -> dict:
    """Search within ``seconds`` (see the module's docstring); returns the run's record."""
    cache = cache or tuned_values.user_cache()
    budget = Budget(seconds, progress)
    name = describe(ctx.devices[0])["name"]
    history = read_runs(cache).get(name, {}).get("history", [])      # the earlier searches on this device
    run = {"budget_s": round(seconds, 1), "started": now(), "spent_s": 0.0, "stopped": "", "history": history}
    tuner = Tuner(ctx, cache, budget, run)
    gpu = tuner.device["type"] == "GPU"
    try:
        for op, stages in phases(ops, names):
            kind, _ = op_layers(op_module(op))
            lset = layers if layers and kind == "conv" else SETS[gpu][kind]
            tune_op(tuner, op, stages, lset, say)
        run["stopped"] = "done: every stage's search converged"
    except OutOfTime:
        run["stopped"] = "budget: the next candidate would have ended past it"
    except KeyboardInterrupt:
        run["stopped"] = "interrupted"
    finally:
        budget.bar.close()
        run["spent_s"] = round(budget.elapsed(), 1)
        run["history"] = history + [{k: run[k] for k in ("started", "budget_s", "spent_s", "stopped")}]
        tuned_values.record(cache, tuner.device, {}, {"runs": {**read_runs(cache), tuner.device["name"]: run}})
    return run


def show(ctx, ops=OPS) -> str:
    """Each tunable stage's parameters on this device and where they come from."""
    lines = []
    for op, stages in phases(ops):
        for s in stages:
            t = device_tuning(op, s, ctx)
            values = {**s.defines, **t.defines}
            lines.append(f"{op:<20} {s.key:<22} {', '.join(f'{n}={values[n]}' for n in sorted(s.tune)):<60} {t.source}")
    return "\n".join(lines)


def commit(device: dict, cache: Path) -> int:
    """Copy the device's tuned values from the learner's cache into results/tuned.json."""
    entries = {op: {key: {k: e[k] for k in ("defines", "layer_set", "date") if k in e}
                    for key, e in stages.items() if "defines" in e}
               for op, stages in tuned_values.read(cache).get(device["name"], {}).items() if op != "describe"}
    tuned_values.record(tuned_values.TUNED, device, entries)
    return sum(len(v) for v in entries.values())


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="./course tune", description=__doc__.split("\n")[0],
                                 epilog="\n".join(__doc__.split("\n")[2:7]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=None,
                    help=f"minutes to search (default {DEFAULT_MINUTES}); after an interrupted search, no budget or "
                         f"the same one resumes it with what it had left")
    ap.add_argument("--device", default=None, help="'P:D', a kind, a vendor or part of a name (default: "
                                                   "COURSE_DEVICE, else a GPU)")
    ap.add_argument("--ops", default=None, help=f"comma-separated operations (default: {','.join(OPS)})")
    ap.add_argument("--stages", default=None, help="comma-separated stage names: only these")
    ap.add_argument("--layers", default=None, help="the convolutions' layer set (default resnet50 on a GPU, small on a CPU)")
    ap.add_argument("--show", action="store_true", help="print what each stage builds with here, and from where; tune nothing")
    ap.add_argument("--commit", action="store_true", help="also write this device's values into results/tuned.json")
    return ap


def main(argv=None) -> int:
    """The command line: one line on stderr for a mistake (exit status 2), never a traceback."""
    try:
        return _main(argv)
    except (ValueError, NoDeviceError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _main(argv=None) -> int:
    a = parser().parse_args(argv)
    ops = tuple(o.strip() for o in a.ops.split(",")) if a.ops else OPS
    for op in ops:
        if op not in OPS:
            raise ValueError(f"--ops {op}: the operations tuned are {', '.join(OPS)}")
    names = {n.strip() for n in a.stages.split(",")} if a.stages else None
    if names:
        known = {s.name for _, stages in phases(ops) for s in stages}
        if names - known:
            raise ValueError(f"--stages {','.join(sorted(names - known))}: no stage of {', '.join(ops)} has "
                             f"parameters to tune by that name; those that do: {', '.join(sorted(known))}")
    if a.layers:
        layer_set(a.layers, "conv_dgrad")
    if a.budget is not None and not a.budget > 0:
        raise ValueError(f"--budget {a.budget:g}: the minutes to search, more than 0 (default {DEFAULT_MINUTES})")
    if tuned_values.ignored():
        raise ValueError("COURSE_TUNED=none leaves every tuned value out; unset it to tune")
    ctx = get_context(a.device)
    device = describe(ctx.devices[0])
    cache = tuned_values.user_cache()
    if a.show:
        print(show(ctx, ops))
        return 0
    last = read_runs(cache).get(device["name"], {})
    if last.get("stopped") == "interrupted" and (a.budget is None or 60 * a.budget == last["budget_s"]):
        seconds = max(0.0, last["budget_s"] - last["spent_s"])
        print(f"resuming the search interrupted after {last['spent_s'] / 60:.1f} of {last['budget_s'] / 60:.1f} "
              f"minutes: {seconds / 60:.1f} left")
    else:
        seconds = 60 * (a.budget or DEFAULT_MINUTES)
    print(f"tuning on {device['name']} ({device['arch']}) for up to {seconds / 60:.1f} minutes; "
          f"values go to {cache} as they are found")
    wall = time.perf_counter()
    run = tune(ctx, seconds, ops, names, a.layers, cache, progress=sys.stderr.isatty())
    print(f"searched {run['spent_s'] / 60:.1f} minutes ({(time.perf_counter() - wall) / 60:.1f} of wall time); "
          f"stopped: {run['stopped']}")
    if run["stopped"] == "interrupted":
        print("`./course tune` resumes with the rest of the budget")
    elif not run["stopped"].startswith("done"):
        print("`./course tune` again goes on with the stages not yet converged")
    if a.commit:
        print(f"wrote {commit(device, cache)} stages' values for {device['name']} into {tuned_values.TUNED}")
    return 130 if run["stopped"] == "interrupted" else 0


if __name__ == "__main__":
    sys.exit(main())
