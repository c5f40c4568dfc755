"""The training step on the course's stages: every launch on one in-order queue, nothing computed
on the host, and no host synchronization inside the step.

Per block (convolution -> batch norm -> ReLU, with or without 2x2 average pooling): conv_forward
-> batchnorm_forward -> relu_pool (kernels/train/pool.cl) into the next block's input tensor, or
ReLU in place when the block does not pool. With a head (chapter 15's network), the last block's
ReLU + pooling, the linear layer, softmax and the loss are one launch (kernels/train/head.cl:
head_forward), and one more (head_backward) gives the head's gradients, the mean loss and, fused
with pooling's gradient, the gradient batch norm's backward pass reads. Backward per block:
pooling's gradient where the block pools -> batchnorm_backward (the ReLU's derivative fused: batch
norm's own output serves as the mask, relu(y) > 0 exactly where y > 0) -> conv_wgrad and
conv_dgrad, which read batch norm's input gradient where it lies; conv_dgrad writes the previous
block's gradient where that block's next launch reads it. Then one launch of kernels/train/sgd.cl
updates every parameter: the parameters, their gradients and SGD's velocities each live in one
buffer (kernels.Arena), and every plan reads and writes its part of them in place.

What crosses to the host in a training step (``train_step``): the images and labels in (two
uploads), the loss out (one read, which is also the step's only wait for the device). Without a
head (``cfg.head`` False: helpers/train/resnet_stage.py) the step starts from a given gradient of
the last block's output and moves nothing.

Each op's stage is the chooser's (runner.choose_stage): conv_dgrad's stage ``auto`` is exactly
that call; the other ops have no ``auto`` stage in the registry, so the same call is made for them
here (every registered OpenCL stage that can run the layer is checked, timed once, and the fastest
cached per device and shape). ``stages`` fixes them instead: {op: stage} for every layer,
{(layer, op): stage} for one (a quick run on the CPU; a recorded run's choices again).
The convolutions run with activation "none": the ReLU sits after batch norm, so its derivative is
fused into batch norm's backward pass instead.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..engine.devices import get_context, get_queue
from ..engine.backends.opencl import DeviceTensor
from ..engine.timing import time_events
from ..runner import choose_stage, plan_stage, prepare
from ..stages import stage_names
from . import model
from .kernels import CLASSES, Arena, Launch, TrainKernels
from .model import parameter_shapes

WGRAD = "conv_wgrad"
# the launches of kernels/train/*.cl: op name -> file (the stage column of the records)
FIXED = {"relu_pool": "train/pool.cl", "pool_backward": "train/pool.cl", "relu": "train/pool.cl",
         "head_forward": "train/head.cl", "head_backward": "train/head.cl", "sgd": "train/sgd.cl"}
POOL, UNPOOL = "relu_pool", "pool_backward"


def _random_like(shape, rng) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def labels_as_floats(labels, n: int) -> np.ndarray:
    """Class indices as the float32 values head.cl reads, after checking them."""
    labels = np.asarray(labels)
    if labels.shape != (n,) or labels.dtype.kind not in "iu":
        raise ValueError(f"labels must be {n} integer class indices (shape ({n},)), got {labels.dtype} {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= CLASSES):
        raise ValueError(f"labels must lie in 0..{CLASSES - 1}, got {labels.min()}..{labels.max()}")
    return labels.astype(np.float32)


class CourseNet:
    """One Plan per block and op (the chooser runs here) and the train kernels' launches, built once
    and enqueued by every step; the parameters live on the device (``load``, ``parameters``)."""

    def __init__(self, cfg, ctx=None, workspace_limit: int | None = None, stages: dict | None = None):
        self.cfg, self.ctx = cfg, get_context(ctx)
        self.queue = get_queue(self.ctx)
        self.limit, self.stages = workspace_limit, dict(stages or {})
        self.choices = []          # [{layer, op, how, stage}]
        self.kernels = k = TrainKernels(self.ctx, self.queue)
        layers = cfg.layers()
        if cfg.head and not layers[-1]["pool"]:
            raise ValueError("the head pools the last block's output: its last layer needs pool=True")
        self.arena = Arena(self.ctx, self.queue, parameter_shapes(cfg))
        n = cfg.batch
        t = lambda name, shape: DeviceTensor(self.ctx, self.queue, name, shape)
        self.x = t("images", layers[0]["input"])
        self.blocks, a = [], self.x
        rng = np.random.default_rng(0)
        for i, layer in enumerate(layers, 1):
            self.blocks.append(self._block(i, layer, a, rng))
            a = self.blocks[-1]["out"]
        last = self.blocks[-1]
        if cfg.head:
            self.labels, self.loss = t("labels", (n,)), t("loss", (1,))
            self.logits, self.dz = t("logits", (n, CLASSES)), t("dz", (n, CLASSES))
            self.terms = t("loss_terms", (n,))
            y = last["batchnorm_forward"].tensor("y")
            fc_w, fc_b = self.arena.param("fc_w"), self.arena.param("fc_b")
            self.head = [k.head_forward(y, fc_w, fc_b, self.labels, a, self.logits, self.terms, self.dz),
                         k.head_backward(self.dz, fc_w, a, self.terms, last["dy"], self.arena.grad("fc_w"),
                                         self.arena.grad("fc_b"), self.loss)]
        self.grad_output = last["dy"] if not cfg.head else None     # given: set_output_gradient
        self.update = k.sgd(self.arena, cfg.lr, cfg.momentum)
        self.times = defaultdict(list)       # (layer, op) -> [ms per step], from profiling events
        self._events = []

    def _block(self, i: int, layer: dict, a: DeviceTensor, rng) -> dict:
        """The plans and launches of one block reading ``a``; its output tensor in B["out"]."""
        cfg = self.cfg
        t = lambda name, shape: DeviceTensor(self.ctx, self.queue, f"{layer['name']}.{name}", shape)
        conv = dict(stride=layer["stride"], padding=1)
        last = i == len(cfg.layers())
        B = {"name": layer["name"], "pool": layer["pool"], "launches": {}}
        P, G = self.arena.param, self.arena.grad
        w_host = _random_like(layer["weight"], rng)
        B["conv_forward"] = self._plan(layer, "conv_forward", dict(input=a, weight=P(f"w{i}"), **conv),
                                       dict(input=_random_like(layer["input"], rng), weight=w_host, **conv))
        z = B["conv_forward"].tensor("output")
        kk = z.shape[1]
        ones, zeros = np.ones(kk, np.float32), np.zeros(kk, np.float32)
        bn = dict(eps=model.EPS, training=True)
        B["batchnorm_forward"] = self._plan(layer, "batchnorm_forward", dict(x=z, gamma=P(f"gamma{i}"), beta=P(f"beta{i}"), **bn),
                                            dict(x=_random_like(z.shape, rng), gamma=ones, beta=zeros, **bn))
        f = B["batchnorm_forward"]
        y = f.tensor("y")
        if layer["pool"]:
            nn, _, oh, ow = z.shape
            B["out"] = t("features" if last and cfg.head else "pooled", (nn, kk, oh // 2, ow // 2))
            if not (last and cfg.head):                   # else fused into head_forward
                B["launches"][POOL] = self.kernels.relu_pool(y, B["out"])
        else:
            B["out"] = y                                 # ReLU in place: batch norm's backward reads it as its mask
            B["launches"]["relu"] = self.kernels.relu(y)
        B["dy"] = t("grad_output" if last and not cfg.head else "grad_relu", z.shape)
        host_bwd = dict(grad_output=_random_like(z.shape, rng), x=_random_like(z.shape, rng), gamma=ones,
                        mean=zeros, inv_std=ones, activation="relu", output=np.abs(_random_like(z.shape, rng)))
        B["batchnorm_backward"] = self._plan(layer, "batchnorm_backward", dict(
            grad_output=B["dy"], x=z, gamma=P(f"gamma{i}"), mean=f.tensor("mean"), inv_std=f.tensor("inv_std"),
            activation="relu", output=y), host_bwd)
        B["batchnorm_backward"].bind(grad_gamma=G(f"gamma{i}"), grad_beta=G(f"beta{i}"))
        dconv = B["batchnorm_backward"].tensor("grad_input")
        wg = dict(weight_shape=layer["weight"], activation="none", **conv)
        B[WGRAD] = self._plan(layer, WGRAD, dict(input=a, grad_output=dconv, **wg),
                              dict(input=_random_like(layer["input"], rng), grad_output=_random_like(z.shape, rng), **wg))
        B[WGRAD].bind(grad_weight=G(f"w{i}"))
        if i > 1 or cfg.input_grad:                      # the image needs no gradient
            dg = dict(input_shape=layer["input"], activation="none", **conv)
            B["conv_dgrad"] = self._plan(layer, "conv_dgrad", dict(grad_output=dconv, weight=P(f"w{i}"), **dg),
                                         dict(grad_output=_random_like(z.shape, rng), weight=w_host, **dg))
            g = B["conv_dgrad"].tensor("grad_input")
            if i > 1:
                prev = self.blocks[-1]
                if prev["pool"]:                          # the previous block's pooling gradient reads it
                    prev["launches"][UNPOOL] = self.kernels.pool_backward(g, prev["dy"])
                else:                                     # written where batch norm's backward reads it
                    B["conv_dgrad"].bind(grad_input=prev["dy"])
            else:
                self.grad_input = g
        return B

    def _plan(self, layer: dict, op: str, device_args: dict, host_args: dict):
        """The chooser's stage for this layer (timed on random data of the layer's shape), or the one
        ``stages`` names, planned on the device tensors."""
        given = self.stages.get((layer["name"], op), self.stages.get(op))
        if given is not None:
            stage, how = given, "given"
        else:
            stage = choose_stage(op, prepare(op, **host_args), self.ctx, self.limit)
            how = "auto" if "auto" in stage_names(op) else "chooser"
        self.choices.append({"layer": layer["name"], "op": op, "how": how, "stage": stage})
        return plan_stage(op, stage, ctx=self.ctx, workspace_limit=self.limit, **device_args)

    # --- what a step enqueues ---------------------------------------------------------------

    def _forward(self) -> list:
        ops = []
        for B in self.blocks:
            ops += [(B["name"], op, B[op]) for op in ("conv_forward", "batchnorm_forward")]
            ops += [(B["name"], op, B["launches"][op]) for op in (POOL, "relu") if op in B["launches"]]
        if self.cfg.head:
            ops.append(("head", "head_forward", self.head[0]))
        return ops

    def _backward(self) -> list:
        ops = [("head", "head_backward", self.head[1])] if self.cfg.head else []
        for B in reversed(self.blocks):
            if UNPOOL in B["launches"]:
                ops.append((B["name"], UNPOOL, B["launches"][UNPOOL]))
            ops += [(B["name"], op, B[op]) for op in ("batchnorm_backward", WGRAD, "conv_dgrad") if op in B]
        return ops + [("update", "sgd", self.update)]

    def enqueue_step(self) -> list:
        """Every launch of one training step (forward, backward, the update) on the queue, from the
        tensors where they are; returns their events. Nothing waits for the device here."""
        self._events = [(layer, op, launcher.enqueue()) for layer, op, launcher in self._forward()]
        self.queue.flush()                 # the device starts on the forward pass while the host goes on
        self._events += [(layer, op, launcher.enqueue()) for layer, op, launcher in self._backward()]
        return [e for _, _, events in self._events for e in events]

    def launches_per_step(self) -> int:
        """Kernel launches in one step: every plan's steps and every train kernel."""
        return sum(len(x.steps) if not isinstance(x, Launch) else 1 for _, _, x in self._forward() + self._backward())

    # --- the host's side: a batch in, the loss out ---------------------------------------------

    def _write_batch(self, x: np.ndarray, labels=None) -> None:
        if tuple(np.shape(x)) != self.x.shape:
            raise ValueError(f"the batch must have shape {self.x.shape}, got {tuple(np.shape(x))}")
        self.x.write(x)
        if self.cfg.head:
            self.labels.write(labels_as_floats(labels, self.cfg.batch))

    def load(self, params: dict) -> None:
        """Upload every parameter (one transfer) and zero SGD's velocities: training starts here."""
        self.arena.load(params)

    def parameters(self) -> dict:
        """The parameters as they are on the device now (one read)."""
        return self.arena.read("params")

    def gradients(self) -> dict:
        """The last step's gradients (one read)."""
        return self.arena.read("grads")

    def set_output_gradient(self, g: np.ndarray) -> None:
        """Without a head: the gradient of the last block's output that every step starts from."""
        if self.grad_output is None:
            raise ValueError("this network has a head: its steps start from the loss, not a given gradient")
        self.grad_output.write(g)

    def train_step(self, x: np.ndarray, labels=None) -> float | None:
        """One training step: the batch in, every launch, the loss out (its read is the step's one
        wait for the device). Without a head: the batch in, and a wait for the step to finish."""
        self._write_batch(x, labels)
        self.enqueue_step()
        if not self.cfg.head:
            self.queue.finish()
            return None
        return float(self.loss.read()[0])

    def step(self, params: dict, x: np.ndarray, labels: np.ndarray):
        """One training step from the host weights ``params``, everything a check compares read back:
        (loss, logits, gradients). The weights on the device are updated by it; ``params`` is not."""
        self.load(params)
        loss = self.train_step(x, labels)
        return loss, self.logits.read(), self.gradients()

    def last_step_ms(self) -> float:
        """The last step's device time: from the start of its first kernel to the end of its last
        (profiling events; the gaps between launches count, the uploads and the read do not)."""
        return time_events([e for _, _, events in self._events for e in events])

    def record(self) -> None:
        """Each op's device time in the last step (profiling events), once the step is done."""
        for layer, op, events in self._events:
            self.times[(layer, op)].append(time_events(events))

    def evaluate(self, x: np.ndarray, labels: np.ndarray) -> float:
        """Accuracy over the full batches of (x, labels), batch norm with each batch's statistics."""
        b, right, seen = self.cfg.batch, 0, 0
        for s in range(0, len(labels) - b + 1, b):
            self._write_batch(x[s:s + b], labels[s:s + b])
            for _, _, launcher in self._forward():
                launcher.enqueue()
            right += int((self.logits.read().argmax(axis=1) == labels[s:s + b]).sum())
            seen += b
        return right / seen
