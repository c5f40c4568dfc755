"""Per-device JIT parameters chosen by the benchmark's search (results/tuned.json).

run_stage builds a stage with its registry defaults, overridden by the values tuned for the
device it runs on (matched by device name), overridden by what the caller passes.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

TUNED = Path(__file__).resolve().parent.parent / "results" / "tuned.json"


@functools.lru_cache(maxsize=1)
def _load() -> dict:
    if not TUNED.is_file():
        return {}
    return json.loads(TUNED.read_text()).get("devices", {})


def tuned_defines(op: str, stage_key: str, device_name: str) -> dict:
    """The tuned defines recorded for this device, op and stage ('04_weight_vec'), or {}."""
    return dict(_load().get(device_name.strip(), {}).get(op, {}).get(stage_key, {}).get("defines", {}))


def reload() -> None:
    """Read results/tuned.json again at the next lookup (after the benchmark wrote to it)."""
    _load.cache_clear()
