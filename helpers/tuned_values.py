"""Per-device JIT parameters: which tuned values a stage is built with, and where they come from.

run_stage builds a stage with its registry defaults, overridden by the values tuned for the device
it runs on, overridden by what the caller passes. Tuned values live in two files of one format:

- ``results/tuned.json``: the course's recorded devices (the benchmark's ``--tune --commit``,
  ``./course tune --commit``), each with its description (vendor, kind, architecture: helpers/engine/devices.py);
- the learner's own cache, outside the checkout (``./course tune`` and ``bench --tune`` write it): the
  file ``tuned.json`` in the platform's cache folder (``~/.cache/convbackprop-course/tuned.json`` on
  Linux, ``~/Library/Caches/convbackprop-course/tuned.json`` on macOS,
  ``%LOCALAPPDATA%\\convbackprop-course\\tuned.json`` on Windows), or the file ``COURSE_TUNE_CACHE``
  names (a JSON file's path, e.g. ``COURSE_TUNE_CACHE=~/my_tuning.json``; not a folder).

For each stage the values come from the first of: the learner's cache for this device, then
``results/tuned.json`` for this device (exact name matches win), then the closest recorded device:
the same vendor and architecture first (for NVIDIA, the compute capability the driver reports),
then the same vendor and kind: tuned values carry over well between GPUs of one architecture, so
a GPU nobody tuned for still starts close to its tuned speed. ``source`` says which, wherever
values are used (the plan's ``tuned_source``, the benchmark's header and rows, ./course tune --show).

``COURSE_TUNED=none`` leaves every tuned value out (the registry's defaults, as on a device nobody
tuned for); ``COURSE_TUNED=fresh`` leaves out only ``results/tuned.json``'s entry for the device
itself, as if it had never been recorded (what ``./course tune`` is measured from).
"""
from __future__ import annotations

import functools
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

TUNED = Path(__file__).resolve().parent.parent / "results" / "tuned.json"
MODES = ("", "none", "fresh")
APP = "convbackprop-course"


def mode() -> str:
    """COURSE_TUNED: '' (use every tuned value), 'none' or 'fresh' (see the module's docstring)."""
    m = os.environ.get("COURSE_TUNED", "").strip().lower()
    if m not in MODES:
        raise ValueError(f"COURSE_TUNED={os.environ['COURSE_TUNED']!r}: unset it (tuned values used), or set "
                         f"'none' (the registry's defaults) or 'fresh' (this device's recorded values left out)")
    return m


def ignored() -> bool:
    """COURSE_TUNED=none: the tuned values are left out (the registry's defaults run)."""
    return mode() == "none"


def user_cache() -> Path:
    """The file of the learner's own tuned values: the file COURSE_TUNE_CACHE names, else tuned.json
    in the platform's cache folder."""
    if os.environ.get("COURSE_TUNE_CACHE", "").strip():
        path = Path(os.environ["COURSE_TUNE_CACHE"]).expanduser()
        if path.is_dir():
            raise ValueError(f"COURSE_TUNE_CACHE={os.environ['COURSE_TUNE_CACHE']} is a folder; it names the "
                             f"cache's file (e.g. {path / 'tuned.json'})")
        return path
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache")
    return base / APP / "tuned.json"


def read(path: Path) -> dict:
    """The devices of a tuned-values file ({} if there is none)."""
    return json.loads(path.read_text()).get("devices", {}) if path.is_file() else {}


@functools.lru_cache(maxsize=1)
def _sources() -> tuple:
    """(label, path, devices) of each file, the learner's first."""
    if mode() == "none":
        return ()
    cache = user_cache()
    return (("your tuning", cache, read(cache)), ("results/tuned.json", TUNED, read(TUNED)))


def reload() -> None:
    """Read the files again at the next lookup (after the benchmark or ./course tune wrote them)."""
    _sources.cache_clear()


def closeness(device: dict, other: dict) -> tuple[int, str]:
    """(2, why) for the same vendor and architecture, (1, why) for the same vendor and kind, else (0, '')."""
    if not other or not device.get("vendor") or device.get("vendor") != other.get("vendor") \
            or device.get("type") != other.get("type"):
        return 0, ""
    if device.get("arch") and device.get("arch") == other.get("arch"):
        return 2, f"same vendor and architecture, {device['arch']}"
    return 1, f"same vendor ({device['vendor']}), another architecture"


@dataclass(frozen=True)
class Tuned:
    defines: dict
    source: str            # where they came from, in words

    @property
    def inherited(self) -> bool:
        return self.source.startswith("inherited")


DEFAULTS = "the registry's defaults"


def tuned_for(op: str, stage_key: str, device: dict) -> Tuned:
    """The tuned values of a stage ('04_weight_vec') on a device (devices.describe: name, type,
    vendor, arch; a name alone matches exact entries only) and where they come from."""
    if mode() == "none":
        return Tuned({}, f"{DEFAULTS} (COURSE_TUNED=none)")
    name = device.get("name", "").strip()
    for label, path, devices in _sources():
        if mode() == "fresh" and path == TUNED:
            continue
        entry = devices.get(name, {}).get(op, {}).get(stage_key)
        if entry is not None:
            return Tuned(dict(entry["defines"]), f"{label} for this device")
    best, source = 0, None
    for label, path, devices in _sources():
        for other, entry in devices.items():
            if other == name or stage_key not in entry.get(op, {}):
                continue
            score, why = closeness(device, entry.get("describe", {}))
            if score > best:
                best, source = score, (Tuned(dict(entry[op][stage_key]["defines"]),
                                             f"inherited from {other} in {label} ({why})"))
    return source or Tuned({}, f"{DEFAULTS} (no tuned values for this device or one like it)")


def tuned_defines(op: str, stage_key: str, device_name: str) -> dict:
    """The values tuned for a device of this name exactly (no inheritance), or {}."""
    return tuned_for(op, stage_key, {"name": device_name}).defines


def record(path: Path, device: dict, entries: dict, extra: dict | None = None) -> None:
    """Merge tuned values into a file (results/tuned.json or the learner's cache): ``entries``
    {op: {stage key: {"defines": ..., ...}}} for ``device`` (devices.describe), which is recorded
    with them so that other devices can inherit by it; ``extra``: other top-level keys to set."""
    data = json.loads(path.read_text()) if path.is_file() else {"devices": {}}
    dev = data.setdefault("devices", {}).setdefault(device["name"], {})
    dev["describe"] = device
    for op, stages in entries.items():
        dev.setdefault(op, {}).update(stages)
    data.update(extra or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)                     # whole or not at all: an interrupted write leaves the old file
    reload()


def summary(sources) -> str:
    """One line for a run's settings: how many stages took their values from where."""
    counts: dict = {}
    for s in sources:
        counts[s] = counts.get(s, 0) + 1
    return "; ".join(f"{s}: {n} stage{'s' if n > 1 else ''}" for s, n in sorted(counts.items(), key=lambda kv: -kv[1]))
