"""The model stage ``auto`` ranks its candidates with before it times a few (helpers/chooser.py).

A stage's speed on a layer it has never run is predicted from the layers it was recorded on
(results/, the benchmark's files): the recorded layer nearest in shape, by a distance over the
shape's features (the logarithms of N, C, K, H and W; the kernel's size, the stride, the groups,
whether it is depthwise, the dilation and the rank, which change the algorithm and weigh more), gives the stage's rate in FLOP/s,
and the new layer's FLOPs over that rate is the predicted time. Only layers of the new layer's kind
(the kernel's size, depthwise or not, the number of axes) count where any candidate was recorded on
that kind; a candidate never recorded on it then has no prediction (``predictions``). Recorded runs of a device are
used for it; a device with none of its own takes the runs of the recorded device most like it
(same kind and vendor, then same kind: the same inheritance as the tuned parameters), op by op: an
op recorded on no device of its kind takes any device's runs of it, for their order of the stages. A stage
with no recorded run on that device has no prediction and is ranked after those that have one:
first by the runs of the device that has the most of the op (a CPU recorded on plain layers only
still ranks the depthwise stages by a GPU's runs of them), then later chapters first (the course's
ladder: a later stage is the faster one more often than not).

This is the course's counterpart of cuDNN's heuristic mode (cudnnGetConvolutionBackwardDataAlgorithm_v7
ranks algorithms from a model of the GPU without running them); the timing of the best-ranked few
that follows is its benchmark mode (cudnnFind...) on a short list. tests/test_chooser_model.py
measures how far the model's pick falls from the best recorded stage, layer by layer, with each
layer's own runs left out.

The zoo's runs (sets named zoo...) are never read: the zoo is where auto is judged, on layers
neither the model nor a tuning search has seen. Only the runs made with each stage's own (tuned)
values count: a run tagged for a switch's other setting (``..._0``, ``rowcopy1``) or for the
registry's defaults (``untuned``) is left out, and only rows that ran the stage asked for (no
fallback) and were checked.
"""
from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "results"
# tags of runs made with something else than the stage's own values
LEFT_OUT_TAG = re.compile(r"(\d$|^untuned$|^fresh$)")
# the layer sets the model never reads: the zoo is what auto is judged on (layers nobody tuned for)
HELD_OUT = "zoo"
# how much a unit of each feature's difference weighs in the distance (log2 sizes: a factor of 2 is 1)
WEIGHTS = {"n": 1.0, "c": 1.0, "k": 1.0, "h": 1.0, "w": 1.0, "kernel": 4.0, "stride": 4.0, "groups": 2.0,
           "depthwise": 64.0, "dilation": 4.0, "rank": 16.0}


def _axes(v) -> tuple:
    return tuple(v) if isinstance(v, (list, tuple)) else (v,)


def features(shape: dict) -> dict:
    """A layer's features from its dict (the layer sets' keys: n, c, k, h, w or size, kernel, stride,
    groups, dilation; a batch-norm layer has no k, kernel or stride), and whether the layer is
    depthwise (groups = C) and its number of spatial axes: each of these picks algorithms of its
    own, so it weighs more than any difference of sizes (a factor of 2 weighs 1, a depthwise layer
    against a dense one 64)."""
    log = lambda v: math.log2(max(1, v))
    kernel, stride = _axes(shape.get("kernel", 1)), _axes(shape.get("stride", 1))
    size = _axes(shape.get("size", (shape.get("h", 1), shape.get("w", 1))))
    groups = shape.get("groups", 1)
    return {"n": log(shape.get("n", 1)), "c": log(shape.get("c", 1)), "k": log(shape.get("k", shape.get("c", 1))),
            "h": log(size[0]), "w": log(size[-1]), "kernel": sum(kernel) / len(kernel),
            "stride": sum(stride) / len(stride), "groups": log(groups),
            "depthwise": float(groups > 1 and groups == shape.get("c", 1)),
            "dilation": sum(_axes(shape.get("dilation", 1))) / len(_axes(shape.get("dilation", 1))),
            "rank": len(size)}


def problem_features(p) -> dict:
    """The same features of a Problem (its dims)."""
    d = p.dims
    size = d.get("size", (d.get("H", 1), d.get("W", 1)))
    return features({"n": d["N"], "c": d["C"], "k": d.get("K", d["C"]), "size": size,
                     "kernel": d.get("kernel", 1), "stride": d.get("strides", 1), "groups": d.get("groups", 1),
                     "dilation": d.get("dilation", 1)})


def distance(a: dict, b: dict) -> float:
    return sum(WEIGHTS[f] * (a[f] - b[f]) ** 2 for f in WEIGHTS)


@functools.lru_cache(maxsize=None)
def recorded(folder: str = str(RESULTS)) -> dict:
    """{device name: {op: {stage key: [(features, FLOP/s, layer name, ms)]}}} from the benchmark's files,
    the fastest recorded time per (layer, stage)."""
    best: dict = {}
    for path in sorted(Path(folder).glob("*.json")):
        try:
            run = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if (not isinstance(run, dict) or run.get("kind") != "bench" or run.get("partial")
                or LEFT_OUT_TAG.search(run.get("tag") or "") or str(run.get("layer_set", "")).startswith(HELD_OUT)):
            continue
        device = run["device"]["name"].strip()
        for r in run.get("rows", []):
            if r.get("ran", r["key"]) != r["key"] or not r.get("verified", True) or r.get("precision", "fp32") != "fp32":
                continue
            key = (device, run["op"], r["key"], r["layer"])
            if key not in best or r["median_ms"] < best[key][3]:
                best[key] = (features(r["shape"]), r["flops"] / (r["median_ms"] * 1e-3), r["layer"], r["median_ms"])
    out: dict = {}
    for (device, op, stage, _), row in best.items():
        out.setdefault(device, {}).setdefault(op, {}).setdefault(stage, []).append(row)
    return out


def devices() -> dict:
    """{device name: (type, vendor)} of the devices recorded, from their files."""
    out = {}
    for path in sorted(RESULTS.glob("*.json")):
        try:
            run = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(run, dict) and run.get("kind") == "bench":
            d = run["device"]
            out.setdefault(d["name"].strip(), (d.get("type", ""), d.get("vendor", "")))
    return out


def source_device(name: str, kind: str = "", vendor: str = "", op: str = "") -> str | None:
    """The recorded device whose runs stand for ``name``: itself, else one of the same kind and
    vendor, else one of the same kind, else any (the most recorded first), else None. With ``op``,
    only devices with runs of that op count: a CPU recorded for the input gradient alone takes a
    GPU's runs for the forward pass (their order of the stages, which the timing then checks)."""
    runs = recorded()
    has = lambda d: d in runs and (not op or op in runs[d])
    if has(name.strip()):
        return name.strip()
    known = devices()
    size = lambda d: sum(len(v) for ops in runs.get(d, {}).values() for v in ops.values())
    for same in (lambda t, v: t == kind and v == vendor, lambda t, v: t == kind, lambda t, v: bool(op)):
        alike = sorted((d for d, (t, v) in known.items() if has(d) and same(t, v)), key=size, reverse=True)
        if alike:
            return alike[0]
    return None


def nearest_ms(rows: list, f: dict, flops: float) -> float | None:
    """The time in ms of ``flops`` at the rate of the recorded row nearest to features ``f``."""
    if not rows:
        return None
    _, rate, _, _ = min(rows, key=lambda r: distance(f, r[0]))
    return flops / rate * 1e3


def kind(f: dict) -> tuple:
    """What picks a layer's algorithm, from its features: the kernel's size, whether it is depthwise,
    the number of axes. A stage's rate on one kind says little of another (a direct 3x3 kernel's
    rate on 3x3 layers is no guide to its rate on 1x1 layers). The stride is left to the distance:
    a first layer of 3 channels at stride 1 is nearer one at stride 2 than a 64-channel one."""
    return f["kernel"], f["depthwise"], f["rank"]


def predictions(runs: dict, keys: list, f: dict, flops: float) -> dict:
    """{stage key: predicted ms or None} for a layer of features ``f``, from ``runs`` ({stage key:
    rows}). Where some of the stages were recorded on layers of the layer's kind, only those rows
    count, and a stage never recorded on that kind has no prediction (it is ranked after them);
    where none was, every row counts (the nearest layer of any kind)."""
    same = {k: [r for r in runs.get(k) or [] if kind(r[0]) == kind(f)] for k in keys}
    if any(same.values()):
        return {k: nearest_ms(same[k], f, flops) for k in keys}
    return {k: nearest_ms(runs.get(k), f, flops) for k in keys}


def predict(op: str, stage_key: str, p, device: str | None, among: list | None = None) -> float | None:
    """The predicted time in ms of a stage on problem p from ``device``'s recorded runs (None: no run
    of the stage recorded there, or none on p's kind of layer where some of ``among``, the stage keys
    ranked with it, have one)."""
    runs = recorded().get(device, {}).get(op, {}) if device else {}
    keys = list(dict.fromkeys([stage_key, *(among or [])]))
    return predictions(runs, keys, problem_features(p), p.flops)[stage_key]


def rank(op: str, candidates: list, p, device: str | None) -> list:
    """[(stage, predicted ms or None)], the predicted fastest first, then the stages without a
    prediction on ``device``: first those another device has runs of (the device with the most
    runs of ``op``), in the order its runs predict, then the rest, later chapters first.
    ``candidates``: registry Stages. Predictions come from layers of p's kind where any candidate
    has such runs (``predictions``)."""
    keys = [s.key for s in candidates]
    guessed = [(s, predict(op, s.key, p, device, keys)) for s in candidates]
    known = sorted((g for g in guessed if g[1] is not None), key=lambda g: g[1])
    unknown = [s for s, ms in reversed(guessed) if ms is None]
    other = elsewhere(op, device)
    hint = {s.key: predict(op, s.key, p, other, [u.key for u in unknown]) for s in unknown} if other else {}
    ordered = sorted((s for s in unknown if hint.get(s.key) is not None), key=lambda s: hint[s.key])
    return known + [(s, None) for s in ordered + [s for s in unknown if hint.get(s.key) is None]]


def elsewhere(op: str, device: str | None) -> str | None:
    """The device other than ``device`` with the most recorded runs of ``op`` (None: none)."""
    runs = recorded()
    others = [d for d in runs if d != device and op in runs[d]]
    return max(others, key=lambda d: sum(len(v) for v in runs[d][op].values()), default=None)


def held_out(device: str, op: str, stages: set, timed: int, reverse: bool = False) -> list:
    """How far the model's choice falls from the best recorded stage, layer by layer: each recorded
    layer of ``op`` on ``device`` with two or more of ``stages`` (keys) predicted from the other
    layers' runs only (its own left out), the best ``timed`` of the ranking timed as auto does.
    Returns [(layer, recorded ms of the model's first / best, of the best of its first ``timed`` /
    best)]. ``reverse``: the ranking turned around (a model that must fail the test)."""
    runs = recorded().get(device, {}).get(op, {})
    layers: dict = {}
    for key in stages & set(runs):
        for f, rate, layer, ms in runs[key]:
            layers.setdefault(layer, {})[key] = (ms, f, rate * ms * 1e-3)
    out = []
    for layer, got in sorted(layers.items()):
        (_, f, flops), = list(got.values())[:1]
        others = {key: [r for r in runs[key] if r[2] != layer] for key in got}
        guess = predictions(others, list(got), f, flops)
        guess = {k: v for k, v in guess.items() if v is not None}
        if len(guess) < 2:
            continue
        order = sorted(guess, key=guess.get, reverse=reverse)
        best = min(got[k][0] for k in guess)
        out.append((layer, got[order[0]][0] / best, min(got[k][0] for k in order[:timed]) / best))
    return out
