"""A small torchvision-style ResNet trained twice, from the same initial weights on the same batches:
once with helpers.torch's Conv2d and BatchNorm2d (the course's stages), once with torch.nn's own
layers (cuDNN on an NVIDIA GPU, PyTorch's own kernels on a CPU). Needs PyTorch.

    stem    conv3x3 (1 -> widths[0]) -> batch norm -> ReLU                 (no max pooling: small images)
    stage i blocks[i] BasicBlocks of widths[i] channels; the first block of every stage after the
            first halves the side (stride 2) and its shortcut is a 1x1 stride-2 conv -> batch norm
    block   conv3x3 -> BN -> ReLU -> conv3x3 -> BN, + shortcut, -> ReLU       (torchvision's BasicBlock)
    head    global average pooling -> linear (10 classes) -> cross-entropy

    cfg = SIZES["ci"]
    out = train(cfg)                  # both models trained; losses, step times, accuracies, comparison
    print(summary(out))

The data are scikit-learn's digits (helpers/train/data.py: shipped in its wheel, nothing downloaded),
upsampled by ``cfg.scale``. Both models take every step on the same batch, one after the other, so
the machine's state is the same for both. A step's time is its wall time, from the batch's upload to
the loss on the host, with the device waited for before and after it (torch.cuda.synchronize on a
GPU); the first ``cfg.warmup`` steps (the course's kernels are built in them, cuDNN's autotuner
searches) are left out of the median and the spread.

``python -m helpers.train --network torch_resnet --size ci|small|full`` writes the record into
results/ (training_torch_resnet_<device>.json); ``recorded_gpu()`` reads it back (None until one is
recorded).
"""
from __future__ import annotations

import copy
import datetime as dt
import platform
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .. import torch as course_torch
from ..engine.devices import device_info, get_context
from ..engine.timing import Timing
from . import data
from .resnet_stage import ROUNDING_FACTOR, differences
from .resnet_stage import agrees as within_rounding
from .run import compare

# The first step against torch.nn's float64 step: each gradient and updated weight of the course within
# FIRST_STEP_RTOL of the tensor's largest value, or ROUNDING_FACTOR times torch.nn's own float32
# distance (resnet_stage.agrees). 1e-3, not resnet_stage's 1e-4: at the full size the last block's
# batch-norm gamma gradient sums 8,192 products per channel that cancel to a small result, and the
# course's float32 tree sum lands 4.7e-4 of the largest value from float64 there (measured on a CPU
# through PoCL), where PyTorch's CPU kernel lands 4e-7; at the ci size every tensor is within 2e-6.
FIRST_STEP_RTOL = 1e-3
COMPARE_STEPS = 10        # the losses compared step by step: the ci size's steps, which every size has
# The losses of those steps against torch.nn's float64 run of the same batches, by the first step's
# rule: each within LOSS_RTOL of the float64 loss, or ROUNDING_FACTOR times torch.nn's own float32
# distance at that step. Training amplifies rounding: at the full size on the H200 torch.nn's float32
# losses and the course's both drift from each other by up to 8e-3 within ten steps (batch norm
# and momentum carry each step's last bits into the next), so two float32 runs can no longer be held
# to 1e-3 of each other; held to float64, a run that rounds as float32 does passes and a wrong
# gradient, far beyond rounding, does not.
LOSS_RTOL = 1e-3


@dataclass(frozen=True)
class ResNetConfig:
    scale: int = 1              # the 8x8 digits upsampled to 8*scale x 8*scale
    batch: int = 16
    widths: tuple = (4, 8)      # channels of each stage
    blocks: tuple = (1, 1)      # BasicBlocks per stage
    steps: int = 10
    warmup: int = 2             # steps left out of the step time's median and spread
    lr: float = 0.05
    momentum: float = 0.9
    seed: int = 0

    @property
    def side(self) -> int:
        return 8 * self.scale

    def as_dict(self) -> dict:
        return {**asdict(self), "widths": list(self.widths), "blocks": list(self.blocks), "side": self.side}


SIZES = {
    # two blocks on 8x8 images, ten steps: seconds on 2 CPU cores (CI, the notebook's default)
    "ci": ResNetConfig(),
    # 16x16 images, three stages, two epochs of the training digits: a minute or two on a laptop's CPU
    "small": ResNetConfig(scale=2, batch=32, widths=(8, 16, 32), blocks=(1, 1, 1), steps=80, warmup=3),
    # ResNet-20's shape (three stages of three blocks) at 32x32, batch 128: a GPU's
    "full": ResNetConfig(scale=4, batch=128, widths=(16, 32, 64), blocks=(3, 3, 3), steps=100, warmup=5, lr=0.02),
}


class BasicBlock(nn.Module):
    """torchvision's BasicBlock, its layers taken from ``conv`` and ``bn`` (classes)."""

    def __init__(self, conv, bn, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = conv(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = bn(c_out)
        self.conv2 = conv(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = bn(c_out)
        self.downsample = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(conv(c_in, c_out, 1, stride=stride, bias=False), bn(c_out))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    """The network of the module's docstring, built from ``conv`` and ``bn``: helpers.torch's classes
    or torch.nn's."""

    def __init__(self, cfg: ResNetConfig, conv=nn.Conv2d, bn=nn.BatchNorm2d, classes: int = 10):
        super().__init__()
        w0 = cfg.widths[0]
        self.stem = nn.Sequential(conv(1, w0, 3, padding=1, bias=False), bn(w0), nn.ReLU())
        blocks, c = [], w0
        for i, (width, n) in enumerate(zip(cfg.widths, cfg.blocks)):
            for j in range(n):
                blocks.append(BasicBlock(conv, bn, c, width, 2 if i > 0 and j == 0 else 1))
                c = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, classes)
        for m in self.modules():              # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean(dim=(2, 3)))


def twins(cfg: ResNetConfig, device: str = "cpu") -> tuple[ResNet, ResNet]:
    """(course, torch.nn): the network on helpers.torch's modules and on torch.nn's, with the same
    initial weights (made once from ``cfg.seed``, loaded into the other), on ``device``."""
    torch.manual_seed(cfg.seed)
    course = ResNet(cfg, course_torch.Conv2d, course_torch.BatchNorm2d)
    reference = ResNet(cfg)
    reference.load_state_dict(course.state_dict())
    return course.to(device), reference.to(device)


def who_computes(model: ResNet) -> list[tuple[str, str, str]]:
    """(layer, what it is, who computes it) for every layer of ``model``: the course's stages (each op
    with the stage it last ran) for helpers.torch's modules, PyTorch for the rest."""
    rows = []
    for name, m in model.named_modules():
        if isinstance(m, course_torch.CourseConv):
            ran = ", ".join(f"{op} {st}" for op, st in m.ran.items()) or "(not run yet)"
            rows.append((name, f"conv {m.kernel_size[0]}x{m.kernel_size[1]} stride {m.stride[0]}", f"course: {ran}"))
        elif isinstance(m, course_torch.BatchNorm2d):
            ran = ", ".join(f"{op} {st}" for op, st in m.ran.items()) or "(not run yet)"
            rows.append((name, "batch norm", f"course: {ran}"))
        elif isinstance(m, (nn.ReLU, nn.Linear)):
            rows.append((name, type(m).__name__, "PyTorch"))
    return rows


def fair_fp32(device: str) -> None:
    """On a GPU, torch.nn in float32 as the course's stages compute: cuDNN's TF32 off (PyTorch allows it
    in convolutions by default), its autotuner on (ops/vendor.py: fp32_torch). Before any step that is
    compared or timed, the first step's included."""
    if device.startswith("cuda"):
        from ..ops.vendor import fp32_torch
        fp32_torch()


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def step(model: ResNet, opt, x: np.ndarray, labels: np.ndarray, device: str) -> tuple[float, float]:
    """One SGD step on a batch: (the loss before the update, the step's wall time in ms, from the
    batch's upload to the loss on the host, the device waited for before and after)."""
    _sync(device)
    t0 = time.perf_counter()
    dtype = next(model.parameters()).dtype
    xt, yt = torch.from_numpy(x).to(device, dtype), torch.from_numpy(labels).to(device)
    opt.zero_grad()
    loss = F.cross_entropy(model(xt), yt)
    loss.backward()
    opt.step()
    value = loss.item()
    _sync(device)
    return value, (time.perf_counter() - t0) * 1e3


def accuracy(model: ResNet, x: np.ndarray, labels: np.ndarray, batch: int, device: str) -> float:
    """Test accuracy in evaluation mode (batch norm with its running statistics), over full batches."""
    model.eval()
    right = seen = 0
    with torch.no_grad():
        for s in range(0, len(labels) - batch + 1, batch):
            z = model(torch.from_numpy(x[s:s + batch]).to(device))
            right += int((z.argmax(dim=1).cpu().numpy() == labels[s:s + batch]).sum())
            seen += batch
    model.train()
    return right / seen


def schedule(cfg: ResNetConfig, n: int) -> list[np.ndarray]:
    """The batches of the first ``cfg.steps`` steps: epoch after epoch of data.batches."""
    out, epoch = [], 0
    while len(out) < cfg.steps:
        out += data.batches(n, cfg.batch, epoch, cfg.seed)
        epoch += 1
    return out[:cfg.steps]


def first_step(cfg: ResNetConfig, device: str = "cpu") -> dict:
    """One step of the course's model and of torch.nn's, in float32, on the first batch, each against
    torch.nn's step in float64 from the same weights: per parameter, max |float32 - float64| / max
    |float64| of its gradient ("grad NAME") and of its value after the update ("after NAME"), for the
    course ("course") and for torch.nn in float32 ("pytorch_fp32": how far rounding alone takes a step)."""
    fair_fp32(device)
    xtr, ytr, _, _ = data.digits(cfg.scale, seed=cfg.seed)
    b = schedule(cfg, len(ytr))[0]
    course, fp32 = twins(cfg, device)
    fp64 = copy.deepcopy(fp32).double()
    tensors = {}
    for key, m in (("course", course), ("pytorch_fp32", fp32), ("fp64", fp64)):
        step(m, torch.optim.SGD(m.parameters(), lr=cfg.lr, momentum=cfg.momentum), xtr[b], ytr[b], device)
        tensors[key] = {f"{what} {name}": (p.grad if what == "grad" else p).detach().cpu().double().numpy()
                        for name, p in m.named_parameters() for what in ("grad", "after")}
    return {key: differences(tensors[key], tensors["fp64"]) for key in ("course", "pytorch_fp32")}


def train(cfg: ResNetConfig, device: str = "cpu", progress: bool = False) -> dict:
    """Both models trained on the same batches; the record: per model its losses, wall time per step
    (all steps, and the median and spread after the warm-up), final test accuracy; the stages the
    course's modules ran, and the comparison (helpers/train/run.py's: losses step by step, accuracies)."""
    fair_fp32(device)
    xtr, ytr, xte, yte = data.digits(cfg.scale, seed=cfg.seed)
    models = twins(cfg, device)
    fp64 = copy.deepcopy(models[1]).double()
    opts = [torch.optim.SGD(m.parameters(), lr=cfg.lr, momentum=cfg.momentum) for m in models]
    losses, times = ([], []), ([], [])
    batches = schedule(cfg, len(ytr))
    opt64 = torch.optim.SGD(fp64.parameters(), lr=cfg.lr, momentum=cfg.momentum)
    losses64 = [step(fp64, opt64, xtr[b], ytr[b], device)[0] for b in batches[:COMPARE_STEPS]]
    del fp64, opt64
    if progress:
        from tqdm.auto import tqdm
        batches = tqdm(batches, desc="both models")
    for b in batches:
        for i, (m, opt) in enumerate(zip(models, opts)):
            loss, ms = step(m, opt, xtr[b], ytr[b], device)
            losses[i].append(loss)
            times[i].append(ms)
    recs = []
    for i, m in enumerate(models):
        recs.append({"losses": losses[i], "step_ms": times[i], "step_time": Timing(times[i][cfg.warmup:]).summary(),
                     "accuracy": [accuracy(m, xte, yte, cfg.batch, device)]})
    course, reference = recs
    course["stages"] = [{"layer": layer, "what": what, "who": who} for layer, what, who in who_computes(models[0])]
    out = {"course": course, "pytorch": reference, "fp64_losses": losses64,
           "comparison": {**compare({k: course[k] for k in ("losses", "accuracy")},
                                    {k: reference[k] for k in ("losses", "accuracy")}, steps=COMPARE_STEPS),
                          **against_fp64(course["losses"], reference["losses"], losses64)}}
    out["comparison"]["step_time_ratio"] = course["step_time"]["median_ms"] / reference["step_time"]["median_ms"]
    out["test_samples"] = len(yte) - len(yte) % cfg.batch
    return out


def record(cfg: ResNetConfig, size: str, device: str = "cpu", progress: bool = False) -> dict:
    """What results/ keeps: the training of both models with the OpenCL device the course's stages ran
    on (COURSE_DEVICE, as helpers.torch chooses it), PyTorch's device and versions, the date."""
    from ..ops.vendor import versions
    out = {"kind": "training_torch", "network": "torch_resnet",
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "python": platform.python_version(),
           "device": device_info(get_context(None)), "size": size, "config": cfg.as_dict(),
           "torch": {"version": torch.__version__, "device": device, "threads": torch.get_num_threads(),
                     **(versions() if device.startswith("cuda") else {})},
           "grad_rtol": FIRST_STEP_RTOL, "rounding_factor": ROUNDING_FACTOR, "first_step": first_step(cfg, device)}
    out.update(train(cfg, device, progress))
    return out


def against_fp64(course: list, fp32: list, fp64: list) -> dict:
    """The losses of the first steps against the float64 run: each step's relative distance of the
    course and of torch.nn's float32 run, and whether the course's is within LOSS_RTOL or
    ROUNDING_FACTOR times torch.nn's at every step."""
    ref = np.abs(np.array(fp64))
    c = np.abs(np.array(course[:len(fp64)]) - fp64) / ref
    t = np.abs(np.array(fp32[:len(fp64)]) - fp64) / ref
    return {"fp64_steps": len(fp64), "course_vs_fp64": float(c.max()), "pytorch_vs_fp64": float(t.max()),
            "loss_rtol": LOSS_RTOL,
            "losses_agree_fp64": bool((c <= np.maximum(LOSS_RTOL, ROUNDING_FACTOR * t)).all())}


def agrees(first: dict) -> bool:
    """The first step's check (first_step's distances): see FIRST_STEP_RTOL."""
    return within_rounding(first, FIRST_STEP_RTOL)


def verdict(rec: dict) -> str:
    """The record's agreement in words, without its measured numbers (what the notebook checks)."""
    first, c = rec["first_step"], rec["comparison"]
    word = lambda ok: "agree" if ok else "DISAGREE"
    return "\n".join([
        f"first step, every gradient and updated weight against torch.nn's float64 step: {word(agrees(first))} "
        f"(within {rec['grad_rtol']:g} of the tensor's largest value, or {rec['rounding_factor']} times torch.nn's "
        f"own float32 distance)",
        f"losses of the first {c['fp64_steps']} steps against torch.nn's float64 run: {word(c['losses_agree_fp64'])} "
        f"(within {c['loss_rtol']:g}, or {rec['rounding_factor']} times torch.nn's own float32 distance, at each step)",
        f"final test accuracies: {word(c['accuracy_agrees'])} (within {100 * c['accuracy_tol']:g} points)"])


def first_step_table(rec: dict, rows: int = 5) -> str:
    """The parameters whose first step lies farthest from float64, the course's and torch.nn's distances."""
    first = rec["first_step"]
    worst = sorted(first["course"], key=first["course"].get, reverse=True)[:rows]
    lines = [f"{'parameter':<36}{'course':>10}{'torch.nn':>10}   (max |float32 - float64| / max |float64|)"]
    lines += [f"{k:<36}{first['course'][k]:>10.1e}{first['pytorch_fp32'][k]:>10.1e}" for k in worst]
    return "\n".join(lines)


def step_table(rec: dict) -> str:
    """Each model's step time after the warm-up: median and interquartile range, and the ratio."""
    lines = [f"{'model':<34}{'median ms':>11}{'IQR ms':>20}{'steps':>7}"]
    names = (f"course stages ({rec['device']['name'].strip()})", f"torch.nn ({rec['torch']['device']})")
    for name, key in zip(names, ("course", "pytorch")):
        t = rec[key]["step_time"]
        lines.append(f"{name[:33]:<34}{t['median_ms']:>11.2f}{t['q1_ms']:>11.2f}-{t['q3_ms']:<8.2f}{t['repeats']:>7}")
    lines.append(f"course / torch.nn, median step: x{rec['comparison']['step_time_ratio']:.2f}")
    return "\n".join(lines)


def summary(rec: dict) -> str:
    c, p = rec["course"], rec["pytorch"]
    return "\n".join([
        f"{rec['device']['name'].strip()} (course stages) and PyTorch {rec['torch']['version']} on {rec['torch']['device']}: "
        f"ResNet {rec['config']['blocks']} blocks of {rec['config']['widths']} channels, batch {rec['config']['batch']}, "
        f"{rec['config']['side']}x{rec['config']['side']}, {len(c['losses'])} steps",
        f"loss, course:   {c['losses'][0]:.4f} -> {c['losses'][-1]:.4f}, test accuracy {c['accuracy'][-1]:.3f}",
        f"loss, torch.nn: {p['losses'][0]:.4f} -> {p['losses'][-1]:.4f}, test accuracy {p['accuracy'][-1]:.3f}",
        verdict(rec), step_table(rec)])


def recorded_gpu() -> dict | None:
    """The first GPU's record in results/ (training_torch_resnet_<device>.json), or None when no GPU
    run is recorded yet."""
    from ..analysis.results import load
    runs = [r for r in load("training_torch_resnet_*.json") if r.get("network") == "torch_resnet"
            and r["device"].get("type") == "GPU"]
    return runs[0] if runs else None
