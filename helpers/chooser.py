"""Stage ``auto``: choose an algorithm per device and layer shape under a workspace limit.

The course's counterpart of cudnnFind with a workspace limit: the first time a device meets a
layer shape, every other registered stage of the op that can run the problem and whose
workspace fits the limit is timed once (the same profiling-event timing as the benchmark), the
fastest is written to an on-disk cache keyed by device name, shape and limit, and that stage
runs; later runs read the cache and run the winner at once.

    run_stage("conv_dgrad", "auto", defines={"WORKSPACE_MB": 64}, **layer)

Candidates come from the registry (every stage but ``auto``), so a stage added later competes
without an edit here. The cache is ``.cache/choices.json`` (ignored by git; COURSE_CHOICES moves
it); ``record()`` copies a device's choices into results/ to keep them with the course.
"""
from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from .gemm import workspace_bytes
from .problem import Problem

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LIMIT_MB = 256
TIMING = {"warmup": 1, "repeats": 5}


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


def shape_key(p: Problem, limit_bytes: int) -> str:
    return f"{p.op} {p.label} workspace<={limit_bytes}"


def candidates(p: Problem, limit_bytes: int) -> tuple[list, dict]:
    """(stage names that may run p within the limit, {excluded stage: why}) from the registry."""
    from .stages import REGISTRY
    ok, excluded = [], {}
    for s in REGISTRY[p.op]:
        if s.choose is not None:
            continue
        need = s.requires(p, dict(s.defines)) if s.requires else None
        if need is not None:
            excluded[s.name] = need if s.fallback is None else f"runs {s.fallback} instead: {need}"
            continue
        ws = workspace_bytes(p.op, s.name, p)
        if ws > limit_bytes:
            excluded[s.name] = f"workspace {ws / 2**20:.1f} MiB > limit {limit_bytes / 2**20:.1f} MiB"
            continue
        ok.append(s.name)
    return ok, excluded


def find(p: Problem, ctx, limit_bytes: int) -> dict:
    """Time every candidate on ctx's device; the record the cache keeps."""
    from .runner import Plan
    from .timing import time_plan
    names, excluded = candidates(p, limit_bytes)
    if not names:
        raise ValueError(f"no stage of {p.op} runs {p.label} within a workspace of "
                         f"{limit_bytes / 2**20:.1f} MiB: {excluded}")
    times = {}
    for name in names:
        plan = Plan(p.op, name, p, ctx, None, guard=False)
        times[name] = time_plan(plan, **TIMING).median_ms
    best = min(times, key=times.get)
    return {"stage": best, "times_ms": times, "excluded": excluded,
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def choose(p: Problem, ctx, d: dict) -> str:
    """The stage ``auto`` runs for p on ctx's device (from the cache, else timed now)."""
    from .stages import get_stage
    mb = d.get("WORKSPACE_MB", DEFAULT_LIMIT_MB)
    if mb < 0:
        raise ValueError(f"stage auto: WORKSPACE_MB must be >= 0, got {mb}")
    limit = int(mb * 2**20)
    device = ctx.devices[0].name.strip()
    key = shape_key(p, limit)
    data = _load()
    hit = data.get(device, {}).get(key)
    if hit is not None:
        try:
            get_stage(p.op, hit["stage"])
            return hit["stage"]
        except ValueError:
            pass                                  # a stage that no longer exists: choose again
    record = find(p, ctx, limit)
    data = _load()                                # another process may have written meanwhile
    data.setdefault(device, {})[key] = record
    _save(data)
    return record["stage"]


def cached(device: str) -> dict:
    """The cached choices of a device: {shape key: record}."""
    return _load().get(device.strip(), {})


def record(device: str, path: Path | None = None) -> Path:
    """Copy a device's cached choices into results/ (choices_<device>.json)."""
    from .bench import slug
    path = path or ROOT / "results" / f"choices_{slug(device)}.json"
    path.write_text(json.dumps({"device": device.strip(), "choices": cached(device)}, indent=1) + "\n")
    return path
