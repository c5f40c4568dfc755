"""The network, its initial weights, the parts that run on the host, and the NumPy reference step.

    input (N, 1, H, W)
    conv1 3x3 pad 1 -> batch norm -> ReLU -> 2x2 average pool
    conv2 3x3 pad 1 -> batch norm -> ReLU -> 2x2 average pool
    flatten -> linear -> softmax cross-entropy (mean over the batch)

Convolution weights are IOHW (C, K, R, S), the layout of ``weight`` in every course op. Average
pooling rather than max pooling: its gradient has no arg-max, so two implementations cannot route a
gradient differently where two values are (nearly) tied, and the step-by-step comparison with
PyTorch compares arithmetic, not tie-breaking.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..ops import reference as ref

EPS = 1e-5          # batch norm's epsilon (PyTorch's default)
CLASSES = 10


@dataclass(frozen=True)
class Config:
    scale: int = 2              # 8x8 digits upsampled to 16x16
    batch: int = 32
    channels: tuple = (8, 16)
    epochs: int = 3
    lr: float = 0.05
    momentum: float = 0.9
    seed: int = 0

    @property
    def side(self) -> int:
        return 8 * self.scale

    def layers(self) -> list[dict]:
        """The two convolution layers: input shape and weight shape (IOHW)."""
        c1, c2 = self.channels
        n, h = self.batch, self.side
        return [{"name": "conv1", "input": (n, 1, h, h), "weight": (1, c1, 3, 3)},
                {"name": "conv2", "input": (n, c1, h // 2, h // 2), "weight": (c1, c2, 3, 3)}]

    def as_dict(self) -> dict:
        return {**asdict(self), "channels": list(self.channels), "side": self.side}


SMALL = Config()
# lr 0.02, not 0.05: at 0.05 the full network's loss jumps from 2.4 to 6.6 in its first steps, and
# that jump amplifies rounding so much that PyTorch in float32 and in float64 differ by 2e-3 after
# 20 steps, more than the comparison's tolerance; at 0.02 they differ by 1e-5 and the loss falls
# smoothly (tests/test_training.py keeps it so).
FULL = Config(scale=4, batch=128, channels=(32, 64), epochs=8, lr=0.02)


def init_params(cfg: Config) -> dict:
    """Seeded initial weights: He-normal convolutions, batch norm gamma=1 beta=0, a uniform head."""
    if cfg.side % 4:
        raise ValueError(f"the image side {cfg.side} must be a multiple of 4 (two 2x2 poolings)")
    rng = np.random.default_rng(cfg.seed)
    p = {}
    for i, layer in enumerate(cfg.layers(), 1):
        c, k, r, s = layer["weight"]
        p[f"w{i}"] = (rng.standard_normal((c, k, r, s)) * np.sqrt(2.0 / (c * r * s))).astype(np.float32)
        p[f"gamma{i}"] = np.ones(k, np.float32)
        p[f"beta{i}"] = np.zeros(k, np.float32)
    features = cfg.channels[1] * (cfg.side // 4) ** 2
    bound = 1.0 / np.sqrt(features)
    p["fc_w"] = rng.uniform(-bound, bound, (CLASSES, features)).astype(np.float32)
    p["fc_b"] = rng.uniform(-bound, bound, CLASSES).astype(np.float32)
    return p


# --- the parts that run on the host (NumPy, float32); ReLU + pooling are the reference of ------
# --- kernels/train/pool.cl, which the course's step runs instead ---------------------------------

def relu_pool(y: np.ndarray) -> np.ndarray:
    """ReLU, then 2x2 average pooling with stride 2."""
    n, c, h, w = y.shape
    return np.maximum(y, 0).reshape(n, c, h // 2, 2, w // 2, 2).mean(axis=(3, 5), dtype=np.float32)


def pool_backward(grad_pooled: np.ndarray) -> np.ndarray:
    """The gradient of 2x2 average pooling: each output's gradient / 4 to its four inputs. It is the
    gradient after the ReLU; the ReLU's derivative is fused into batch norm's backward pass."""
    g = np.repeat(np.repeat(grad_pooled, 2, axis=2), 2, axis=3)
    return np.ascontiguousarray(g * np.float32(0.25), dtype=np.float32)


def head(features: np.ndarray, labels: np.ndarray, fc_w: np.ndarray, fc_b: np.ndarray):
    """Linear layer and mean softmax cross-entropy: (loss, logits, d features, d fc_w, d fc_b)."""
    n = features.shape[0]
    flat = features.reshape(n, -1)
    logits = flat @ fc_w.T + fc_b
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = float(-logp[np.arange(n), labels].mean())
    dz = np.exp(logp)
    dz[np.arange(n), labels] -= 1
    dz = (dz / n).astype(np.float32)
    return loss, logits, (dz @ fc_w).reshape(features.shape), dz.T @ flat, dz.sum(axis=0)


def sgd(params: dict, grads: dict, velocity: dict, lr: float, momentum: float) -> None:
    """SGD with momentum, PyTorch's form: v = momentum * v + g; p -= lr * v (in place)."""
    for name, g in grads.items():
        v = velocity.get(name)
        velocity[name] = g.astype(np.float32) if v is None else (momentum * v + g).astype(np.float32)
        params[name] -= np.float32(lr) * velocity[name]


# --- the NumPy reference step ----------------------------------------------------------------

def reference_step(params: dict, x: np.ndarray, labels: np.ndarray):
    """(loss, logits, gradients) of one training step from helpers/ops/reference.py (float64)."""
    acts, a = [], x
    for i in (1, 2):
        conv = ref.conv2d_forward(a, params[f"w{i}"], 1, 1)
        y, mean, inv_std = ref.batchnorm_forward(conv, params[f"gamma{i}"], params[f"beta{i}"], EPS, True)
        acts.append((a, conv, y, mean, inv_std))
        a = relu_pool(y.astype(np.float32))
    loss, logits, g, dw, db = head(a, labels, params["fc_w"], params["fc_b"])
    grads = {"fc_w": dw, "fc_b": db}
    for i in (2, 1):
        inp, conv, y, mean, inv_std = acts[i - 1]
        dconv, grads[f"gamma{i}"], grads[f"beta{i}"] = ref.batchnorm_backward(
            pool_backward(g), conv, params[f"gamma{i}"], mean, inv_std, "relu", np.maximum(y, 0))
        grads[f"w{i}"] = ref.conv2d_wgrad(inp, dconv, params[f"w{i}"].shape, 1, 1)
        if i > 1:
            g = ref.conv2d_dgrad(dconv, params[f"w{i}"], inp.shape, 1, 1)
    return loss, logits, {k: np.asarray(v, np.float32) for k, v in grads.items()}


def compare_gradients(got: dict, expected: dict, rtol: float = 1e-4) -> list[str]:
    """One line per gradient: does max |got - expected| stay below rtol * max |expected|? The line
    names the gradient and the verdict only, the same at every size of the network (a shape that
    differs is named, as a reason for DIFFERS)."""
    lines = []
    for name in ("w1", "gamma1", "beta1", "w2", "gamma2", "beta2", "fc_w", "fc_b"):
        g, e = np.asarray(got[name], np.float64), np.asarray(expected[name], np.float64)
        if g.shape != e.shape:
            lines.append(f"{name:<7}shape {g.shape} for {e.shape}: DIFFERS")
            continue
        lines.append(f"{name:<7}{'matches' if np.abs(g - e).max() <= rtol * np.abs(e).max() else 'DIFFERS'}")
    return lines
