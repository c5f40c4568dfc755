"""Stage ``auto``: choose an algorithm per device and layer shape under a workspace limit.

The course's counterpart of cuDNN's two modes. The first time a device meets a layer shape, the
registered OpenCL stages of the op that can run it within the workspace budget (the candidates)
are ranked by a model of their speed, fitted to the recorded runs in results/ (helpers/chooser_model.py:
the heuristic mode, cudnnGetConvolution*Algorithm_v7), and only the best few are checked and
timed (the benchmark's profiling events; at most ``TIMED``, none started after ``BUDGET_S``
seconds of timing: the benchmark mode, cudnnFind, on a short list), their kernels built side by
side while the one reference they are checked against is computed (on a spot of the outputs: the
first and last image, or filter, runner.SPOT; a whole reference of a large layer took most of a first
call's seconds in NumPy). The fastest of those is
written to an on-disk cache keyed by device name, shape and budget, and runs; later runs read the
cache and run it at once. A
first call takes seconds, kernel builds included, not minutes. ``COURSE_AUTO=exhaustive`` times
every candidate instead (the search as it was before the model: minutes on a large layer, and
stopped once it has cost more than ``RUNS`` runs of the best so far). A candidate that fails its
check, build or launch is left out, named in the cache and in a printed line; the caller never
sees its error. The budget is the engine's one workspace limit, in bytes (``workspace_limit=``;
None: no limit), compared with what runner.workspace_bytes reports for each stage.

    run_stage("conv_dgrad", "auto", workspace_limit=64 * 2**20, **layer)

Candidates come from the registry (every stage but ``auto``), so a stage added later competes
without an edit here (the model ranks a stage it has no recorded run of after those it has, and
times the best of them too). The cache records the model's ranking, what was timed, what was
not and why. The running layer passes the timing in (runner.resolve), so this module imports
nothing above the registry. The cache is ``.cache/choices.json`` (ignored by git; COURSE_CHOICES
moves it).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

from .ops import op_module
from .ops.problem import Problem
from .chooser_model import rank, source_device
from .stages import REGISTRY, get_stage

ROOT = Path(__file__).resolve().parent.parent
TIMING = {"warmup": 1, "repeats": 5}
# the runs a choice is made for (a training run's steps, or more): the search stops once it has
# spent longer than this many runs of the best stage so far (see the module's docstring)
RUNS = 1_000_000
# the model's search: at most this many candidates timed, and none started after this many seconds
TIMED = 3
BUDGET_S = 2.0


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
    return sum(w.nbytes for w in s.family.workspace(s, p, d).values())


def candidates(p: Problem, limit_bytes: int | None, tuned: dict | None = None) -> tuple[list, dict]:
    """(OpenCL stages that may run p within the budget, {excluded stage: why}) from the registry,
    each judged at the parameters it would build with: its registry values under ``tuned``'s for it
    ({stage key: defines}, the device's; a tuned split can need more workspace than the registry's)."""
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
        d = {**s.defines, **(tuned or {}).get(s.key, {})}
        need = s.requires(p, d) if s.requires else None
        if need is not None:
            excluded[s.name] = need if s.fallback is None else f"runs {s.fallback} instead: {need}"
            continue
        ws = stage_workspace(s, p, d)
        if limit_bytes is not None and ws > limit_bytes:
            excluded[s.name] = f"workspace {ws / 2**20:.1f} MiB > budget {limit_bytes / 2**20:.1f} MiB"
            continue
        ok.append(s.name)
    return ok, excluded


def exhaustive() -> bool:
    """COURSE_AUTO=exhaustive: time every candidate (the search before the model; minutes on a large layer)."""
    mode = os.environ.get("COURSE_AUTO", "model")
    if mode not in ("model", "exhaustive"):
        raise ValueError(f"COURSE_AUTO={mode!r}: 'model' (rank, then time the best few; the default) or "
                         f"'exhaustive' (time every candidate)")
    return mode == "exhaustive"


def find(p: Problem, limit_bytes: int | None, time_stage, progress: bool = True, device: str = "",
         kind: str = "", vendor: str = "", warm=None, tuned: dict | None = None) -> dict:
    """The record the cache keeps for p: the candidates ranked by the model (chooser_model: the
    recorded runs of ``device``, or of the recorded device most like it), then timed best-ranked
    first (``time_stage(name) -> median ms``, each checked before it is timed): at most TIMED of
    them, the last a stage the model has no run of when there is one, and no more once BUDGET_S
    seconds of checking and timing have passed. ``warm(names)``, when given, is called first with
    the TIMED about to be timed: the running layer builds their kernels side by side and computes
    the reference they are all checked against meanwhile (runner.choose_stage), and may return the
    seconds each side took (kept as ``warm_sides``). COURSE_AUTO=exhaustive
    times every candidate instead (until the search has cost more than RUNS runs of the best so
    far). A candidate that fails (its check, its build, its launch) is left out, named in the
    record and in a printed line; the others go on."""
    names, excluded = candidates(p, limit_bytes, tuned)
    if not names:
        raise ValueError(f"no stage of {p.op} runs {p.label} within a workspace budget of "
                         f"{limit_bytes:,} bytes: {excluded}")
    from .engine.progress import progress as progress_bar
    source = source_device(device, kind, vendor, p.op)
    ranked = rank(p.op, [get_stage(p.op, n) for n in names], p, source)
    order = [s.name for s, _ in ranked]
    everything = exhaustive()
    if not everything:            # the best predicted, and the best of the stages never recorded there
        guessed = [s.name for s, ms in ranked if ms is not None]
        fresh = [s.name for s, ms in ranked if ms is None]
        order = guessed[:TIMED - 1] + fresh[:1] if fresh and guessed else order
        order += [n for s, _ in ranked if (n := s.name) not in order]
    bar = progress_bar(min(len(order), len(order) if everything else TIMED), progress and len(order) > 1,
                       f"auto: {p.label}")
    start = time.perf_counter()
    sides = warm(order[:TIMED]) if warm is not None and not everything else None
    built = time.perf_counter()
    times, untried, failed, spent_on = {}, {}, {}, {}     # spent_on: each candidate's check and timing, in s
    timed = None                  # (name, when it began): its seconds are read at the next look at the clock
    for i, name in enumerate(order):
        now = time.perf_counter()
        if timed:
            spent_on[timed[0]], timed = round(now - timed[1], 3), None
        spent = now - built
        if times and everything and spent * 1e3 > RUNS * min(times.values()):
            why = (f"not tried: the search had taken {spent:.1f} s, more than {RUNS:,} runs of the best so far "
                   f"({min(times.values()):.4f} ms) would cost")
        elif times and not everything and (len(times) >= TIMED or spent > BUDGET_S):
            why = (f"not timed: ranked below the {len(times)} timed by the model" if len(times) >= TIMED else
                   f"not timed: the search had taken {spent:.1f} s, past its budget of {BUDGET_S} s")
        else:
            why = None
        if why:
            untried.update({n: why for n in order[i:]})
            break
        bar.set_description(f"auto: {p.label}: {name}")
        try:
            times[name] = time_stage(name)
            timed = (name, now)
        except KeyboardInterrupt:
            raise
        except Exception as err:          # noqa: BLE001: a candidate's failure is the candidate's, not the caller's
            failed[name] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            bar.write(f"auto: {p.label}: candidate {name} failed and is left out ({failed[name]})")
            continue
        bar.update()
    bar.close()
    end = time.perf_counter()
    if timed:
        spent_on[timed[0]] = round(end - timed[1], 3)
    if not times:
        raise RuntimeError(f"stage auto: every candidate of {p.op} failed on {p.label}: {failed}")
    best = min(times, key=times.get)
    predicted = {s.name: ms for s, ms in ranked}
    return {"stage": best, "times_ms": times, "excluded": excluded, "mode": "exhaustive" if everything else "model",
            "ranked": [[n, predicted[n]] for n in (s.name for s, _ in ranked)], "model_device": source,
            **({"untried": untried} if untried else {}), **({"failed": failed} if failed else {}),
            "seconds": round(end - start, 3), "warm_seconds": round(built - start, 3),
            **({"warm_sides": sides} if sides else {}), "candidate_seconds": spent_on,
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}


def fingerprint(tuned: dict) -> str:
    """A short digest of the candidates' JIT parameters (what a cached choice was timed with)."""
    import hashlib
    return hashlib.sha256(json.dumps(tuned, sort_keys=True).encode()).hexdigest()[:16]


def choose(p: Problem, device: str, limit_bytes: int | None, time_stage, tuned: dict | None = None,
           kind: str = "", vendor: str = "", warm=None) -> str:
    """The stage ``auto`` runs for p on this device within the budget (cached, else timed now).
    ``tuned``: the parameters each candidate builds with; a choice cached under other values (a
    tune since, COURSE_TUNED changed) is made again. ``warm``: see find."""
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
    record = {**find(p, limit_bytes, time_stage, device=device, kind=kind, vendor=vendor, warm=warm, tuned=tuned),
              "tuned": stamp}
    data = _load()                                # another process may have written meanwhile
    data.setdefault(device, {})[key] = record
    _save(data)
    return record["stage"]


def cached(device: str) -> dict:
    """The cached choices of a device: {shape key: record}."""
    return _load().get(device.strip(), {})
