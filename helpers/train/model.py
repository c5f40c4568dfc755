"""The network, its initial weights, and the NumPy reference of every part of its training step.

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

    # the network's ends: a linear head with the loss (the step reads back the loss); no input
    # gradient (the first block's input is the image)
    head = True
    input_grad = False

    def layers(self) -> list[dict]:
        """The two convolution blocks: input shape, weight shape (IOHW), stride, and whether a 2x2
        average pooling follows the ReLU (helpers/train/course.py builds any such list)."""
        c1, c2 = self.channels
        n, h = self.batch, self.side
        return [{"name": "conv1", "input": (n, 1, h, h), "weight": (1, c1, 3, 3), "stride": 1, "pool": True},
                {"name": "conv2", "input": (n, c1, h // 2, h // 2), "weight": (c1, c2, 3, 3), "stride": 1, "pool": True}]

    def as_dict(self) -> dict:
        return {**asdict(self), "channels": list(self.channels), "side": self.side}


SMALL = Config()
# lr 0.02, not 0.05: at 0.05 the full network's loss jumps from 2.4 to 6.6 in its first steps, and
# that jump amplifies rounding so much that PyTorch in float32 and in float64 differ by 2e-3 after
# 20 steps, more than the comparison's tolerance; at 0.02 they differ by 1e-5 and the loss falls
# smoothly (tests/test_training.py keeps it so).
FULL = Config(scale=4, batch=128, channels=(32, 64), epochs=8, lr=0.02)


def block_output(layer: dict) -> tuple:
    """(N, K, OH, OW) of a block's output: a 3x3 convolution with padding 1, then the pooling's halving."""
    n, _, h, w = layer["input"]
    s, k = layer["stride"], layer["weight"][1]
    oh, ow = (h - 1) // s + 1, (w - 1) // s + 1
    return (n, k, oh // 2, ow // 2) if layer["pool"] else (n, k, oh, ow)


def parameter_shapes(cfg) -> dict:
    """Every parameter's name and shape: w, gamma, beta per block, then the head's fc_w and fc_b."""
    shapes = {}
    for i, layer in enumerate(cfg.layers(), 1):
        k = layer["weight"][1]
        shapes.update({f"w{i}": tuple(layer["weight"]), f"gamma{i}": (k,), f"beta{i}": (k,)})
    if cfg.head:
        _, k, oh, ow = block_output(cfg.layers()[-1])
        shapes.update({"fc_w": (CLASSES, k * oh * ow), "fc_b": (CLASSES,)})
    return shapes


def init_params(cfg) -> dict:
    """Seeded initial weights: He-normal convolutions, batch norm gamma=1 beta=0, a uniform head."""
    for layer in cfg.layers():
        n, _, h, w = layer["input"]
        if layer["pool"] and (h % 2 or w % 2):
            raise ValueError(f"{layer['name']}: its input is {h}x{w}, but a 2x2 pooling follows it: the sides "
                             f"must be even (chapter 15's image side must be a multiple of 4)")
    shapes = parameter_shapes(cfg)
    rng = np.random.default_rng(cfg.seed)
    p = {}
    for name, shape in shapes.items():
        if name.startswith("w"):
            c, k, r, s = shape
            p[name] = (rng.standard_normal(shape) * np.sqrt(2.0 / (c * r * s))).astype(np.float32)
        elif name.startswith("gamma"):
            p[name] = np.ones(shape, np.float32)
        elif name.startswith("beta"):
            p[name] = np.zeros(shape, np.float32)
    if cfg.head:
        bound = 1.0 / np.sqrt(shapes["fc_w"][1])
        p["fc_w"] = rng.uniform(-bound, bound, shapes["fc_w"]).astype(np.float32)
        p["fc_b"] = rng.uniform(-bound, bound, CLASSES).astype(np.float32)
    return p


# --- NumPy (float32): the references of kernels/train/*.cl, which the course's step runs instead --

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

def blocks_forward(params: dict, x: np.ndarray, layers: list[dict]):
    """Convolution (padding 1) -> batch norm -> ReLU (-> 2x2 average pooling) per block, from
    helpers/ops/reference.py (float64 inside): each block's (input, convolution, y, mean, inv_std),
    and the last block's output."""
    acts, a = [], x
    for i, layer in enumerate(layers, 1):
        conv = ref.conv2d_forward(a, params[f"w{i}"], layer["stride"], 1)
        y, mean, inv_std = ref.batchnorm_forward(conv, params[f"gamma{i}"], params[f"beta{i}"], EPS, True)
        acts.append((a, conv, y, mean, inv_std))
        y = y.astype(np.float32)
        a = relu_pool(y) if layer["pool"] else np.maximum(y, 0)
    return acts, a


def blocks_backward(params: dict, acts: list, layers: list[dict], g: np.ndarray, input_grad: bool = False):
    """The gradients of every block's weight, gamma and beta from ``g``, the gradient of the last
    block's output (after its ReLU and pooling); with ``input_grad``, the first block's input
    gradient too (else None)."""
    grads, g_input = {}, None
    for i in range(len(layers), 0, -1):
        layer = layers[i - 1]
        inp, conv, y, mean, inv_std = acts[i - 1]
        dy = pool_backward(g) if layer["pool"] else g
        dconv, grads[f"gamma{i}"], grads[f"beta{i}"] = ref.batchnorm_backward(
            dy, conv, params[f"gamma{i}"], mean, inv_std, "relu", np.maximum(y, 0))
        grads[f"w{i}"] = ref.conv2d_wgrad(inp, dconv, params[f"w{i}"].shape, layer["stride"], 1)
        if i > 1 or input_grad:
            g = ref.conv2d_dgrad(dconv, params[f"w{i}"], inp.shape, layer["stride"], 1).astype(np.float32)
            g_input = g if i == 1 else None
    return {k: np.asarray(v, np.float32) for k, v in grads.items()}, g_input


def reference_step(params: dict, x: np.ndarray, labels: np.ndarray):
    """(loss, logits, gradients) of one training step of this network from helpers/ops/reference.py
    (float64 inside)."""
    layers = [{"stride": 1, "pool": True} for i in (1, 2)]
    acts, a = blocks_forward(params, x, layers)
    loss, logits, g, dw, db = head(a, labels, params["fc_w"], params["fc_b"])
    grads, _ = blocks_backward(params, acts, layers, g)
    return loss, logits, {**grads, "fc_w": np.asarray(dw, np.float32), "fc_b": np.asarray(db, np.float32)}


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
