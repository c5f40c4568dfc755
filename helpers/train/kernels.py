"""kernels/train/*.cl on one queue: the launches a training step makes between the course's stages,
and the buffers that let one launch update every parameter.

    k = TrainKernels(ctx, queue)
    launch = k.relu_pool(y, pooled)         # arguments checked and set once
    events = launch.enqueue()               # then each step only enqueues it

    arena = Arena(ctx, queue, {"w1": (1, 8, 3, 3), "gamma1": (8,), ...})
    arena.param("w1"), arena.grad("w1")     # DeviceTensors inside one buffer each: a plan reads the
                                            # first, writes the second, and k.sgd(arena, ...) updates all

Every launch keeps a kernel object of its own with its arguments set when it is made (a kernel's
arguments live in the object), so a step's Python work per launch is one enqueue.
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from ..engine.build import build
from ..engine.plan import DeviceLimitError
from ..engine.backends.opencl import DeviceTensor

WG = 256            # the work-group of every launch here (head_forward's tree needs a power of two)
CLASSES = 10        # model.CLASSES


class Launch:
    """One kernel, its arguments set once, its NDRange rounded up to whole work-groups."""

    def __init__(self, queue, program, name: str, items: int, args: tuple, groups: int | None = None):
        self.queue, self.name = queue, name
        self.kernel = cl.Kernel(program, name)
        limit = self.kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, queue.device)
        if WG > limit:
            raise DeviceLimitError(f"kernel {name} runs work-groups of {WG} work-items, but "
                                   f"{queue.device.name.strip()} allows it at most {limit}")
        self.kernel.set_args(*args)
        count = groups if groups is not None else -(-items // WG)
        self.global_size, self.local_size = (count * WG,), (WG,)

    def enqueue(self) -> list:
        return [cl.enqueue_nd_range_kernel(self.queue, self.kernel, self.global_size, self.local_size)]


def _same(who: str, name: str, t: DeviceTensor, shape: tuple) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{who}: {name} must have shape {tuple(shape)}, got {tuple(t.shape)}")


def _halves(who: str, shape: tuple) -> tuple:
    n, c, h, w = shape
    if h % 2 or w % 2:
        raise ValueError(f"{who}: 2x2 pooling with stride 2 needs an even height and width, got {h}x{w}")
    return n, c, h // 2, w // 2


class TrainKernels:
    """The programs of kernels/train/, built once per context; each method checks its tensors and
    returns a Launch bound to them. ``sources``: {file: text} built in a file's place (a test's
    planted fault)."""

    def __init__(self, ctx, queue, sources: dict | None = None):
        self.queue, text = queue, sources or {}
        self.pool = build(ctx, "train/pool.cl", source=text.get("train/pool.cl"))
        self.head = build(ctx, "train/head.cl", {"CLASSES": CLASSES, "WG": WG}, source=text.get("train/head.cl"))
        self.update = build(ctx, "train/sgd.cl", source=text.get("train/sgd.cl"))

    def relu_pool(self, y: DeviceTensor, a: DeviceTensor) -> Launch:
        """a = 2x2 average pooling of relu(y): y (N, C, H, W), a (N, C, H/2, W/2)."""
        _same("relu_pool", "its output", a, _halves("relu_pool", y.shape))
        n, c, h, w = y.shape
        return Launch(self.queue, self.pool, "relu_pool", a.size,
                      (y.buffer, a.buffer, np.int32(n * c), np.int32(h), np.int32(w)))

    def pool_backward(self, g: DeviceTensor, dy: DeviceTensor) -> Launch:
        """dy = pooling's gradient of g: g (N, C, H/2, W/2), dy (N, C, H, W)."""
        _same("pool_backward", "the pooled gradient", g, _halves("pool_backward", dy.shape))
        n, c, h, w = dy.shape
        return Launch(self.queue, self.pool, "pool_backward", dy.size,
                      (g.buffer, dy.buffer, np.int32(n * c), np.int32(h), np.int32(w)))

    def relu(self, y: DeviceTensor) -> Launch:
        """y = max(y, 0), in place."""
        return Launch(self.queue, self.pool, "relu", -(-y.size // 4), (y.buffer, np.int32(y.size)))

    def head_forward(self, y, fc_w, fc_b, labels, features, logits, terms, dz) -> Launch:
        """relu_pool(y) -> features, the linear layer -> logits, each sample's loss term and dz."""
        n, c, oh, ow = _halves("head_forward", y.shape)
        f = c * oh * ow
        for name, t, shape in (("fc_w", fc_w, (CLASSES, f)), ("fc_b", fc_b, (CLASSES,)), ("labels", labels, (n,)),
                               ("features", features, (n, c, oh, ow)), ("logits", logits, (n, CLASSES)),
                               ("terms", terms, (n,)), ("dz", dz, (n, CLASSES))):
            _same("head_forward", name, t, shape)
        return Launch(self.queue, self.head, "head_forward", 0,
                      (y.buffer, fc_w.buffer, fc_b.buffer, labels.buffer, features.buffer, logits.buffer,
                       terms.buffer, dz.buffer, *(np.int32(v) for v in y.shape)), groups=n)

    def head_backward(self, dz, fc_w, features, terms, dy, grad_w, grad_b, loss) -> Launch:
        """dy (pooling's and the head's input gradient), the head's gradients and the mean loss."""
        n, c, oh, ow = _halves("head_backward", dy.shape)
        f = c * oh * ow
        for name, t, shape in (("dz", dz, (n, CLASSES)), ("fc_w", fc_w, (CLASSES, f)), ("features", features, (n, c, oh, ow)),
                               ("terms", terms, (n,)), ("grad_w", grad_w, (CLASSES, f)), ("grad_b", grad_b, (CLASSES,)),
                               ("loss", loss, (1,))):
            _same("head_backward", name, t, shape)
        return Launch(self.queue, self.head, "head_backward", dy.size + CLASSES * f + CLASSES + 1,
                      (dz.buffer, fc_w.buffer, features.buffer, terms.buffer, dy.buffer, grad_w.buffer,
                       grad_b.buffer, loss.buffer, *(np.int32(v) for v in dy.shape)))

    def sgd(self, arena: "Arena", lr: float, momentum: float) -> Launch:
        """Every parameter of ``arena`` updated from its gradient: SGD with momentum, one launch."""
        return Launch(self.queue, self.update, "sgd", arena.size,
                      (arena.params.buffer, arena.grads.buffer, arena.velocity.buffer, np.int32(arena.size),
                       np.float32(lr), np.float32(momentum)))


class View(DeviceTensor):
    """A DeviceTensor that is a part of another one's buffer (an OpenCL sub-buffer), so that a plan
    writes into the whole without a copy."""

    def __init__(self, whole: DeviceTensor, offset: int, name: str, shape: tuple):
        self.whole, self.offset = whole, offset
        super().__init__(whole.ctx, whole.queue, name, shape)

    def _allocate(self, count: int):
        return self.whole.buffer.get_sub_region(self.offset * 4, count * 4)


def arena_layout(shapes: dict, align_bits: int) -> tuple[dict, int]:
    """Where each parameter lies in an arena: ({name: (offset, shape)}, size), in float32 values.
    Each starts at the next multiple of the device's sub-buffer alignment (MEM_BASE_ADDR_ALIGN, in
    bits); the size is where one more parameter would start."""
    align = max(1, align_bits // 32)                  # bits -> float32 values
    layout, offset = {}, 0
    for name, shape in shapes.items():
        layout[name] = (offset, tuple(shape))
        offset += -(-int(np.prod(shape)) // align) * align
    return layout, offset


class Arena:
    """The parameters of a network in one float32 buffer, their gradients and SGD's velocities in
    two more of the same layout; each parameter starts at the device's sub-buffer alignment, the
    gaps between them zero. ``load`` and ``read`` move all of them in one transfer."""

    def __init__(self, ctx, queue, shapes: dict):
        self.layout, self.size = arena_layout(shapes, ctx.devices[0].mem_base_addr_align)
        self.params, self.grads, self.velocity = (DeviceTensor(ctx, queue, f"arena.{what}", (self.size,))
                                                  for what in ("params", "grads", "velocity"))
        for t in (self.params, self.grads, self.velocity):
            cl.enqueue_fill_buffer(queue, t.buffer, np.float32(0), 0, t.nbytes)     # on the device: no transfer
        self._views = {(whole.name, name): View(whole, off, f"{name}.{whole.name.split('.')[1]}", shape)
                       for whole in (self.params, self.grads) for name, (off, shape) in self.layout.items()}

    def param(self, name: str) -> View:
        return self._views[(self.params.name, name)]

    def grad(self, name: str) -> View:
        return self._views[(self.grads.name, name)]

    def load(self, values: dict) -> None:
        """Every parameter from the host in one upload; the velocities zeroed on the device."""
        missing = set(self.layout) - set(values)
        if missing:
            raise ValueError(f"load: no value for {', '.join(sorted(missing))}")
        flat = np.zeros(self.size, np.float32)
        for name, (off, shape) in self.layout.items():
            v = np.asarray(values[name], np.float32)
            if v.shape != shape:
                raise ValueError(f"load: {name} must have shape {shape}, got {v.shape}")
            flat[off:off + v.size] = v.ravel()
        self.params.write(flat)
        cl.enqueue_fill_buffer(self.params.queue, self.velocity.buffer, np.float32(0), 0, self.velocity.nbytes)

    def read(self, which: str = "params") -> dict:
        """Every parameter ("params") or gradient ("grads") on the host, in one read."""
        flat = {"params": self.params, "grads": self.grads}[which].read()
        return {name: flat[off:off + int(np.prod(shape))].reshape(shape).copy()
                for name, (off, shape) in self.layout.items()}
