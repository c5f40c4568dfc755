"""The direct convolution kernels (conv_dgrad 02-08, conv_forward 00, conv_wgrad 01): one launch each.

Every kernel of the family takes the op's tensors and scalars in the Problem's order
(inputs..., outputs..., scalars...). The registry's ``launch`` names the grid:

    per_input_element    dim 0 = h*W + w, dim 1 = input channel, dim 2 = image (conv_dgrad 02-06)
    channel_tiles        CPW input channels per work-item (conv_dgrad 07)
    channel_width_tiles  XPW x positions x CPW channels per work-item (conv_dgrad 08)
    per_output_element   dim 0 = oh*OW + ow, dim 1 = output channel, dim 2 = image (conv_forward 00)
    per_weight           dim 0 = the IOHW index of a weight (c, k, r, s) (conv_wgrad 01)

The CUDA twins use the same grids: a CUDA grid is the OpenCL global size divided by the block.
"""
from __future__ import annotations

from ..ops.problem import Problem
from . import dispatch, round_up
from .unrolled import BLOCK, check_params, kernel_text

def positive_wg(d: dict) -> None:
    wg = d["WG"]
    if not isinstance(wg, int) or isinstance(wg, bool) or wg < 1:
        raise ValueError(f"WG must be a positive integer, got {wg!r}")


def per_input_element(p: Problem, d: dict):
    """One work-item per input element: dim 0 = h*W + w, dim 1 = input channel, dim 2 = image."""
    positive_wg(d)
    wg = d["WG"]
    return (round_up(p.dims["H"] * p.dims["W"], wg), p.dims["C"], p.dims["N"]), (wg, 1, 1)


def per_output_element(p: Problem, d: dict):
    """One work-item per output element: dim 0 = oh*OW + ow, dim 1 = output channel, dim 2 = image."""
    positive_wg(d)
    wg = d["WG"]
    return (round_up(p.dims["OH"] * p.dims["OW"], wg), p.dims["K"], p.dims["N"]), (wg, 1, 1)


def per_weight(p: Problem, d: dict):
    """One work-item per weight: dim 0 = ((c*K + k)*KH + r)*KW + s, the IOHW index."""
    positive_wg(d)
    q = p.dims
    return (round_up(q["C"] * q["K"] * q["KH"] * q["KW"], d["WG"]),), (d["WG"],)


def depth16(p: Problem, d: dict) -> dict:
    """Stage 06: K16=1 when the output depth is a multiple of 16 (the 16-depth path applies)."""
    return {"K16": int(p.dims["K"] % BLOCK == 0)}


def fast_3x3(p: Problem, d: dict) -> dict:
    """Stages 07-08: FAST=1 for a 3x3 kernel with K % 16 == 0 (the generated block applies)."""
    dims = p.dims
    return {"FAST": int(dims["KH"] == 3 and dims["KW"] == 3 and dims["K"] % BLOCK == 0)}


def channel_tiles(p: Problem, d: dict):
    """Stage 07: dim 0 = (n, h, x) flattened (padded to WG), dim 1 = blocks of CPW channels."""
    check_params(d)
    dims = p.dims
    items = dims["N"] * dims["H"] * dims["W"]
    return (round_up(items, d["WG"]), -(-dims["C"] // d["CPW"])), (d["WG"], 1)


def channel_width_tiles(p: Problem, d: dict):
    """Stage 08: dim 0 = (n, h, group of XPW x positions), dim 1 = blocks of CPW channels."""
    check_params(d)
    dims = p.dims
    items = dims["N"] * dims["H"] * -(-dims["W"] // d["XPW"])
    return (round_up(items, d["WG"]), -(-dims["C"] // d["CPW"])), (d["WG"], 1)


def unrolled(stage, defines: dict) -> str:
    """Stages 07-08: the kernel file with its generated 3x3 block (helpers/launch/unrolled.py)."""
    return kernel_text(stage.kernel, defines)


# the family's launches: its grids, by name (the registry's ``launch``), each one kernel
LAUNCHES, steps, workspace = dispatch({grid.__name__: grid for grid in (per_input_element, channel_tiles,
                                                                        channel_width_tiles, per_output_element,
                                                                        per_weight)}, {})
