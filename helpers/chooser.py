"""Stage ``auto``: choose an algorithm per device and layer shape under a workspace limit.

The course's counterpart of cudnnFind with a workspace limit: the first time a device meets a
layer shape, every other registered OpenCL stage of the op that can run the problem and whose
workspace fits the budget is checked and timed once (the same profiling-event timing as the
benchmark), the fastest is written to an on-disk cache keyed by device name, shape and budget,
and that stage runs; later runs read the cache and run the winner at once. The budget is the
engine's one workspace limit, in bytes (``workspace_limit=``; None: no limit), compared with
what runner.workspace_bytes reports for each stage.

    run_stage("conv_dgrad", "auto", workspace_limit=64 * 2**20, **layer)

Candidates come from the registry (every stage but ``auto``), so a stage added later competes
without an edit here. A progress bar says which candidate is being built and timed. The search is
kept in proportion to the problem: before each further candidate it stops once the time already
spent searching exceeds ``RUNS`` runs of the fastest candidate so far, since no untried stage,
however fast, could save more than that over so many runs (a tiny layer whose best stage runs in
microseconds is settled in seconds, not minutes); the cache lists the candidates left untried. The running layer passes the timing in (runner.resolve), so this module
imports nothing above the registry. The cache is ``.cache/choices.json`` (ignored by git;
COURSE_CHOICES moves it).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

from .launch import family, hook
from .ops import op_module
from .ops.problem import Problem
from .stages import REGISTRY, get_stage

ROOT = Path(__file__).resolve().parent.parent
TIMING = {"warmup": 1, "repeats": 5}
# the runs a choice is made for (a training run's steps, or more): the search stops once it has
# spent longer than this many runs of the best stage so far (see the module's docstring)
RUNS = 1_000_000


def cache_path() -> Path:
    return Path(os.environ.get("COURSE_CHOICES", ROOT / ".cache" / "choices.json"))


def _load() -> dict:
    path = cache_path()
    return json.loads(path.read_text()) if path.is_file() else {}


def _save(data: dict) -> None:
    path = cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def shape_key(p: Problem, limit_bytes: int | None) -> str:
    return f"{p.op} {p.label} workspace<={'unlimited' if limit_bytes is None else limit_bytes}"


def stage_workspace(s, p: Problem, d: dict) -> int:
    """Bytes of scratch stage s needs for p: what runner.workspace_bytes reports."""
    return sum(w.nbytes for w in family(s.family).workspace(s, p, d).values())


def candidates(p: Problem, limit_bytes: int | None) -> tuple[list, dict]:
    """(OpenCL stages that may run p within the budget, {excluded stage: why}) from the registry."""
    ok, excluded = [], {}
    refuse = getattr(op_module(p.op), "stage_requires", None)     # what no parameter or fallback changes
    for s in REGISTRY[p.op]:
        if s.choose or s.backend != "opencl":
            continue
        if s.precision != "fp32":          # auto answers in fp32: a faster half-precision stage is not a candidate
            excluded[s.name] = f"computes in {s.precision}; auto answers in fp32"
            continue
        need = refuse(s, p) if refuse else None
        if need is not None:
            excluded[s.name] = need
            continue
        requires = hook(s, "requires")
        need = requires(p, dict(s.defines)) if requires else None
        if need is not None:
            excluded[s.name] = need if s.fallback is None else f"runs {s.fallback} instead: {need}"
            continue
        ws = stage_workspace(s, p, dict(s.defines))
        if limit_bytes is not None and ws > limit_bytes:
            excluded[s.name] = f"workspace {ws / 2**20:.1f} MiB > budget {limit_bytes / 2**20:.1f} MiB"
            continue
        ok.append(s.name)
    return ok, excluded


def find(p: Problem, limit_bytes: int | None, time_stage, progress: bool = True) -> dict:
    """Time the candidates in course order (``time_stage(name) -> median ms``, checked before it
    is timed: the running layer's plan and time_plan), until the search has cost more than RUNS
    runs of the best so far; the record the cache keeps."""
    names, excluded = candidates(p, limit_bytes)
    if not names:
        raise ValueError(f"no stage of {p.op} runs {p.label} within a workspace budget of "
                         f"{limit_bytes:,} bytes: {excluded}")
    from .engine.progress import progress as progress_bar
    bar = progress_bar(len(names), progress and len(names) > 1, f"auto: {p.label}")
    times, untried, start = {}, {}, time.perf_counter()
    for i, name in enumerate(names):
        spent_ms = (time.perf_counter() - start) * 1e3
        if times and spent_ms > RUNS * min(times.values()):
            untried = {n: (f"not tried: the search had taken {spent_ms / 1e3:.1f} s, more than {RUNS:,} runs of "
                           f"the best so far ({min(times.values()):.4f} ms) would cost") for n in names[i:]}
            break
        bar.set_description(f"auto: {p.label}: {name}")
        times[name] = time_stage(name)
        bar.update()
    bar.close()
    best = min(times, key=times.get)
    return {"stage": best, "times_ms": times, "excluded": excluded, **({"untried": untried} if untried else {}),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def fingerprint(tuned: dict) -> str:
    """A short digest of the candidates' JIT parameters (what a cached choice was timed with)."""
    import hashlib
    return hashlib.sha256(json.dumps(tuned, sort_keys=True).encode()).hexdigest()[:16]


def choose(p: Problem, device: str, limit_bytes: int | None, time_stage, tuned: dict | None = None) -> str:
    """The stage ``auto`` runs for p on this device within the budget (cached, else timed now).
    ``tuned``: the parameters each candidate builds with; a choice cached under other values (a
    tune since, COURSE_TUNED changed) is made again."""
    if limit_bytes is not None and limit_bytes < 0:
        raise ValueError(f"stage auto: workspace_limit must be >= 0 bytes, got {limit_bytes}")
    device = device.strip()
    key = shape_key(p, limit_bytes)
    hit = _load().get(device, {}).get(key)
    stamp = fingerprint(tuned or {})
    if hit is not None and hit.get("tuned") == stamp:
        try:
            return get_stage(p.op, hit["stage"]).name
        except ValueError:
            pass                                  # a stage that no longer exists: choose again
    record = {**find(p, limit_bytes, time_stage), "tuned": stamp}
    data = _load()                                # another process may have written meanwhile
    data.setdefault(device, {})[key] = record
    _save(data)
    return record["stage"]


def cached(device: str) -> dict:
    """The cached choices of a device: {shape key: record}."""
    return _load().get(device.strip(), {})
