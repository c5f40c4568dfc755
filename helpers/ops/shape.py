"""The geometry of a convolution of any shape: 1 to 4 spatial axes, groups, dilation, a stride
per axis and a padding per side.

The three convolution operations (conv_forward, conv_dgrad, conv_wgrad) read their ``stride``,
``padding``, ``dilation`` and ``groups`` arguments here, check them against the tensors' shapes
and get a ``ConvShape``, or a one-line TypeError/ValueError that says what to change, before
anything touches a device. Conventions:

- the spatial rank is the input's number of dimensions minus 2: (N, C, W), (N, C, H, W),
  (N, C, D, H, W) or (N, C, A, D, H, W) (A: the fourth axis, in front, such as time over a
  volume); the weight is (C, K/groups, *kernel) (input channel first, as in every
  convolution of the course), grad_output (N, K, *out);
- ``stride`` and ``dilation``: one integer for every axis, or one per axis;
- ``padding``: one integer for every side, one per axis (both sides), or a (begin, end) pair per
  axis;
- ``groups`` splits the channels into groups convolved separately: input channel c belongs to
  group c // (C/groups) and reaches only that group's K/groups output channels; groups = C is
  the depthwise convolution.

A ``plain`` shape (2-D, one stride, one padding for every side, no groups, no dilation) is what
every stage of chapters 00-15 runs; the others run where a stage says it can (``any_shape``).
"""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from . import reference as ref
from .problem import positive_int

RANKS = (1, 2, 3, 4)
# the any-shape kernels' int arguments, in order (ConvShape.geometry): per axis A, D, H, W its
# input extent, output extent, kernel extent, stride, padding before and dilation
GEOMETRY = ("N", "C", "K", "G", "A", "OA", "Q", "SA", "PA", "DA", "D", "OD", "T", "SD", "PD", "DD",
            "H", "OH", "R", "SH", "PH", "DH", "W", "OW", "S", "SW", "PW", "DW")
AXES = {1: "W", 2: "H, W", 3: "D, H, W", 4: "A, D, H, W"}
KERNEL_AXES = {1: "S", 2: "R, S", 3: "T, R, S", 4: "Q, T, R, S"}


@dataclass(frozen=True)
class ConvShape:
    n: int
    c: int
    k: int
    groups: int
    size: tuple          # the input's spatial extents
    kernel: tuple        # the kernel's extents
    stride: tuple
    pads: tuple          # (begin, end) per axis
    dilation: tuple
    out: tuple           # the output's spatial extents

    @property
    def rank(self) -> int:
        return len(self.size)

    @property
    def plain(self) -> bool:
        """2-D, one stride and one padding for every side, no groups, no dilation, and a padding
        within the kernel's reach (an output that sees only padding is the any-shape stages' case)."""
        return (self.rank == 2 and self.groups == 1 and self.dilation == (1, 1)
                and len(set(self.stride)) == 1 and len({p for pair in self.pads for p in pair}) == 1
                and self.pads[0][0] <= max(self.kernel))

    @property
    def wide_padding(self) -> bool:
        """A padding larger than its axis' reach (dilation * (kernel - 1) + 1): the outputs there
        see only padding (zero, or the bias), as PyTorch and ONNX compute them."""
        return any(max(pair) > d * (r - 1) + 1 for pair, d, r in zip(self.pads, self.dilation, self.kernel))

    def dims(self) -> dict:
        """The named sizes every Problem of the three operations carries (the 2-D names too, for
        a plain shape: what the stages of chapters 00-15 read)."""
        d = {"N": self.n, "C": self.c, "K": self.k, "rank": self.rank, "groups": self.groups, "size": self.size,
             "kernel": self.kernel, "out": self.out, "strides": self.stride, "pads": self.pads,
             "dilation": self.dilation, "plain": self.plain}
        if self.plain:
            (h, w), (kh, kw), (oh, ow) = self.size, self.kernel, self.out
            d.update(H=h, W=w, OH=oh, OW=ow, KH=kh, KW=kw, stride=self.stride[0], pad=self.pads[0][0])
        return d

    def terms(self) -> int:
        """The products behind each output of the forward pass: C/groups * the kernel's taps."""
        return self.c // self.groups * prod(self.kernel)

    def flops(self) -> int:
        return 2 * self.n * self.k * prod(self.out) * self.terms()

    def text(self) -> str:
        """The shape in a label: '9x7 K4 3x3 s(1, 2) p((1, 0), (1, 1)) d(2, 1) g2' (the 2-D
        labels of chapters 00-15 for a plain shape)."""
        if self.plain:
            return f"{'x'.join(map(str, self.size))} K{self.k} {'x'.join(map(str, self.kernel))} " \
                   f"s{self.stride[0]} p{self.pads[0][0]}"
        return (f"{'x'.join(map(str, self.size))} K{self.k} {'x'.join(map(str, self.kernel))} s{self.stride} "
                f"p{self.pads} d{self.dilation} g{self.groups}")

    def geometry(self) -> tuple:
        """The any-shape kernels' int arguments: N, C, K, groups, then for each of the four axes
        (A, D, H, W; unit extents in front for 1-D to 3-D) the input extent, output extent, kernel
        extent, stride, padding before and dilation."""
        lead = 4 - self.rank
        per_axis = zip((1,) * lead + self.size, (1,) * lead + self.out, (1,) * lead + self.kernel,
                       (1,) * lead + self.stride, (0,) * lead + tuple(b for b, _ in self.pads),
                       (1,) * lead + self.dilation)
        return (self.n, self.c, self.k, self.groups, *(v for axis in per_axis for v in axis))

    def arguments(self) -> dict:
        """geometry by name (GEOMETRY): a Problem's scalars where the shape is not plain."""
        return dict(zip(GEOMETRY, self.geometry()))


def layout(kind: str, rank: int, groups: int = 1) -> str:
    """What a tensor's axes are: kind "input", "grad_output" or "weight"."""
    if kind == "input":
        return f"(N, C, {AXES[rank]})"
    if kind == "grad_output":
        return "(N, K, " + ", ".join("O" + a for a in AXES[rank].split(", ")) + ")"
    return f"(C, K{'/groups' if groups > 1 else ''}, {KERNEL_AXES[rank]})"


def rank_of(op: str, shapes: list, groups: int = 1) -> int:
    """The spatial rank the arguments agree on: ``shapes`` is [(name, shape, kind, word)] for
    the input first, then the weight and grad_output (kind: as ``layout`` takes it; word:
    "dimensions" for a tensor, "entries" for a shape tuple). The one that differs from the others
    is named; of two, the weight decides."""
    name, shape, _, word = shapes[0]
    if not len(shape) - 2 in RANKS:
        raise ValueError(f"{op}: {name} must have 3 to 6 {word} (N, C and 1 to 4 spatial axes), got {shape}")
    counts = [len(s) for _, s, _, _ in shapes]
    ndim = max(set(counts), key=lambda v: (counts.count(v), v == counts[1]))
    for name, shape, kind, word in shapes:
        if len(shape) != ndim:
            others = " and ".join(n for n, s, _, _ in shapes if len(s) == ndim)
            raise ValueError(f"{op}: {name} must have {ndim} {word} {layout(kind, ndim - 2, groups)} like {others} "
                             f"(a {ndim - 2}-D convolution), got shape {tuple(shape)}")
    return ndim - 2


def per_axis(op: str, name: str, value, rank: int, minimum: int) -> tuple:
    """One integer for every axis, or a tuple of one per axis."""
    if isinstance(value, (int, np.integer, bool, np.bool_, float)) or value is None:
        return (positive_int(op, name, value, minimum),) * rank
    entries = tuple(value) if isinstance(value, (tuple, list)) else None
    if entries is None:
        raise TypeError(f"{op}: {name} must be an integer or a tuple of one per spatial axis ({AXES[rank]}), "
                        f"got {value!r}")
    if len(entries) != rank:
        raise ValueError(f"{op}: {name} has {len(entries)} entries but the convolution is {rank}-D: give one "
                         f"integer, or one per spatial axis ({AXES[rank]})")
    return tuple(positive_int(op, f"{name}[{i}]", v, minimum) for i, v in enumerate(entries))


def per_side(op: str, value, rank: int) -> tuple:
    """Padding: one integer, one per axis, or a (begin, end) pair per axis -> ((begin, end), ...)."""
    if not isinstance(value, (tuple, list)) or not any(isinstance(v, (tuple, list)) for v in value):
        return tuple((p, p) for p in per_axis(op, "padding", value, rank, 0))
    if len(value) != rank:
        raise ValueError(f"{op}: padding has {len(value)} entries but the convolution is {rank}-D: give one "
                         f"(begin, end) pair per spatial axis ({AXES[rank]})")
    pairs = []
    for i, pair in enumerate(value):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"{op}: padding[{i}] must be a (begin, end) pair like the other entries, got {pair!r}")
        pairs.append(tuple(positive_int(op, f"padding[{i}]", p, 0) for p in pair))
    return tuple(pairs)


def conv_shape(op: str, x_shape: tuple, w_shape: tuple, *, stride=1, padding=0, dilation=1, groups=1,
               k: int | None = None, weight_name: str = "weight") -> ConvShape:
    """The checked geometry of a convolution over an input of ``x_shape`` with a weight of
    ``w_shape`` (an array's shape, or the weight_shape argument), the caller's ``stride``,
    ``padding``, ``dilation`` and ``groups`` as the three convolutions take them; ``k``: the
    output channels grad_output has (the backward passes), else groups * the weight's second extent."""
    rank = len(x_shape) - 2
    n, c, size = x_shape[0], x_shape[1], tuple(x_shape[2:])
    wc, kg, kernel = w_shape[0], w_shape[1], tuple(w_shape[2:])
    given_padding = padding
    groups = positive_int(op, "groups", groups)
    stride = per_axis(op, "stride", stride, rank, 1)
    pads = per_side(op, padding, rank)
    dilation = per_axis(op, "dilation", dilation, rank, 1)
    given = weight_name != "weight"
    if wc != c:
        iohw = "IOHW " if rank == 2 and groups == 1 else ""
        axes = f"(C_in, C_out{'/groups' if groups > 1 else ''}, {KERNEL_AXES[rank]})"
        raise ValueError(f"{op}: {weight_name} is {iohw}{axes} = {tuple(w_shape)}, so "
                         f"its first {'entry' if given else 'dimension'} must equal the input's channels C = {c}")
    if c % groups:
        raise ValueError(f"{op}: groups = {groups} must divide the input channels C = {c} (each group "
                         f"convolves C/groups of them); groups = C is the depthwise convolution")
    if k is not None and k % groups:
        raise ValueError(f"{op}: groups = {groups} must divide the output channels K = {k} (grad_output's "
                         f"second extent)")
    span = tuple(d * (r - 1) + 1 for d, r in zip(dilation, kernel))
    padded = tuple(v + b + e for v, (b, e) in zip(size, pads))
    if any(s > p for s, p in zip(span, padded)):
        plain = rank == 2 and groups == 1 and dilation == (1, 1) and len({v for pr in pads for v in pr}) == 1
        dil = "" if dilation == (1,) * rank else f" dilated by {dilation} (spanning {'x'.join(map(str, span))})"
        pad_text = pads[0][0] if plain else pads
        raise ValueError(f"{op}: a {'x'.join(map(str, kernel))} kernel{dil} does not fit in the padded "
                         f"{'x'.join(map(str, size))} input (padding {pad_text})")
    # a padding larger than the kernel's reach is accepted (PyTorch and ONNX accept it): the outputs
    # that see only padding are zero or the bias; the plain stages leave such a shape to the any-shape
    # ones (ConvShape.plain), whatever form the padding is written in
    out = tuple((p - s) // st + 1 for p, s, st in zip(padded, span, stride))
    return ConvShape(n, c, groups * kg if k is None else k, groups, size, kernel, stride, pads, dilation, out)


def check_grad_output(op: str, dy_shape: tuple, shape: ConvShape, kg: int, input_shape: tuple,
                      name_channels: bool = False) -> None:
    """grad_output must be (N, K, *out) with K = groups * the weight's second extent ``kg``."""
    k = kg * shape.groups
    if tuple(dy_shape) == (shape.n, shape.k, *shape.out) and k == shape.k:
        return
    geometry = (f"stride {shape.stride[0]}, padding {shape.pads[0][0]}" if shape.plain else
                f"stride {shape.stride}, padding {shape.pads}, dilation {shape.dilation}, groups {shape.groups}")
    channels = f" with {k} output channels" if name_channels else ""
    raise ValueError(f"{op}: grad_output must have shape {layout('grad_output', shape.rank)} = {(shape.n, k, *shape.out)} "
                     f"for input {tuple(input_shape)}, a {'x'.join(map(str, shape.kernel))} kernel{channels}, "
                     f"{geometry}; got {tuple(dy_shape)}")


def random_args(op: str, x_shape: tuple, weight_shape: tuple, stride=1, padding=0, dilation=1, groups: int = 1,
                activation: str = "none", seed: int = 0, bias: bool = False) -> dict:
    """Random, reproducible arguments of ``op`` (conv_forward, conv_dgrad, conv_wgrad) for one
    convolution of any shape: input (N, C, *size) and weight (C, K/groups, *kernel) of unit-scale
    sums, grad_output and, with an activation, the forward output its derivative is taken from;
    ``bias``: forward with a bias."""
    rng = np.random.default_rng(seed)
    taps = prod(weight_shape[2:]) * weight_shape[0] // groups
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = (rng.standard_normal(weight_shape, dtype=np.float32) / np.float32(np.sqrt(taps))).astype(np.float32)
    out = ref.output_sizes(x_shape[2:], weight_shape[2:], stride, padding, dilation)
    dy = rng.standard_normal((x_shape[0], weight_shape[1] * groups, *out), dtype=np.float32)
    geometry = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, activation=activation)
    if op == "conv_forward":
        return dict(input=x, weight=w, **geometry,
                    **({"bias": rng.standard_normal(dy.shape[1], dtype=np.float32)} if bias else {}))
    if activation != "none":
        geometry["output"] = ref.activation(activation, rng.standard_normal(dy.shape)).astype(np.float32)
    if op == "conv_dgrad":
        return dict(grad_output=dy, weight=w, input_shape=tuple(x_shape), **geometry)
    return dict(input=x, grad_output=dy, weight_shape=tuple(weight_shape), **geometry)


def gradient_layer_args(op: str, random_problem_args, layer: dict, activation: str = "none", seed: int = 0) -> dict:
    """Arguments of the input or the weight gradient (``op``) for one layer of a set in
    helpers/ops/layers.py: a layer of any shape through layer_args, a 2-D layer through the
    operation's own ``random_problem_args``."""
    if "size" in layer:                 # a layer of any shape (helpers/ops/layers.py: nd_layer)
        return layer_args(op, layer, activation, seed)
    return random_problem_args(layer["n"], layer["c"], layer["h"], layer["w"], layer["k"], layer["kernel"],
                               layer["stride"], layer["padding"], activation, seed)


def layer_args(op: str, layer: dict, activation: str = "none", seed: int = 0) -> dict:
    """random_args for a layer of an any-shape set (helpers/ops/layers.py: kind "anyshape"); the
    forward pass of a layer with an activation gets a bias too, as conv_forward.layer_args does."""
    x_shape = (layer["n"], layer["c"], *layer["size"])
    weight_shape = (layer["c"], layer["k"] // layer["groups"], *layer["kernel"])
    return random_args(op, x_shape, weight_shape, layer["stride"], layer["padding"], layer["dilation"],
                       layer["groups"], activation, seed, bias=op == "conv_forward" and activation != "none")
