"""The any-shape tier of the course's grids (chapter 16): the depthwise shapes and every kind of
convolution the course accepts beyond chapter 02's (groups, dilation, strides and padding per axis
or per side, 1 to 4 spatial axes).

tests/shapes.py puts ANY_SHAPE after the fixed grid of every convolution (tests/test_stages.py
runs every stage on it); chapter 16's kernel exercise (helpers/chapters/kernel_exercises.py) runs
a learner's kernel over the same cases. It lives here, in the package, so that both read one list.
"""
from __future__ import annotations

from .shape import random_args

# 2-D depthwise convolutions with channel multiplier 1 (groups = C = K), the depthwise stages'
# (16_dw_tiles, 16_dw_regs): 3x3, 5x5, 7x7, 1x1 and 3x5 filters, strides 1-3 (per axis too),
# dilation 2, padding per side; widths W and output widths OW on and off multiples of 4 (their
# float4 paths, at least MIN_PER_PATH each), planes smaller than a tile and larger than it in
# both directions (37 x 61, 45 x 40, 20 x 36: several tiles, the last partial)
DEPTHWISE = [
    ((2, 5, 13, 11), (5, 1, 3, 3), 1, 1, 1, 5, "none"),
    ((1, 3, 9, 16), (3, 1, 3, 3), 2, 1, 1, 3, "relu"),
    ((2, 4, 12, 12), (4, 1, 7, 7), 1, 3, 1, 4, "tanh"),
    ((1, 6, 17, 19), (6, 1, 3, 3), (2, 1), ((1, 0), (2, 1)), 2, 6, "sigmoid"),
    ((1, 2, 37, 61), (2, 1, 5, 5), (1, 3), ((2, 1), (0, 2)), (2, 1), 2, "none"),
    ((3, 7, 8, 8), (7, 1, 3, 3), 2, 1, 1, 7, "none"),
    ((1, 4, 20, 36), (4, 1, 3, 3), 1, 1, 1, 4, "relu"),
    ((2, 3, 7, 7), (3, 1, 7, 7), 1, 3, 1, 3, "none"),
    ((1, 5, 14, 14), (5, 1, 3, 3), 2, ((0, 1), (0, 1)), 1, 5, "tanh"),
    ((1, 8, 24, 28), (8, 1, 3, 3), 1, 2, 2, 8, "sigmoid"),
    ((2, 2, 19, 33), (2, 1, 5, 5), 1, 2, 1, 2, "none"),
    ((1, 3, 45, 40), (3, 1, 3, 3), 2, 1, 1, 3, "relu"),
    ((1, 4, 11, 20), (4, 1, 1, 1), 1, 0, 1, 4, "none"),
    ((1, 4, 11, 16), (4, 1, 1, 1), 2, 0, 1, 4, "tanh"),
    ((2, 3, 10, 13), (3, 1, 3, 5), (1, 2), ((1, 1), (2, 2)), (1, 2), 3, "relu"),
    ((1, 6, 9, 24), (6, 1, 7, 7), 1, 3, 1, 6, "none"),
    ((1, 2, 5, 6), (2, 1, 3, 3), 3, ((2, 0), (1, 2)), 1, 2, "sigmoid"),
    ((1, 3, 16, 15), (3, 1, 3, 3), 2, 1, 2, 3, "none"),
    ((2, 5, 6, 4), (5, 1, 3, 3), 1, 1, 1, 5, "relu"),
    ((1, 7, 13, 8), (7, 1, 5, 5), 1, ((2, 2), (1, 3)), 1, 7, "tanh"),
    ((3, 2, 4, 12), (2, 1, 3, 3), (2, 2), 1, (2, 1), 2, "none"),
    ((1, 9, 11, 11), (9, 1, 3, 3), 1, ((0, 0), (1, 1)), 1, 9, "relu"),
    ((2, 4, 21, 10), (4, 1, 3, 3), 2, 1, 1, 4, "sigmoid"),
    ((1, 3, 6, 50), (3, 1, 1, 3), (1, 2), ((0, 0), (1, 1)), 1, 3, "none"),
    # degenerate extents: one channel, a 1x1 plane (one output, one tile: the slices that NVIDIA's
    # OpenCL caps at 64 along the work-group's third dimension), a single row, a single column
    ((1, 1, 1, 1), (1, 1, 3, 3), 1, 1, 1, 1, "relu"),
    ((2, 1, 1, 9), (1, 1, 3, 3), 1, 1, 1, 1, "none"),
    ((1, 2, 7, 1), (2, 1, 3, 3), 1, 1, 1, 2, "tanh"),
    ((1, 1, 2, 2), (1, 1, 1, 1), 1, 0, 1, 1, "none"),
]

# Convolutions of any shape (chapter 16), run by every stage of the three convolutions: the
# any-shape stages check them, the others refuse them by name (the last case is a plain 2-D shape
# spelled per axis and per side, which every stage runs). Each is (x shape, weight shape (C,
# K/groups, *kernel), stride, padding, dilation, groups, activation): ranks 1-4, groups with
# depthwise among them (groups = C, with channel multipliers 1 and 2), dilation on each axis,
# strides that differ per axis, padding that differs per side, unit extents, 1x1 kernels.
ANY_SHAPE = [
    ((2, 4, 11), (4, 3, 3), 2, ((1, 2),), 2, 2, "relu"),
    ((1, 5, 9), (5, 1, 5), 1, 2, 1, 5, "none"),
    ((3, 3, 13), (3, 2, 2), 3, ((1, 0),), 3, 3, "tanh"),
    ((1, 1, 1), (1, 1, 1), 1, 0, 1, 1, "sigmoid"),
    ((2, 6, 7, 9), (6, 2, 3, 3), (1, 2), ((1, 0), (2, 1)), (1, 2), 2, "none"),
    ((1, 8, 10, 6), (8, 1, 3, 3), 2, 1, 1, 8, "relu"),
    ((2, 3, 9, 9), (3, 5, 3, 3), 1, 2, 2, 1, "sigmoid"),
    ((1, 4, 8, 7), (4, 3, 3, 3), (2, 1), 1, 1, 1, "tanh"),
    ((2, 3, 6, 5), (3, 4, 2, 3), 1, ((0, 1), (1, 0)), 1, 1, "none"),
    ((1, 5, 5, 7), (5, 2, 3, 1), (1, 3), (1, 0), 1, 1, "relu"),
    ((1, 2, 4, 5, 6), (2, 3, 3, 2, 3), (1, 2, 1), ((1, 1), (0, 1), (2, 0)), (1, 1, 2), 1, "tanh"),
    ((1, 4, 3, 6, 5), (4, 1, 3, 3, 3), 1, 1, (1, 2, 1), 4, "none"),
    ((2, 6, 5, 4, 4), (6, 3, 1, 3, 3), (2, 1, 1), ((0, 0), (1, 1), (1, 1)), 1, 2, "sigmoid"),
    ((1, 3, 1, 1, 7), (3, 2, 1, 1, 3), 1, ((0, 0), (0, 0), (1, 1)), (1, 1, 3), 1, "relu"),
    ((2, 4, 6, 4, 5), (4, 2, 2, 2, 2), (1, 2, 3), ((1, 0), (1, 1), (0, 1)), (2, 1, 1), 2, "none"),
    # 4-D: depthwise with unequal strides and padding per side; grouped and dilated along the
    # fourth axis; a dense 3x3x3x3; unit extents and a stride past the kernel
    ((2, 4, 3, 4, 5, 3), (4, 1, 2, 3, 2, 2), (2, 1, 2, 1), ((1, 0), (0, 1), (1, 1), (0, 0)), (1, 2, 1, 1), 4, "relu"),
    ((1, 6, 5, 3, 4, 4), (6, 2, 3, 3, 1, 3), (1, 1, 2, 1), ((1, 1), (1, 1), (0, 0), (1, 2)), (2, 1, 1, 1), 2, "tanh"),
    ((2, 3, 4, 3, 3, 5), (3, 2, 3, 3, 3, 3), 1, 1, 1, 1, "sigmoid"),
    ((1, 2, 1, 2, 1, 3), (2, 1, 1, 2, 1, 2), (1, 1, 1, 3), ((0, 0), (1, 0), (0, 0), (0, 1)), 1, 2, "none"),
    *DEPTHWISE,
    # a stride and a dilation without a common factor on each axis (3 and 2, 2 and 3): the input
    # gradient's phases each take every third (second) tap, read two (three) outputs apart
    ((1, 3, 13, 12), (3, 2, 3, 3), (3, 2), 1, (2, 3), 1, "relu"),
    # padding past the kernel's reach (PyTorch and ONNX accept it): outputs that see only padding,
    # one integer, per side, dilated and grouped, 1-D and 3-D
    ((2, 4, 5, 6), (4, 3, 3, 3), 1, 4, 1, 1, "none"),
    ((1, 3, 7, 4), (3, 2, 1, 3), 2, ((2, 5), (4, 0)), 1, 1, "relu"),
    ((2, 4, 6, 6), (4, 1, 3, 3), 2, 3, 1, 4, "tanh"),
    ((1, 2, 5, 5), (2, 3, 2, 2), (1, 2), (3, 1), 2, 1, "sigmoid"),
    ((2, 3, 6), (3, 2, 2), 1, ((3, 4),), 1, 1, "none"),
    ((1, 2, 3, 4, 3), (2, 2, 1, 2, 1), 1, ((2, 1), (0, 3), (1, 2)), 1, 1, "relu"),
    # last: a plain 2-D shape written per axis and per side (the any-shape stages' plain case)
    ((2, 5, 7, 8), (5, 3, 3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), 1, "relu"),
]


def any_shape_args(op: str, case, seed: int) -> dict:
    """Random arguments of ``op`` for one case of ANY_SHAPE (a bias on even seeds, forward)."""
    xs, ws, stride, padding, dilation, groups, act = case
    return random_args(op, xs, ws, stride, padding, dilation, groups, act, seed, bias=seed % 2 == 0)


def any_shape_id(case) -> str:
    xs, ws, stride, padding, dilation, groups, act = case
    return (f"{len(xs) - 2}d_n{xs[0]}c{xs[1]}k{ws[1] * groups}_{xs[2:]}_r{ws[2:]}"
            f"s{stride}p{padding}d{dilation}g{groups}_{act}")
