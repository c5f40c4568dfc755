"""What an operation's arguments become once validated: the Problem a stage runs on.

Each operation (helpers/ops/*.py) turns run_stage's keyword arguments into a Problem, raising
TypeError or ValueError that names what is wrong, before anything touches a device. Every stage
of the operation's kernels takes the same arguments in the same order:
``(inputs..., outputs..., scalars...)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ..engine.tensor import STORAGE, Tensor, check_host, from_storage, to_storage, to_tf32

INT32_MAX = 2**31 - 1


@dataclass
class Problem:
    op: str
    inputs: dict[str, np.ndarray]              # read-only tensors (float32 or float16 arrays, or
                                               # device tensors), kernel arguments in order
    outputs: dict[str, tuple]                  # name -> shape of each float32 result, in order
    scalars: dict[str, int]                    # int32 kernel arguments, in order
    defines: dict = field(default_factory=dict)  # structural JIT parameters every stage is built with
    dims: dict = field(default_factory=dict)     # named sizes for launch geometry and requirements
    aliases: dict = field(default_factory=dict)  # input name -> input whose buffer it shares (unused input)
    flops: int = 0                               # useful floating-point operations
    min_bytes: int = 0                           # bytes a perfect kernel moves: inputs read once, outputs written once
    flops_formula: str = ""
    bytes_formula: str = ""
    returns: Callable | None = None              # outputs dict -> what run_stage returns
    label: str = ""

    def on_host(self, dtype: str = "float32", tf32: tuple = ()) -> "Problem":
        """This problem with float32 NumPy inputs holding what a stage storing ``dtype`` reads:
        device tensors read back (only here, when a reference is computed), arrays rounded to
        ``dtype`` (float16, bfloat16) as the upload rounds them; ``tf32``: the names of the inputs
        a tensor-core stage rounds to TF32 as mma operands (chapter 13; the others it reads in
        float32)."""
        def host(name, a):
            if isinstance(a, Tensor):
                a = a.read().astype(np.float32)
            else:
                a = from_storage(to_storage(a, dtype), dtype).astype(np.float32, copy=False)
            return to_tf32(a) if name in tf32 else a
        if dtype == "float32" and not tf32 and all(isinstance(a, np.ndarray) and a.dtype == np.float32
                                                   for a in self.inputs.values()):
            return self
        return replace(self, inputs={name: host(name, a) for name, a in self.inputs.items()})

    def bytes_moved(self, precision: str = "fp32") -> int:
        """min_bytes for a stage that stores its tensors in ``precision``: the ops count 4-byte
        values; fp16 and bf16 stages (and the vendor timed in them) move 2 bytes per value."""
        return self.min_bytes if STORAGE[precision] == "float32" else self.min_bytes // 2

    def result(self, outputs: dict):
        if self.returns is not None:
            return self.returns(outputs)
        values = [outputs[name] for name in self.outputs]
        return values[0] if len(values) == 1 else tuple(values)


# the activations the kernels fuse, by their codes in kernels/common/course.h (ACT_*)
ACT_CODES = {"none": 0, "relu": 1, "sigmoid": 2, "tanh": 3}


def reject_unknown(op: str, kwargs: dict, allowed) -> None:
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(f"{op}: unknown argument(s) {', '.join(unknown)}; "
                        f"expected some of {', '.join(sorted(allowed))}")


def tensor(op: str, name: str, value, ndim: int | None = None, layout: str = "NCHW"):
    """A float32 (or float16), C-contiguous, non-empty array of ``ndim`` dimensions, or a
    device tensor (DeviceTensor, CudaTensor) of that shape in ``layout`` (left on the device), or
    a clear error."""
    if value is None:
        raise TypeError(f"{op}: argument {name} is required")
    if isinstance(value, Tensor):
        if ndim is not None and len(value.shape) != ndim:
            raise ValueError(f"{op}: {name} must have {ndim} dimensions, got device tensor shape {value.shape}")
        if ndim == 4 and value.layout != layout:
            raise ValueError(f"{op}: {name} must be a {layout} tensor, got a {value.layout} device tensor")
        return value
    check_host(name, value, who=op)        # one rule with DeviceTensor.from_array (engine/tensor.py)
    if ndim is not None and value.ndim != ndim:
        raise ValueError(f"{op}: {name} must have {ndim} dimensions, got shape {value.shape}")
    if value.size == 0:
        raise ValueError(f"{op}: {name} has a zero-sized dimension, shape {value.shape}")
    if not value.flags.c_contiguous:
        raise ValueError(f"{op}: {name} must be C-contiguous (a view such as a transpose or a slice "
                         f"is not); pass np.ascontiguousarray({name})")
    if value.size > INT32_MAX:
        raise ValueError(f"{op}: {name} has {value.size:,} elements; the kernels index with 32-bit "
                         f"integers, so at most {INT32_MAX:,}")
    return value


def positive_int(op: str, name: str, value, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {value}")
    return int(value)


def shape4(op: str, name: str, value, entries: str = "(N, C, H, W)", length: int | None = 4) -> tuple:
    """A tuple of ``length`` positive integers (None: of any length, checked by the caller)."""
    try:
        dims = tuple(value)
    except TypeError:
        raise TypeError(f"{op}: {name} must be a tuple {entries}, got {value!r}") from None
    if length is not None and len(dims) != length:
        raise ValueError(f"{op}: {name} must have {length} entries {entries}, got {dims}")
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{op}: {name} entries must be integers, got {dims}")
    if min(dims) <= 0:
        raise ValueError(f"{op}: {name} has a zero-sized or negative dimension: {dims}")
    return tuple(int(d) for d in dims)


def activation_output(op: str, act, y, codes: dict, grad_output: np.ndarray):
    """(activation, output): the activation's name ``act``, checked against ``codes``, and the
    forward output ``y`` its derivative is computed from (None with no activation), checked
    against grad_output."""
    if act not in codes:
        raise ValueError(f"{op}: activation must be one of {', '.join(codes)}, got {act!r}")
    if act == "none":
        if y is not None:
            raise ValueError(f"{op}: output is only used with an activation; activation is 'none'")
        return act, None
    if y is None:
        raise TypeError(f"{op}: activation {act!r} needs output (the forward output after the "
                        f"activation) to compute its derivative")
    y = tensor(op, "output", y, len(grad_output.shape))
    if y.shape != grad_output.shape:
        raise ValueError(f"{op}: output must have grad_output's shape {grad_output.shape}, got {y.shape}")
    return act, y


def conv_problem_parts(shape) -> tuple:
    """(scalars, defines) of a convolution's Problem from its ConvShape (helpers/ops/shape.py): a
    plain 2-D shape's int32 arguments (N, C, H, W, K, OH, OW, PAD) and structural defines (KH, KW,
    STRIDE), what every stage of chapters 00-15 is built with; any other shape's geometry as the
    any-shape stages take it (ConvShape.arguments), and no structural define."""
    if not shape.plain:
        return shape.arguments(), {}
    d = shape.dims()
    return ({"N": d["N"], "C": d["C"], "H": d["H"], "W": d["W"], "K": d["K"], "OH": d["OH"], "OW": d["OW"],
             "PAD": d["pad"]}, {"KH": d["KH"], "KW": d["KW"], "STRIDE": d["stride"]})


FLOPS_2D = "2·N·K·OH·OW·C·R·S"
FLOPS_ANY = "2·N·K·|output positions|·(C/groups)·|kernel taps|"


def shape_requires(stage, p: Problem):
    """None, or why ``stage`` cannot run a convolution of this shape: the stages of chapters
    00-15 run plain 2-D convolutions (ConvShape.plain); the any-shape stages (``any_shape=True``) run every shape."""
    if p.dims["plain"] or stage.any_shape:
        return None
    return ("it runs 2-D convolutions with one stride and one padding for every side (at most the kernel's "
            "extent), without groups or dilation")


def backward_conv_problem(op: str, inputs: dict, outputs: dict, shape, act: str, act_code: int,
                          has_output: bool, bytes_formula: str) -> Problem:
    """The Problem of a convolution's input or weight gradient (conv_dgrad, conv_wgrad): the same
    int32 arguments and structural defines (conv_problem_parts; ACT beside them), dims and FLOP
    count from ``shape`` (a ConvShape). Without an activation the unused ``output`` argument
    shares grad_output's buffer. min_bytes counts every input read once and every output written
    once."""
    moved = sum(a.size for name, a in inputs.items() if has_output or name != "output") + \
        sum(int(np.prod(dims)) for dims in outputs.values())
    scalars, defines = conv_problem_parts(shape)
    n, c = shape.n, shape.c
    return Problem(
        op=op, inputs=inputs, outputs=outputs, scalars=scalars, defines={**defines, "ACT": act_code},
        dims={**shape.dims(), "activation": act},
        aliases={} if has_output else {"output": "grad_output"},
        flops=shape.flops(),
        min_bytes=4 * moved,
        flops_formula=f"{FLOPS_2D if shape.plain else FLOPS_ANY} (one multiply-add per weight use, as for the "
                      f"forward pass)",
        bytes_formula=bytes_formula,
        label=f"N{n} C{c} {shape.text()} {act}",
    )
