"""A kernel-dominated training step: a stage of ResNet's 3x3 convolution + batch norm + ReLU blocks,
the course's step against PyTorch's (cuDNN fp32, TF32 off) from the same weights, in the same run.

    block   input            weight (IOHW)      stride   output
    conv1   (N, 64, 56, 56)  (64, 64, 3, 3)     1        (N, 64, 56, 56)     ResNet-50's res64@56
    conv2   (N, 64, 56, 56)  (64, 64, 3, 3)     1        (N, 64, 56, 56)
    conv3   (N, 64, 56, 56)  (64, 128, 3, 3)    2        (N, 128, 28, 28)    the stage's way down
    conv4   (N, 128, 28, 28) (128, 128, 3, 3)   1        (N, 128, 28, 28)    res128@28
    conv5   (N, 128, 28, 28) (128, 128, 3, 3)   1        (N, 128, 28, 28)

batch N = 64, each block convolution (padding 1, no bias) -> batch norm (the batch's statistics) ->
ReLU; no residual additions, no head. One step: the forward pass, the backward pass from a given
gradient of the last block's output (random, fixed), every input gradient including the first
block's (the stage sits inside a network), and SGD with momentum on every parameter. Random data,
no dataset. SMALL is the same stage at batch 2, 4 and 8 channels, 8x8 (the CPU's check against the
NumPy reference step).

Both steps are timed as the course times its vendor comparisons (helpers/ops/vendor.py): warm-up,
repeats, the last-level cache overwritten between repeats, the median and the spread; the device's
time from the step's first kernel to its last, by OpenCL profiling events for the course and by
PyTorch's profiler (CUPTI) for PyTorch, with CUDA events around each step beside it; and the wall
time of back-to-back steps, each waited for, for both.
"""
from __future__ import annotations

import datetime as dt
import platform
import time
from collections import Counter
from dataclasses import asdict, dataclass

import numpy as np

from ..engine import tensor as tensors
from ..engine.devices import device_info, get_context
from ..engine.timing import Timing, default_flush_bytes, time_enqueue
from . import model
from .course import CourseNet
from .run import op_rows

GRAD_RTOL = 1e-4       # max |course - reference| <= GRAD_RTOL * max |reference|, per gradient
# against PyTorch's float64 step (any size, on its device): the course's distance may be this many
# times PyTorch's float32 distance (the course's Winograd stages round differently from cuDNN's)
ROUNDING_FACTOR = 10


@dataclass(frozen=True)
class StageConfig:
    batch: int = 64
    side: int = 56
    channels: tuple = (64, 128)
    blocks: tuple = (2, 3)          # blocks at the first width, then at the second (its first strided)
    lr: float = 0.01
    momentum: float = 0.9
    seed: int = 0

    head = False                    # the step starts from a given gradient of the last block's output
    input_grad = True               # and computes the first block's input gradient too

    def layers(self) -> list[dict]:
        n, h = self.batch, self.side
        c1, c2 = self.channels
        shapes = [((n, c1, h, h), (c1, c1, 3, 3), 1)] * self.blocks[0]
        shapes += [((n, c1, h, h), (c1, c2, 3, 3), 2)] + [((n, c2, h // 2, h // 2), (c2, c2, 3, 3), 1)] * (self.blocks[1] - 1)
        return [{"name": f"conv{i}", "input": x, "weight": w, "stride": s, "pool": False}
                for i, (x, w, s) in enumerate(shapes, 1)]

    def as_dict(self) -> dict:
        return {**asdict(self), "channels": list(self.channels), "blocks": list(self.blocks),
                "layers": [{**layer, "input": list(layer["input"]), "weight": list(layer["weight"])}
                           for layer in self.layers()]}


FULL = StageConfig()
SMALL = StageConfig(batch=2, side=8, channels=(4, 8))


def batch(cfg: StageConfig) -> tuple:
    """(x, grad_output): the random input and the fixed gradient of the last block's output."""
    rng = np.random.default_rng([cfg.seed, 1])
    out = model.block_output(cfg.layers()[-1])
    return (rng.standard_normal(cfg.layers()[0]["input"]).astype(np.float32),
            rng.standard_normal(out).astype(np.float32))


def reference_step(params: dict, x: np.ndarray, grad_output: np.ndarray, cfg: StageConfig) -> tuple:
    """(gradients, input gradient) of one step from helpers/ops/reference.py (float64 inside)."""
    acts, _ = model.blocks_forward(params, x, cfg.layers())
    return model.blocks_backward(params, acts, cfg.layers(), grad_output, input_grad=cfg.input_grad)


def differences(got: dict, expected: dict) -> dict:
    """max |got - expected| / max |expected| per name."""
    return {name: float(np.abs(np.asarray(got[name], np.float64) - e).max() / max(np.abs(e).max(), 1e-30))
            for name, e in ((n, np.asarray(v, np.float64)) for n, v in expected.items())}


def course_net(cfg: StageConfig, ctx=None, stages: dict | None = None, workspace_limit: int | None = None):
    """The course's network with the step's weights, input and output gradient in place."""
    net = CourseNet(cfg, ctx, workspace_limit, stages)
    x, g = batch(cfg)
    net.load(model.init_params(cfg))
    net.x.write(x)
    net.set_output_gradient(g)
    return net


def check_course(net: CourseNet, cfg: StageConfig) -> dict:
    """One step of ``net`` (fresh weights) against the NumPy reference step: the relative difference
    of every gradient and of the input gradient."""
    params = model.init_params(cfg)
    x, g = batch(cfg)
    net.load(params)
    net.enqueue_step()
    got = {**net.gradients(), "input": net.grad_input.read()}
    grads, grad_input = reference_step(params, x, g, cfg)
    net.load(params)
    return differences(got, {**grads, "input": grad_input})


def time_course(net: CourseNet, warmup: int, repeats: int) -> dict:
    """The course's step: device time by profiling events (time_enqueue: warm-up, repeats, the cache
    flushed between them), then the wall time of ``repeats`` steps, each waited for, and each op's
    device time in those steps."""
    device = time_enqueue(net.enqueue_step, net.queue, warmup=warmup, repeats=repeats)
    wall = []
    for _ in range(repeats):
        t = time.perf_counter()
        net.enqueue_step()
        net.queue.finish()
        wall.append((time.perf_counter() - t) * 1e3)
        net.record()
    return {"device": {**device.summary(), "times_ms": device.times_ms,
                       "method": "OpenCL profiling events: first kernel start to last kernel end, per step"},
            "wall": {**Timing(wall).summary(), "times_ms": wall,
                     "method": "host clock: enqueue every launch, wait for the queue, per step"},
            "ops": op_rows(net)}


def torch_gradients(cfg: StageConfig, params: dict, device: str, dtype) -> dict:
    """One PyTorch step's gradients (and the input's) in ``dtype``, from ``params``."""
    import torch
    from .torch_twin import TorchNet
    twin = TorchNet(cfg, {k: v.astype(dtype) for k, v in params.items()}, device)
    x, g = (torch.from_numpy(a.astype(dtype)).to(device) for a in batch(cfg))
    x.requires_grad_(cfg.input_grad)
    twin.step_from_gradient(x, g)
    return {**twin.host_gradients(), "input": x.grad.detach().cpu().numpy()}


def time_torch(cfg: StageConfig, params: dict, warmup: int, repeats: int, flush_bytes: int, device: str) -> dict:
    """PyTorch's step on ``device``: device time by its profiler and by CUDA events (vendor.time_cuda,
    the same warm-up, repeats and flush as the course's), and the wall time."""
    import torch
    from ..ops.vendor import time_cuda, versions
    from .torch_twin import TorchNet
    twin = TorchNet(cfg, params, device)
    x, g = (torch.from_numpy(a).to(device) for a in batch(cfg))
    x.requires_grad_(cfg.input_grad)
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    out = {"version": torch.__version__, "device": device}
    if device != "cpu":
        out.update(versions())
        out["device_time"] = {k: v for k, v in time_cuda(lambda: twin.step_from_gradient(x, g), warmup, repeats,
                                                         flush_bytes).items() if k != "kernel_names"}
    wall = []
    for i in range(warmup + repeats):
        t = time.perf_counter()
        twin.step_from_gradient(x, g)
        sync()
        if i >= warmup:
            wall.append((time.perf_counter() - t) * 1e3)
    out["wall"] = {**Timing(wall).summary(), "times_ms": wall,
                   "method": "host clock: the step, then torch.cuda.synchronize, per step"}
    return out


def agreement(course: dict, cfg: StageConfig, params: dict, device: str) -> dict:
    """The course's gradients and PyTorch's float32 ones, each against PyTorch's float64 step on
    the same device: how far rounding alone takes a float32 step, and where the course stands."""
    exact = torch_gradients(cfg, params, device, np.float64)
    return {"course": differences(course, exact),
            "pytorch_fp32": differences(torch_gradients(cfg, params, device, np.float32), exact)}


def agrees(a: dict, rtol: float = GRAD_RTOL) -> bool:
    """Each gradient of the course within ROUNDING_FACTOR times PyTorch's float32 distance from
    float64, or within ``rtol``."""
    return all(a["course"][k] <= max(rtol, ROUNDING_FACTOR * a["pytorch_fp32"][k]) for k in a["course"])


def measure(cfg: StageConfig = FULL, ctx=None, torch_device: str | None = None, warmup: int = 3,
            repeats: int = 20, stages: dict | None = None, reference: bool | None = None) -> dict:
    """The record results/ keeps: both steps timed, the course's gradients against the NumPy
    reference step (``reference``; by default at the SMALL size only: at the full size it takes
    minutes on the host) and against PyTorch's (on ``torch_device``), the device, driver and date."""
    ctx = get_context(ctx)
    t0 = time.perf_counter()
    net = course_net(cfg, ctx, stages)
    setup_s = time.perf_counter() - t0
    out = {"kind": "training_step", "network": "resnet_stage",
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "python": platform.python_version(),
           "device": device_info(ctx), "config": cfg.as_dict(), "grad_rtol": GRAD_RTOL,
           "rounding_factor": ROUNDING_FACTOR}
    if cfg == SMALL if reference is None else reference:
        out["reference"] = check_course(net, cfg)
    params = model.init_params(cfg)
    net.load(params)
    before = Counter(tensors.TRANSFERS)
    net.enqueue_step()
    net.queue.finish()
    moved = dict(Counter(tensors.TRANSFERS) - before)
    course_grads = {**net.gradients(), "input": net.grad_input.read()}
    out["course"] = {"choices": net.choices, "launches_per_step": net.launches_per_step(), "setup_s": setup_s,
                     "transfers_per_step": moved, **time_course(net, warmup, repeats)}
    if torch_device is not None:
        out["pytorch_agreement"] = agreement(course_grads, cfg, params, torch_device)
        out["pytorch"] = time_torch(cfg, params, warmup, repeats, default_flush_bytes(ctx) or 256 * 2**20, torch_device)
        out["comparison"] = ratios(out)
    return out


def ratios(rec: dict) -> dict:
    """The course's median step time over PyTorch's: wall, and device (where PyTorch has it)."""
    c, p = rec["course"], rec["pytorch"]
    out = {"wall_ratio": c["wall"]["median_ms"] / p["wall"]["median_ms"]}
    if "device_time" in p:
        out["device_ratio"] = c["device"]["median_ms"] / p["device_time"]["median_ms"]
        out["device_ratio_events"] = c["device"]["median_ms"] / p["device_time"]["events_median_ms"]
    return out


def summary(rec: dict) -> str:
    """The record in a few lines: the step times, the ratios, the agreement of the gradients."""
    c = rec["course"]
    lines = [f"{rec['device']['name']}: ResNet stage, batch {rec['config']['batch']}, {len(rec['config']['layers'])} "
             f"blocks; {c['launches_per_step']} launches per step",
             f"course:  device {c['device']['median_ms']:.3f} ms (IQR {c['device']['q1_ms']:.3f}-{c['device']['q3_ms']:.3f}), "
             f"wall {c['wall']['median_ms']:.3f} ms"]
    if "reference" in rec:
        d = rec["reference"]
        worst = max(d, key=d.get)
        lines.append(f"gradients against the NumPy reference step: {'agree' if d[worst] <= rec['grad_rtol'] else 'DIFFER'} "
                     f"(largest relative difference {d[worst]:.1e}, {worst})")
    if "pytorch_agreement" in rec:
        a = rec["pytorch_agreement"]
        worst = max(a["course"], key=a["course"].get)
        lines.append(f"gradients against PyTorch's float64 step: {'agree' if agrees(a) else 'DIFFER'} (largest relative "
                     f"difference {a['course'][worst]:.1e}, {worst}; PyTorch's float32 step: "
                     f"{max(a['pytorch_fp32'].values()):.1e})")
    if "pytorch" in rec:
        p, r = rec["pytorch"], rec["comparison"]
        dev = (f"device {p['device_time']['median_ms']:.3f} ms (events {p['device_time']['events_median_ms']:.3f}), "
               if "device_time" in p else "")
        lines.append(f"PyTorch {p['version']} ({p['device']}): {dev}wall {p['wall']['median_ms']:.3f} ms")
        lines.append("course / PyTorch: " + ", ".join(f"{k.removesuffix('_ratio').replace('_', ' by ')} x{v:.3g}"
                                                      for k, v in r.items()))
    return "\n".join(lines)


def recorded() -> list[dict]:
    """The ResNet stage's records in results/ (training_resnet_stage_<device>.json), GPUs first."""
    from ..analysis.results import load
    runs = [r for r in load("training_resnet_stage_*.json") if r.get("network") == "resnet_stage"]
    return sorted(runs, key=lambda r: r["device"].get("type") != "GPU")
