"""The training loop for both implementations, the comparison, and the record kept in results/.

    course = train_course(cfg)               # the course's stages (progress bar)
    twin = train_torch(cfg)                  # PyTorch, same initial weights and batches
    compare(course, twin)                    # step-by-step loss agreement, final accuracies, step times

Both steps are timed alike: the wall time of each step, the batch's upload and the loss's read
included (each implementation's one wait for the device), and on a GPU the device's time from the
step's first kernel to its last (the course's profiling events; CUDA events around PyTorch's).
"""
from __future__ import annotations

import datetime as dt
import platform
import time
from collections import Counter

import numpy as np

from ..engine import tensor as tensors
from ..engine.devices import device_info, get_context
from . import data, model
from .course import FIXED, CourseNet

COMPARE_STEPS = 20        # the first steps compared one by one
LOSS_RTOL = 1e-3          # |course - PyTorch| / |PyTorch| for each of them
ACCURACY_TOL = 0.02       # final test accuracies within 2 points


def _bar(iterable, total: int, desc: str, progress: bool):
    if not progress:
        return iterable
    from tqdm.auto import tqdm
    return tqdm(iterable, total=total, desc=desc, leave=True)


def _steps(cfg: model.Config, n: int):
    """Every step of training: (epoch, batch indices), the same for both implementations."""
    return [(e, b) for e in range(cfg.epochs) for b in data.batches(n, cfg.batch, e, cfg.seed)]


def train_course(cfg: model.Config, ctx=None, progress: bool = True, workspace_limit: int | None = None,
                 stages: dict | None = None) -> dict:
    """Train on the course's stages; the record: losses, times per step (wall, and the device's from
    the step's first kernel to its last) and per op, choices, launches and transfers per step."""
    xtr, ytr, xte, yte = data.digits(cfg.scale, seed=cfg.seed)
    ctx = get_context(ctx)
    t0 = time.perf_counter()
    net = CourseNet(cfg, ctx, workspace_limit, stages)
    setup_s = time.perf_counter() - t0
    net.load(model.init_params(cfg))
    steps = _steps(cfg, len(ytr))
    losses, step_ms, device_ms, accuracy, per_step = [], [], [], [], None
    epoch_ms = [0.0] * cfg.epochs
    for i, (epoch, b) in enumerate(_bar(steps, len(steps), "course", progress)):
        before = Counter(tensors.TRANSFERS)
        t = time.perf_counter()
        loss = net.train_step(xtr[b], ytr[b])      # the batch in, forward, backward, SGD, the loss out
        ms = (time.perf_counter() - t) * 1e3
        if per_step is None:
            per_step = dict(Counter(tensors.TRANSFERS) - before)
        net.record()                               # each op's events, read after the step's time is taken
        device_ms.append(net.last_step_ms())
        losses.append(loss)
        step_ms.append(ms)
        epoch_ms[epoch] += ms
        if i + 1 == len(steps) or steps[i + 1][0] != epoch:
            accuracy.append(net.evaluate(xte, yte))
    return {"impl": "course", "device": device_info(ctx), "config": cfg.as_dict(), "setup_s": setup_s,
            "losses": losses, "step_ms": step_ms, "step_device_ms": device_ms, "epoch_ms": epoch_ms,
            "accuracy": accuracy, "ops": op_rows(net), "choices": net.choices, "transfers_per_step": per_step,
            "launches_per_step": net.launches_per_step(), "test_samples": len(yte) - len(yte) % cfg.batch}


def op_rows(net: CourseNet) -> list[dict]:
    """Median device time per layer and op over the steps run, with the stage that ran it."""
    stages = {(c["layer"], c["op"]): c for c in net.choices}
    rows = []
    for (layer, op), t in net.times.items():
        c = stages.get((layer, op))
        rows.append({"layer": layer, "op": op, "median_ms": float(np.median(t)), "q1_ms": float(np.percentile(t, 25)),
                     "q3_ms": float(np.percentile(t, 75)), "stage": c["stage"] if c else FIXED[op],
                     "how": c["how"] if c else "fixed", "where": "device"})
    return rows


def train_torch(cfg: model.Config, device: str = "cpu", progress: bool = True) -> dict:
    """Train the PyTorch twin from the same initial weights on the same batches."""
    import torch
    from .torch_twin import TorchNet
    xtr, ytr, xte, yte = data.digits(cfg.scale, seed=cfg.seed)
    net = TorchNet(cfg, model.init_params(cfg), device)
    steps = _steps(cfg, len(ytr))
    losses, step_ms, accuracy = [], [], []
    epoch_ms = [0.0] * cfg.epochs
    for i, (epoch, b) in enumerate(_bar(steps, len(steps), "PyTorch", progress)):
        loss, ms = net.step(xtr[b], ytr[b])
        losses.append(loss)
        step_ms.append(ms)
        epoch_ms[epoch] += ms
        if i + 1 == len(steps) or steps[i + 1][0] != epoch:
            accuracy.append(net.evaluate(xte, yte))
    from ..ops.vendor import versions
    return {"impl": "pytorch", "version": torch.__version__, "device": device,
            **(versions() if device != "cpu" else {}),
            "threads": torch.get_num_threads(), "losses": losses, "step_ms": step_ms,
            **({"step_device_ms": net.step_device_ms} if net.step_device_ms else {}),
            "epoch_ms": epoch_ms, "accuracy": accuracy}


def compare(course: dict, twin: dict, steps: int = COMPARE_STEPS) -> dict:
    """Step-by-step agreement of the losses over the first ``steps`` steps, of the final accuracies,
    and the step times: the course's median over PyTorch's, wall and (where both have it) device."""
    a, b = np.array(course["losses"][:steps]), np.array(twin["losses"][:steps])
    rel = np.abs(a - b) / np.abs(b)
    acc = abs(course["accuracy"][-1] - twin["accuracy"][-1])
    out = {"steps": int(len(rel)), "max_rel_diff": float(rel.max()), "rtol": LOSS_RTOL,
           "losses_agree": bool((rel <= LOSS_RTOL).all()), "accuracy_diff": float(acc),
           "accuracy_tol": ACCURACY_TOL, "accuracy_agrees": bool(acc <= ACCURACY_TOL)}
    for key, name in (("step_ms", "wall_ratio"), ("step_device_ms", "device_ratio")):
        if key in course and key in twin:
            out[name] = float(np.median(course[key]) / np.median(twin[key]))
    return out


def verdict(c: dict) -> str:
    """The comparison in words, without its measured numbers (what the notebook checks)."""
    loss = ("agree" if c["losses_agree"] else "DISAGREE")
    acc = ("agree" if c["accuracy_agrees"] else "DISAGREE")
    return (f"losses of the first {c['steps']} steps: {loss} (relative difference <= {c['rtol']:g} at each step)\n"
            f"final test accuracies: {acc} (within {100 * c['accuracy_tol']:g} points)")


def record(cfg: model.Config, ctx=None, torch_device: str | None = None, progress: bool = True) -> dict:
    """Both trainings and their comparison, with the device, versions and date: what results/ keeps."""
    from .torch_twin import available
    out = {"kind": "training", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "python": platform.python_version(), "course": train_course(cfg, ctx, progress)}
    out["device"] = out["course"]["device"]
    if available():
        out["pytorch"] = train_torch(cfg, torch_device or "cpu", progress)
        out["comparison"] = compare(out["course"], out["pytorch"])
    return out


def host_step(course: dict) -> bool:
    """Whether a course run's record comes from the earlier step, whose head, loss and SGD ran in
    NumPy on the host (its op rows have a host row; today's step has none)."""
    return any(o["where"] == "host" for o in course["ops"])


def recorded() -> list[dict]:
    """Chapter 15's training runs recorded in results/ (training_<device>.json), GPUs first."""
    from ..analysis.results import load
    runs = [r for r in load("training_*.json") if r.get("kind") == "training"]
    return sorted(runs, key=lambda r: r["device"].get("type") != "GPU")
