"""The any-shape convolution kernels (conv_forward, conv_dgrad, conv_wgrad stage 16): one launch each.

They run every shape helpers/ops/shape.py accepts: 1 to 4 spatial axes, groups, dilation, a
stride per axis and a padding per side. A kernel sees every convolution as 4-D (one of lower rank
with unit extents in front: kernel 1, stride 1, padding 0, dilation 1 there) and takes its
geometry as int arguments after its tensors (ConvShape.geometry: N, C, K, G, then per axis A, D,
H, W the input and output extents, kernel extent, stride, padding before and dilation), so one
build serves every shape; the defines it is built with are the activation (ACT) and, forward,
BIAS. The registry's ``launch`` names the grid; the fourth axis, in front, shares dim 2 with the
batch, so a 1-D to 3-D convolution has the grid it had as 3-D:

    per_output_element   dim 0 = the output position (od*OH + oh)*OW + ow, dim 1 = k, dim 2 = n*OA + oa
    per_input_element    dim 0 = the input position (d*H + h)*W + w, dim 1 = c, dim 2 = n*A + a
    per_weight           dim 0 = the weight's index ((((c*K/G + k)*Q + q)*T + t)*R + r)*S + s
"""
from __future__ import annotations

from math import prod

import numpy as np

from ..ops.problem import Problem
from ..ops.shape import ConvShape
from . import Step, round_up
from .direct import positive_wg


def shape_of(p: Problem) -> ConvShape:
    """The problem's ConvShape, from its dims."""
    d = p.dims
    return ConvShape(d["N"], d["C"], d["K"], d["groups"], d["size"], d["kernel"], d["strides"], d["pads"],
                     d["dilation"], d["out"])


def _volume(extents: tuple) -> tuple:
    """(the last three axes' extents multiplied, the fourth axis' extent: 1 below 4-D)."""
    return prod(extents[-3:]), (extents[0] if len(extents) == 4 else 1)


def per_output_element(p: Problem, d: dict):
    positive_wg(d)
    volume, fourth = _volume(p.dims["out"])
    return (round_up(volume, d["WG"]), p.dims["K"], p.dims["N"] * fourth), (d["WG"], 1, 1)


def per_input_element(p: Problem, d: dict):
    positive_wg(d)
    volume, fourth = _volume(p.dims["size"])
    return (round_up(volume, d["WG"]), p.dims["C"], p.dims["N"] * fourth), (d["WG"], 1, 1)


def per_weight(p: Problem, d: dict):
    positive_wg(d)
    weights = prod(p.outputs["grad_weight"])
    return (round_up(weights, d["WG"]),), (d["WG"],)


LAUNCHES = {grid.__name__: grid for grid in (per_output_element, per_input_element, per_weight)}


def steps(stage, p: Problem, d: dict) -> list:
    grid, block = LAUNCHES[stage.launch](p, d)
    geometry = tuple(np.int32(v) for v in shape_of(p).geometry())
    return [Step(stage.entry or stage.op, grid, block, tuple(p.inputs) + tuple(p.outputs) + geometry)]


def workspace(stage, p: Problem, d: dict) -> dict:
    return {}
