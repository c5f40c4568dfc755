"""Per-device JIT parameters chosen by the benchmark's search (results/tuned.json).

run_stage builds a stage with its registry defaults, overridden by the values tuned for the
device it runs on (matched by device name), overridden by what the caller passes.
COURSE_TUNED=none leaves the tuned values out: every stage runs its registry defaults, as on a
device nobody tuned for (the benchmark records the setting).
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

TUNED = Path(__file__).resolve().parent.parent / "results" / "tuned.json"


def ignored() -> bool:
    """COURSE_TUNED=none: the tuned values are left out (the registry's defaults run)."""
    return os.environ.get("COURSE_TUNED", "").strip().lower() == "none"


@functools.lru_cache(maxsize=1)
def _load() -> dict:
    if ignored() or not TUNED.is_file():
        return {}
    return json.loads(TUNED.read_text()).get("devices", {})


def tuned_defines(op: str, stage_key: str, device_name: str) -> dict:
    """The tuned defines recorded for this device, op and stage ('04_weight_vec'), or {}."""
    return dict(_load().get(device_name.strip(), {}).get(op, {}).get(stage_key, {}).get("defines", {}))


def reload() -> None:
    """Read results/tuned.json again at the next lookup (after the benchmark wrote to it)."""
    _load.cache_clear()
