"""The training step on the course's stages, tensors chained on the device.

Per convolution layer: conv_forward -> batchnorm_forward -> ReLU and 2x2 average pooling
(kernels/train/pool.cl), whose output is the next layer's input tensor; only the last layer's
pooled features are read back, for the linear head and the loss (NumPy, a 10-way matrix product).
Backward: the features' gradient is uploaded, pooling's gradient (the same .cl file) gives batch
norm's grad_output on the device, batchnorm_backward (the ReLU's derivative fused: relu(y) > 0
exactly where y > 0, so batch norm's own output ``y`` serves as the mask) -> conv_wgrad and
conv_dgrad, both reading batch norm's input gradient where it lies, and conv_dgrad's input
gradient feeds the previous layer's pooling gradient where it lies. What crosses to the host in
a step: the image, the weights (updated by SGD on the host), the features and their gradient,
and the weight gradients.

Each op's stage is the chooser's (helpers/chooser.py through runner.choose_stage): conv_dgrad's
stage ``auto`` is exactly that call; the other ops have no ``auto`` stage in the registry, so the
same call is made for them here (every registered OpenCL stage that can run the layer is checked,
timed once, and the fastest cached per device and shape). The convolutions run with activation
"none": the ReLU sits after batch norm, so it is fused into batch norm's backward pass instead.
"""
from __future__ import annotations

import time
from collections import defaultdict

import numpy as np
import pyopencl as cl

from ..engine.build import build
from ..engine.devices import get_context, get_queue
from ..engine.backends.opencl import DeviceTensor
from ..engine.timing import time_events
from ..runner import choose_stage, plan_stage, prepare
from ..stages import stage_names
from . import model

WGRAD = "conv_wgrad"
HOST = "head, loss"
POOL, UNPOOL = "relu_pool", "pool_backward"     # kernels/train/pool.cl


class Pooling:
    """kernels/train/pool.cl on one queue: ReLU + 2x2 average pooling, and its gradient."""

    WG = 256

    def __init__(self, ctx, queue):
        program = build(ctx, "train/pool.cl")
        self.queue, self.kernels = queue, {name: cl.Kernel(program, name) for name in (POOL, UNPOOL)}

    def _launch(self, name: str, src: DeviceTensor, dst: DeviceTensor, full: tuple) -> cl.Event:
        n, c, h, w = full
        if h % 2 or w % 2:
            raise ValueError(f"2x2 pooling with stride 2 needs an even height and width, got {h}x{w}")
        items = dst.size
        size = -(-items // self.WG) * self.WG
        return self.kernels[name](self.queue, (size,), (self.WG,), src.buffer, dst.buffer,
                                  np.int32(n * c), np.int32(h), np.int32(w))

    def relu_pool(self, y: DeviceTensor, a: DeviceTensor) -> cl.Event:
        """a = pooled relu(y): y (N, C, H, W), a (N, C, H/2, W/2)."""
        n, c, h, w = y.shape
        if a.shape != (n, c, h // 2, w // 2):
            raise ValueError(f"relu_pool: {y.shape} pools to {(n, c, h // 2, w // 2)}, not {a.shape}")
        return self._launch(POOL, y, a, y.shape)

    def backward(self, g: DeviceTensor, dy: DeviceTensor) -> cl.Event:
        """dy = pooling's gradient of g: g (N, C, H/2, W/2), dy (N, C, H, W)."""
        n, c, h, w = dy.shape
        if g.shape != (n, c, h // 2, w // 2):
            raise ValueError(f"pool_backward: {dy.shape} pools to {(n, c, h // 2, w // 2)}, not {g.shape}")
        return self._launch(UNPOOL, g, dy, dy.shape)


def _random_like(shape, rng) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


class CourseNet:
    """One Plan per layer and op, built once (the chooser runs here), re-used by every step."""

    def __init__(self, cfg: model.Config, ctx=None, workspace_limit: int | None = None):
        self.cfg, self.ctx = cfg, get_context(ctx)
        self.queue = get_queue(self.ctx)
        self.limit = workspace_limit
        self.choices = []          # [{layer, op, how, stage}]
        self.layers = []
        rng = np.random.default_rng(0)
        for i, layer in enumerate(cfg.layers(), 1):
            n, c, h, w = layer["input"]
            k = layer["weight"][1]
            t = lambda name, shape: DeviceTensor(self.ctx, self.queue, f"{layer['name']}.{name}", shape)
            L = {"name": layer["name"], "x": t("input", layer["input"]), "w": t("weight", layer["weight"]),
                 "gamma": t("gamma", (k,)), "beta": t("beta", (k,)), "dy": t("grad_relu", (n, k, h, w))}
            conv = dict(stride=1, padding=1)
            L["conv_forward"] = self._plan(i, "conv_forward", dict(input=L["x"], weight=L["w"], **conv),
                                           dict(input=_random_like(layer["input"], rng),
                                                weight=_random_like(layer["weight"], rng), **conv))
            y = L["conv_forward"].tensor("output")
            bn = dict(eps=model.EPS, training=True)
            L["batchnorm_forward"] = self._plan(i, "batchnorm_forward", dict(x=y, gamma=L["gamma"], beta=L["beta"], **bn),
                                                dict(x=_random_like(y.shape, rng), gamma=np.ones(k, np.float32),
                                                     beta=np.zeros(k, np.float32), **bn))
            f = L["batchnorm_forward"]
            host_bwd = dict(grad_output=_random_like(y.shape, rng), x=_random_like(y.shape, rng),
                            gamma=np.ones(k, np.float32), mean=np.zeros(k, np.float32),
                            inv_std=np.ones(k, np.float32), activation="relu",
                            output=np.abs(_random_like(y.shape, rng)))
            L["batchnorm_backward"] = self._plan(i, "batchnorm_backward", dict(
                grad_output=L["dy"], x=y, gamma=L["gamma"], mean=f.tensor("mean"), inv_std=f.tensor("inv_std"),
                activation="relu", output=f.tensor("y")), host_bwd)
            dconv = L["batchnorm_backward"].tensor("grad_input")
            wg = dict(weight_shape=layer["weight"], activation="none", **conv)
            L[WGRAD] = self._plan(i, WGRAD, dict(input=L["x"], grad_output=dconv, **wg),
                                  dict(input=_random_like(layer["input"], rng),
                                       grad_output=_random_like(y.shape, rng), **wg))
            if i > 1:      # the first layer's input is the image: no gradient needed there
                dg = dict(input_shape=layer["input"], activation="none", **conv)
                L["conv_dgrad"] = self._plan(i, "conv_dgrad", dict(grad_output=dconv, weight=L["w"], **dg),
                                             dict(grad_output=_random_like(y.shape, rng),
                                                  weight=_random_like(layer["weight"], rng), **dg))
            self.layers.append(L)
        self.pool = Pooling(self.ctx, self.queue)
        n, k, h, w = self.layers[-1]["dy"].shape
        self.features = DeviceTensor(self.ctx, self.queue, "features", (n, k, h // 2, w // 2))
        self.grad_features = DeviceTensor(self.ctx, self.queue, "grad_features", self.features.shape)
        self.times = defaultdict(list)       # (layer, op) -> [ms per step], from profiling events

    def _plan(self, i: int, op: str, device_args: dict, host_args: dict):
        """The chooser's stage for this layer (timed on random data of the layer's shape), planned
        on the device tensors."""
        stage = choose_stage(op, prepare(op, **host_args), self.ctx, self.limit)
        how = "auto" if "auto" in stage_names(op) else "chooser"
        self.choices.append({"layer": f"conv{i}", "op": op, "how": how, "stage": stage})
        return plan_stage(op, stage, ctx=self.ctx, workspace_limit=self.limit, **device_args)

    def _run(self, L: dict, op: str) -> None:
        self._events.append((L["name"], op, L[op].enqueue()))

    def _read(self, t: DeviceTensor) -> np.ndarray:
        """A tensor read back once the queued kernels are done (so the host's time below counts
        NumPy's work only, not the wait for the device)."""
        self.queue.finish()
        return t.read()

    def load(self, params: dict) -> None:
        """Upload the current weights (they change on the host after every SGD update)."""
        for i, L in enumerate(self.layers, 1):
            for name in ("w", "gamma", "beta"):
                L[name].write(params[f"{name}{i}" if name != "w" else f"w{i}"])

    def forward(self, params: dict, x: np.ndarray) -> np.ndarray:
        """Both convolution blocks on the device; returns the pooled features of the last one (read
        to the host for the head). Each block's pooling writes the next block's input tensor."""
        self.layers[0]["x"].write(x)
        for i, L in enumerate(self.layers):
            self._run(L, "conv_forward")
            self._run(L, "batchnorm_forward")
            pooled = self.layers[i + 1]["x"] if i + 1 < len(self.layers) else self.features
            self._events.append((L["name"], POOL, [self.pool.relu_pool(L["batchnorm_forward"].tensor("y"), pooled)]))
        return self._read(self.features)

    def step(self, params: dict, x: np.ndarray, labels: np.ndarray):
        """One training step: (loss, logits, gradients); the per-op device times are kept."""
        self._events, self._host = [], 0.0
        self.load(params)
        a = self.forward(params, x)
        t0 = time.perf_counter()
        loss, logits, g, dw, db = model.head(a, labels, params["fc_w"], params["fc_b"])
        grads = {"fc_w": dw, "fc_b": db}
        self._host += time.perf_counter() - t0
        self.grad_features.write(g)
        for i in range(len(self.layers), 0, -1):
            L = self.layers[i - 1]
            # the gradient after this block's pooling: the head's, or the next block's input gradient
            g = self.grad_features if i == len(self.layers) else self.layers[i]["conv_dgrad"].tensor("grad_input")
            self._events.append((L["name"], UNPOOL, [self.pool.backward(g, L["dy"])]))
            for op in ("batchnorm_backward", WGRAD, "conv_dgrad"):     # conv1 has no conv_dgrad
                if op in L:
                    self._run(L, op)
        for i, L in enumerate(self.layers, 1):      # read once every kernel of the step is queued
            b = L["batchnorm_backward"]
            grads[f"w{i}"] = L[WGRAD].tensor("grad_weight").read()
            grads[f"gamma{i}"] = b.tensor("grad_gamma").read()
            grads[f"beta{i}"] = b.tensor("grad_beta").read()
        self.queue.finish()
        self.record()
        return loss, logits, grads

    def record(self) -> None:
        for layer, op, events in self._events:
            self.times[(layer, op)].append(time_events(events))
        self.times[("host", HOST)].append(self._host * 1e3)

    def evaluate(self, params: dict, x: np.ndarray, labels: np.ndarray) -> float:
        """Accuracy over the full batches of (x, labels), batch norm with each batch's statistics."""
        self.load(params)
        b, right, seen = self.cfg.batch, 0, 0
        for s in range(0, len(labels) - b + 1, b):
            self._events, self._host = [], 0.0
            a = self.forward(params, x[s:s + b])
            logits = a.reshape(b, -1) @ params["fc_w"].T + params["fc_b"]
            right += int((logits.argmax(axis=1) == labels[s:s + b]).sum())
            seen += b
        self.queue.finish()
        return right / seen
