"""What recorded results are called: one place for the file names under results/ and the device
slugs in them, read by the commands that write them (the benchmark, the recorder, the timer floor,
the register counts, the tensor-core peak, the bank-conflict record, the training run, ./course
tune) and by the chapters that read them.

A device's slug is its name in lower case, runs of other characters as one dash ('NVIDIA H200' ->
'nvidia-h200'); every file of a device ends in it. ``device`` may be a name or '{slug}' (the
recorder's plan fills it in per device).
"""
from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "results"
RECORDED = "NVIDIA H200"          # the GPU the chapters' recorded runs come from


def slug(text: str) -> str:
    """'NVIDIA H200' -> 'nvidia-h200' ('{slug}' is kept, for the recorder's plan)."""
    return text if text == "{slug}" else re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def bench(op: str, layers: str, device: str, activation: str = "none", tag: str | None = None) -> str:
    """A benchmark run: <op>_<layers>[_<activation>][_<tag>]_<slug>.json."""
    act = f"_{activation}" if activation != "none" else ""
    return f"{op}_{layers}{act}{f'_{tag}' if tag else ''}_{slug(device)}.json"


def timer_floor(device: str) -> str:
    return f"engine/timer_floor_{slug(device)}.json"


def registers(table: str, device: str) -> str:
    return f"registers_{table}_{slug(device)}.json"


def wgmma_peak(device: str) -> str:
    return f"tc/wgmma_peak_{slug(device)}.json"


def ncu_banks(stem: str, device: str) -> str:
    return f"local/{stem}_conv_dgrad_{slug(device)}.json"


def training(device: str, network: str | None = None) -> str:
    """Chapter 15's training run (network None), or the step of another network against PyTorch's
    (helpers/train: "resnet_stage")."""
    return f"training_{f'{network}_' if network else ''}{slug(device)}.json"


def tune_fresh(device: str) -> str:
    """The cache of a `./course tune` made from nothing recorded for the device, kept as its record."""
    return f"tune/tune_fresh_{slug(device)}.json"


def test_log(group: str, device: str, stem: str | None = None) -> str:
    """The log of a group of the test suite run on a device (``stem``: one part of it)."""
    return f"{group}/pytest_{f'{stem}_' if stem else ''}{slug(device)}.log"


def sanitizer_log(group: str, stem: str, device: str) -> str:
    """compute-sanitizer's log of the CUDA stages of ``stem`` run on a device."""
    return f"{group}/sanitizer_{stem}_{slug(device)}.log"


def ncu_report(stem: str, device: str) -> str:
    """An Nsight Compute text report of chapter 13's stages on a device."""
    return f"tc/ncu_{stem}_{slug(device)}.txt"


def record_log(device: str) -> str:
    """The recorder's log of the tasks it ran on a device."""
    return f"record_{slug(device)}.json"


def path(name: str) -> Path:
    """A name above, as a path under results/."""
    return RESULTS / name
