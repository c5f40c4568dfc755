"""Recorded benchmark runs in results/: JSON files written by `python -m helpers.bench`."""
from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results"


def load(pattern: str = "*.json") -> list[dict]:
    """Every recorded run whose file name matches ``pattern`` (tuned.json excluded)."""
    runs = []
    for path in sorted(RESULTS.glob(pattern)):
        if path.name == "tuned.json":
            continue
        data = json.loads(path.read_text())
        data["file"] = path.name
        runs.append(data)
    return runs


def find(op: str, layer_set: str, device_type: str | None = "GPU") -> list[dict]:
    """Recorded runs of an op over a layer set (by default only those from GPUs)."""
    return [r for r in load() if r.get("op") == op and r.get("layer_set") == layer_set
            and (device_type is None or r["device"].get("type") == device_type)]


def device_label(run: dict) -> str:
    d = run["device"]
    return f"{d['name']} ({d['platform']}, driver {d['driver']}, {run['date'][:10]})"
