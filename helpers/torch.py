"""PyTorch modules whose forward and backward passes run the course's stages.

    from helpers.torch import Conv2d, BatchNorm2d
    conv = Conv2d(16, 32, 3, padding=1)                           # the default stages (DEFAULT_STAGES)
    conv = Conv2d(16, 32, 3, padding=1, stage="any_shape",        # the forward pass's stage,
                  dgrad_stage="auto", wgrad_stage="igemm")         # the input and weight gradients'
    bn = BatchNorm2d(32, stage="one_pass")                         # forward and backward

``Conv1d``, ``Conv2d`` and ``Conv3d`` (``ConvNd(rank, ...)`` picks one) are torch.nn's own classes
with the convolution replaced: the same arguments (groups, dilation, stride and padding per axis,
padding "same"/"valid", bias), the same parameters in PyTorch's layout (a state dict loads into
either), the same initialisation. Each forward pass runs op ``conv_forward``, each backward pass
``conv_dgrad`` (the input's gradient) and ``conv_wgrad`` (the weight's), through
helpers.runner.run_stage with NumPy arrays in and out. PyTorch's weight (K, C/groups, *kernel) is
the course's IOHW weight (C, K/groups, *kernel) per group: ``to_course`` and ``from_course``
convert, group by group. What no course op computes is done by PyTorch and said here: the
bias's gradient (a sum of the output's gradient), the bias itself where the stage has no fused
epilogue (the stages with ``epilogue`` add it in their kernel), and batch norm's backward pass in
evaluation mode (elementwise: the running statistics are constants).

``BatchNorm2d`` is torch.nn.BatchNorm2d with ``batchnorm_forward`` in training (the batch's
statistics, the running statistics updated by the kernel with PyTorch's momentum, or the
cumulative average when ``momentum=None``) and in evaluation (the running statistics), and
``batchnorm_backward`` for the gradients of the input, gamma and beta.

Stages. ``stage`` (and ``dgrad_stage``, ``wgrad_stage``) name a registered stage of the op, or
``"auto"``, the chooser's per-device and per-shape pick (chapter 11), which every op these modules
run registers (an op without one would be refused when the module is made, naming its stages).
Unset (None), an op runs DEFAULT_STAGES' stage on the layers it takes (the plain 2-D ones) and
ANY_SHAPE_STAGES' on the others (groups, dilation, per-side padding, 1-D and 3-D).

Devices. OpenCL stages read host arrays: tensors on the CPU are passed as NumPy views, without a
copy; a tensor on a GPU is copied to the host and its results back, and the first such call warns
once (the OpenCL device is chosen by COURSE_DEVICE, as everywhere in the course). CUDA stages
(``conv_forward``'s and ``conv_dgrad``'s ``*_cuda`` and ``tc_*`` stages) take PyTorch's CUDA tensors
where they lie: each input is handed to CuPy through DLPack and wrapped as the course's CudaTensor
around the same memory (``Borrowed``), the kernels run on PyTorch's current stream, and the
outputs come back to PyTorch through DLPack, so no activation is copied; the weight is re-laid
out per group on the GPU (a small copy), and a reduced-precision stage (fp16, bf16) reads its
tensors converted to its storage type (a copy, which that precision needs). CUDA stages run on
CuPy's current device (CUDA_VISIBLE_DEVICES picks it); this path needs an NVIDIA GPU and is tested
where one is (tests/test_torch_modules.py: the test skipped here says so).
"""
from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as F

from .engine.backends.cuda import CudaTensor
from .engine.tensor import STORAGE
from .ops.shape import conv_shape
from .runner import plan_stage, run_stage
from .stages import REGISTRY, get_stage

# the stage each op runs when none is named: a stage that exists today and runs every plain 2-D
# layer (the forward pass through chapter 11's im2col and the course GEMM; the input gradient
# through chapter 11's implicit GEMM over stride phases; the weight gradient through chapter 15's
# register-blocked implicit GEMM; batch norm through chapter 14's one-pass stage, which falls back
# to its multi-work-group stage on large channels)
DEFAULT_STAGES = {"conv_forward": "im2col", "conv_dgrad": "igemm_phases", "conv_wgrad": "igemm_blocked",
                  "batchnorm_forward": "one_pass", "batchnorm_backward": "one_pass"}
# the layers the default stages do not take (groups, dilation, per-side padding, 1-D and 3-D):
# chapter 16's stages (dw_regs runs 2-D depthwise layers and falls back to any_shape on the rest)
ANY_SHAPE_STAGES = {"conv_forward": "any_shape", "conv_dgrad": "dw_regs", "conv_wgrad": "dw_regs"}

_warned_host_copy = False


def has_auto(op: str) -> bool:
    return any(s.choose for s in REGISTRY[op])


def check_stage(op: str, stage) -> None:
    """A stage the module will run, refused when the module is made (not at its first call)."""
    if stage is None:
        return
    if stage == "auto" and not has_auto(op):
        raise ValueError(f"{op} has no stage 'auto' in this course yet; name one of its stages "
                         f"({', '.join(s.name for s in REGISTRY[op] if not s.choose)}) or leave the "
                         f"argument unset for {DEFAULT_STAGES[op]!r} (DEFAULT_STAGES)")
    get_stage(op, stage)


def stage_for(op: str, stage, shape=None) -> str:
    """The stage an op runs: the one named, else DEFAULT_STAGES' where it takes the layer's shape
    (``shape``: a convolution's ConvShape, helpers/ops/shape.py; its plain 2-D shapes), else
    ANY_SHAPE_STAGES'."""
    if stage is not None:
        return stage
    default = get_stage(op, DEFAULT_STAGES[op])
    if shape is None or shape.plain or default.any_shape:
        return default.name
    return ANY_SHAPE_STAGES[op]


# -- the weight's layout ---------------------------------------------------------------------------

def to_course(weight: torch.Tensor, groups: int) -> torch.Tensor:
    """PyTorch's (K, C/groups, *kernel) -> the course's (C, K/groups, *kernel), group by group."""
    k, cg, *kernel = weight.shape
    return (weight.reshape(groups, k // groups, cg, *kernel).transpose(1, 2)
            .reshape(groups * cg, k // groups, *kernel).contiguous())


def from_course(weight: torch.Tensor, groups: int) -> torch.Tensor:
    """The course's (C, K/groups, *kernel) -> PyTorch's (K, C/groups, *kernel)."""
    c, kg, *kernel = weight.shape
    return (weight.reshape(groups, c // groups, kg, *kernel).transpose(1, 2)
            .reshape(groups * kg, c // groups, *kernel).contiguous())


# -- running a stage on PyTorch's tensors ----------------------------------------------------------

class Borrowed(CudaTensor):
    """A CUDA array of PyTorch's as the course's CudaTensor, without a copy: ``array`` (a contiguous
    CuPy array, PyTorch's memory through DLPack) is the tensor's buffer."""

    def __init__(self, name: str, array, dtype: str):
        self._memory = array.ravel()
        super().__init__(name, array.shape, None, False, True, dtype)

    def _allocate(self, count: int):
        return self._memory


def host(t: torch.Tensor) -> np.ndarray:
    """A float32 NumPy array of ``t``: a view of a contiguous float32 tensor on the CPU, else a copy
    (from a GPU: warned once)."""
    global _warned_host_copy
    if t.device.type != "cpu" and not _warned_host_copy:
        _warned_host_copy = True
        warnings.warn(f"helpers.torch: an OpenCL stage reads host memory, so tensors on {t.device} are "
                      f"copied to the host and back at every call (CUDA stages take them where they lie)",
                      stacklevel=4)
    return t.detach().to("cpu", torch.float32).contiguous().numpy()


def run(op: str, stage: str, like: torch.Tensor, **kwargs):
    """run_stage(op, stage, **kwargs) with PyTorch tensors among the arguments: the results as
    tensors on ``like``'s device and of its dtype, in run_stage's order (a tensor or a tuple)."""
    s = get_stage(op, stage)
    if s.backend == "cuda":
        return run_cuda(op, s, like, kwargs)
    args = {k: host(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    out = run_stage(op, stage, **args)

    def back(a):
        return torch.from_numpy(np.ascontiguousarray(a)).to(like.device, like.dtype)
    return tuple(back(a) for a in out) if isinstance(out, tuple) else back(out)


def run_cuda(op: str, s, like: torch.Tensor, kwargs: dict):
    """A CUDA stage on PyTorch's CUDA tensors: the inputs borrowed through DLPack, the kernels on
    PyTorch's current stream, the outputs handed back through DLPack (no copy either way)."""
    import cupy
    if like.device.type != "cuda":
        raise ValueError(f"stage {s.key} of {op} is a CUDA stage: its tensors must be on a CUDA device, "
                         f"got {like.device}; move the model to the GPU (.cuda()) or choose an OpenCL stage")
    storage = STORAGE[s.precision]
    as_torch = torch.float16 if storage == "float16" else torch.float32
    with cupy.cuda.Device(like.device.index or 0), \
            cupy.cuda.ExternalStream(torch.cuda.current_stream(like.device).cuda_stream):
        args = {}
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.detach().to(as_torch).contiguous()
                args[k] = Borrowed(k, cupy.from_dlpack(v), storage)
            else:
                args[k] = v
        plan = plan_stage(op, s, **args)
        plan.enqueue()
        outs = {name: torch.from_dlpack(plan.tensor(name).buffer.reshape(shape)).to(like.dtype)
                for name, shape in plan.problem.outputs.items()}
    return plan.problem.result(outs)


# -- convolutions ----------------------------------------------------------------------------------

class _Convolution(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, conv):
        ctx.conv, ctx.has_bias = conv, bias is not None
        ctx.save_for_backward(x, weight)
        return conv.course_forward(x, weight, bias)

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        conv, need = ctx.conv, ctx.needs_input_grad
        dy = dy.contiguous()
        dx = conv.course_dgrad(dy, weight, x) if need[0] else None
        dw = conv.course_wgrad(x, dy, weight) if need[1] else None
        db = dy.sum(dim=(0, *range(2, dy.dim()))) if ctx.has_bias and need[2] else None
        return dx, dw, db, None


class CourseConv:
    """What Conv1d/2d/3d add to torch.nn's class of their rank: the convolution run by the course's
    stages (see the module's docstring)."""

    def _course_init(self, stage, dgrad_stage, wgrad_stage) -> None:
        if self.padding_mode != "zeros":
            raise ValueError(f"padding_mode={self.padding_mode!r}: the course's convolutions pad with zeros only")
        for op, st in (("conv_forward", stage), ("conv_dgrad", dgrad_stage), ("conv_wgrad", wgrad_stage)):
            check_stage(op, st)
        self.stages = {"conv_forward": stage, "conv_dgrad": dgrad_stage, "conv_wgrad": wgrad_stage}
        self.ran: dict = {}          # op -> the stage it last ran (after DEFAULT_STAGES' choice)

    def extra_repr(self) -> str:
        named = ", ".join(f"{op.removeprefix('conv_')}={st}" for op, st in self.stages.items() if st is not None)
        return super().extra_repr() + (f", stages: {named}" if named else "")

    def geometry(self) -> dict:
        """stride, padding (per axis, or per side for "same"), dilation and groups as the course's ops take them."""
        if self.padding == "valid":
            padding = 0
        elif isinstance(self.padding, str):          # "same": torch's pads, last axis first, (left, right) each
            pads = self._reversed_padding_repeated_twice
            padding = tuple((pads[2 * i], pads[2 * i + 1]) for i in reversed(range(len(pads) // 2)))
        else:
            padding = tuple(self.padding)
        return dict(stride=tuple(self.stride), padding=padding, dilation=tuple(self.dilation), groups=self.groups)

    def _stage_of(self, op: str, x) -> str:
        """The stage ``op`` runs on this layer (after DEFAULT_STAGES' choice), noted in ``ran``."""
        named = self.stages[op]
        if named is None:
            w_shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
            named = stage_for(op, None, conv_shape(op, tuple(x.shape), w_shape, **self.geometry()))
        self.ran[op] = named
        return named

    def course_forward(self, x, weight, bias):
        stage = self._stage_of("conv_forward", x)
        fused = bias is not None and get_stage("conv_forward", stage).epilogue
        y = run("conv_forward", stage, x, input=x, weight=to_course(weight.detach(), self.groups),
                **self.geometry(), **({"bias": bias.detach()} if fused else {}))
        if bias is not None and not fused:          # a stage without an epilogue: PyTorch adds the bias
            y = y + bias.detach().reshape(1, -1, *[1] * (y.dim() - 2))
        return y

    def course_dgrad(self, dy, weight, x):
        return run("conv_dgrad", self._stage_of("conv_dgrad", x), dy, grad_output=dy,
                   weight=to_course(weight.detach(), self.groups), input_shape=tuple(x.shape), **self.geometry())

    def course_wgrad(self, x, dy, weight):
        shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        dw = run("conv_wgrad", self._stage_of("conv_wgrad", x), dy, input=x, grad_output=dy, weight_shape=shape,
                 **self.geometry())
        return from_course(dw, self.groups)

    def _conv_forward(self, input, weight, bias):
        return _Convolution.apply(input, weight, bias, self)


def _conv_class(base: type, rank: int) -> type:
    class Conv(CourseConv, base):
        def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                     bias=True, padding_mode="zeros", device=None, dtype=None, *, stage=None, dgrad_stage=None,
                     wgrad_stage=None):
            base.__init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                          padding_mode, device, dtype)
            self._course_init(stage, dgrad_stage, wgrad_stage)
    Conv.__name__ = Conv.__qualname__ = f"Conv{rank}d"
    Conv.__doc__ = (f"torch.nn.Conv{rank}d on the course's stages: ``stage`` (forward), ``dgrad_stage`` and "
                    f"``wgrad_stage`` (backward) name a stage, 'auto', or None for DEFAULT_STAGES (helpers.torch).")
    Conv.__module__ = __name__
    return Conv


Conv1d = _conv_class(torch.nn.Conv1d, 1)
Conv2d = _conv_class(torch.nn.Conv2d, 2)
Conv3d = _conv_class(torch.nn.Conv3d, 3)
CONVS = {1: Conv1d, 2: Conv2d, 3: Conv3d}


def ConvNd(rank: int, *args, **kwargs):
    """A convolution of ``rank`` spatial axes (1, 2 or 3, as PyTorch has them) on the course's stages."""
    if rank not in CONVS:
        raise ValueError(f"rank {rank}: ConvNd makes 1-, 2- and 3-D convolutions (PyTorch's); the course's "
                         f"ops also take 4-D ones through helpers.run_stage")
    return CONVS[rank](*args, **kwargs)


# -- batch normalization ---------------------------------------------------------------------------

class _BatchNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gamma, beta, bn, factor):
        y, saved = bn.course_forward(x, gamma, beta, factor)
        ctx.bn, ctx.saved = bn, saved
        ctx.save_for_backward(x, gamma)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, gamma = ctx.saved_tensors
        dx, dgamma, dbeta = ctx.bn.course_backward(dy.contiguous(), x, gamma, ctx.saved)
        return dx, dgamma, dbeta, None, None


class BatchNorm2d(torch.nn.BatchNorm2d):
    """torch.nn.BatchNorm2d on the course's stages: ``stage`` names the stage of batchnorm_forward
    and batchnorm_backward (one stage list serves both), 'auto' (each op's own pick), or None for
    DEFAULT_STAGES' (see the module's docstring)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, stage=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        for op in ("batchnorm_forward", "batchnorm_backward"):
            check_stage(op, stage)
        self.stage = stage
        self.ran: dict = {}

    def _stage(self, op: str) -> str:
        self.ran[op] = stage_for(op, self.stage)
        return self.ran[op]

    def forward(self, x):
        self._check_input_dim(x)
        factor = None                 # the running statistics' update, as torch.nn.BatchNorm2d makes it
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        return _BatchNorm.apply(x, self.weight, self.bias, self, factor)

    def _affine(self, x):
        ones = torch.ones(self.num_features, device=x.device)
        return (self.weight if self.affine else ones), (self.bias if self.affine else torch.zeros_like(ones))

    def course_forward(self, x, gamma, beta, factor):
        """(y, what the backward pass needs): the batch's statistics in training (or without running
        statistics), the running ones in evaluation."""
        gamma, beta = self._affine(x) if gamma is None else (gamma.detach(), beta.detach())
        batch_stats = self.training or self.running_mean is None
        args = dict(x=x, gamma=gamma, beta=beta, eps=self.eps)
        if not batch_stats:
            y = run("batchnorm_forward", self._stage("batchnorm_forward"), x, training=False,
                    running_mean=self.running_mean, running_var=self.running_var, **args)
            return y, ("running", (self.running_var + self.eps).rsqrt())
        if factor is not None:
            y, mean, inv_std, rm, rv = run("batchnorm_forward", self._stage("batchnorm_forward"), x, training=True,
                                           momentum=factor, running_mean=self.running_mean,
                                           running_var=self.running_var, **args)
            with torch.no_grad():
                self.running_mean.copy_(rm)
                self.running_var.copy_(rv)
        else:
            y, mean, inv_std = run("batchnorm_forward", self._stage("batchnorm_forward"), x, training=True, **args)
        return y, ("batch", mean, inv_std)

    def course_backward(self, dy, x, gamma, saved):
        gamma_used = self._affine(x)[0].detach() if gamma is None else gamma.detach()
        if saved[0] == "batch":
            _, mean, inv_std = saved
            dx, dgamma, dbeta = run("batchnorm_backward", self._stage("batchnorm_backward"), dy, grad_output=dy,
                                    x=x, gamma=gamma_used, mean=mean, inv_std=inv_std)
        else:                          # evaluation: y is affine in x per channel; PyTorch computes it
            inv_std = saved[1].reshape(1, -1, 1, 1)
            xhat = (x - self.running_mean.reshape(1, -1, 1, 1)) * inv_std
            dx = dy * gamma_used.reshape(1, -1, 1, 1) * inv_std
            dgamma, dbeta = (dy * xhat).sum(dim=(0, 2, 3)), dy.sum(dim=(0, 2, 3))
        if gamma is None:
            dgamma = dbeta = None
        return dx, dgamma, dbeta


__all__ = ["ANY_SHAPE_STAGES", "BatchNorm2d", "Conv1d", "Conv2d", "Conv3d", "ConvNd", "DEFAULT_STAGES",
           "from_course", "to_course"]
