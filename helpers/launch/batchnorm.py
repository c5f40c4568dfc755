"""Batch normalization (chapter 14): forward (training, inference) and backward kernels.

Both operations share one stage list; each stage file holds the forward and the backward
kernels. The registry's ``launch`` names the grid: ``per_channel`` (one work-item per channel),
``group_per_channel`` (one work-group per channel), ``one_pass`` (stage 06: one work-group per
channel, grown until its registers hold the channel: one_pass_wg), ``blocks`` (many work-groups
per channel: block partials in a workspace, then a merge). eps and momentum are float32 kernel
arguments.
"""
from __future__ import annotations

import numpy as np

from ..ops.problem import Problem
from . import Step, Workspace, round_up

BN_TRAIN = ("x", "gamma", "beta", "running_mean", "running_var", "y", "mean", "inv_std",
            "running_mean_out", "running_var_out", "N", "C", "HW")
BN_INFER = ("x", "gamma", "beta", "running_mean", "running_var", "y", "N", "C", "HW")
BN_BACKWARD = ("grad_output", "output", "x", "gamma", "mean", "inv_std", "grad_input", "grad_gamma",
               "grad_beta", "N", "C", "HW")


# Stage 06: units a work-item may hold in registers (a float4 each with VEC4). The backward kernel
# holds two float4s and an offset per unit, 9 registers: 25 units are 225 of the 255 registers a
# CUDA thread may have, so both kernels stay in registers on NVIDIA GPUs (16 was the first bound:
# it left bn128@28 and bn512@28, 6,272 float4s a channel at batch 32, to stage 05's two launches).
MAX_ITEMS = 25


def units(p: Problem) -> int:
    """A channel's N*H*W values in units: float4s when H*W % 4 == 0, else single floats."""
    hw = p.dims["HW"]
    return p.dims["N"] * (hw // 4 if hw % 4 == 0 else hw)


def blocks(p: Problem, d: dict) -> int:
    """Stage 05: blocks of WG*ITEMS units per channel."""
    return -(-units(p) // (d["WG"] * d["ITEMS"]))


def per_channel(p: Problem, d: dict):
    """One work-item per channel."""
    return (round_up(p.dims["C"], d["WG"]),), (d["WG"],)


def group_per_channel(p: Problem, d: dict):
    """One work-group per channel."""
    return (d["WG"] * p.dims["C"],), (d["WG"],)


# Stage 06: the work-group a channel gets: WG work-items, doubled (up to ONE_PASS_WG_MAX) while the
# channel has more than MAX_ITEMS units a work-item. 256 is as far as 25 units go: their 178
# registers a work-item (the forward kernel on the H200) times 256 work-items fill a compute unit's
# 65,536. A small WG serves the small channels, the doubled one the large (bn128@28's 6,272 units).
ONE_PASS_WG_MAX = 256


def one_pass_wg(p: Problem, d: dict) -> int:
    wg = d["WG"]
    while wg < ONE_PASS_WG_MAX and units(p) > wg * MAX_ITEMS:
        wg *= 2
    return wg


def one_pass_group(p: Problem, d: dict):
    """Stage 06: one work-group of one_pass_wg work-items per channel."""
    wg = one_pass_wg(p, d)
    return (wg * p.dims["C"],), (wg,)


def channel_blocks(p: Problem, d: dict):
    """Blocks of a channel x channels."""
    return (d["WG"] * blocks(p, d), p.dims["C"]), (d["WG"], 1)


# the family's launches, by name (the registry's ``launch``): their grids
LAUNCHES = {"per_channel": per_channel, "group_per_channel": group_per_channel, "one_pass": one_pass_group,
            "blocks": channel_blocks}


def steps(stage, p: Problem, d: dict) -> list:
    fused = stage.launch == "blocks"
    g, l = LAUNCHES[stage.launch](p, d)
    if p.op == "batchnorm_backward":
        if fused:
            return [Step("bn_sums_partial", g, l, ("grad_output", "output", "x", "mean", "partials",
                                                   "N", "C", "HW")),
                    Step("bn_backward", g, l, BN_BACKWARD + ("partials",))]
        return [Step("bn_backward", g, l, BN_BACKWARD)]
    eps = np.float32(p.dims["eps"])
    if not p.dims["training"]:
        return [Step("bn_forward_infer", g, l, BN_INFER + (eps,))]
    args = BN_TRAIN + (eps, np.float32(p.dims["momentum"]))
    if fused:
        return [Step("bn_stats_partial", g, l, ("x", "partials", "N", "C", "HW")),
                Step("bn_forward_train", g, l, args + ("partials",))]
    return [Step("bn_forward_train", g, l, args)]


def workspace(stage, p: Problem, d: dict) -> dict:
    fused = stage.launch == "blocks"
    out = {}
    if p.op == "batchnorm_forward" and p.dims["training"] and not p.dims["update"]:
        out = {"running_mean_out": p.dims["C"], "running_var_out": p.dims["C"]}  # never written
    if fused and (p.op == "batchnorm_backward" or p.dims["training"]):
        out["partials"] = (2 if p.op == "batchnorm_backward" else 3) * p.dims["C"] * blocks(p, d)
    return {name: Workspace("float32", n) for name, n in out.items()}


def wg_power_of_two(p: Problem, d: dict):
    wg = d["WG"]
    if wg < 4 or wg & (wg - 1):
        return f"WG must be a power of two >= 4 (the reduction tree halves it), got {wg}"
    if d.get("ITEMS", 1) < 1:
        return f"ITEMS must be >= 1, got {d['ITEMS']}"
    return None


def vec4(p: Problem, d: dict) -> dict:
    """Stages 05-06: VEC4=1 when H*W % 4 == 0 (float4 units)."""
    return {"VEC4": int(p.dims["HW"] % 4 == 0)}


HOLD_OFFSETS_MAX = 8    # stage 06 forward: above this many units a work-item computes offsets again


def one_pass_items(p: Problem, d: dict) -> dict:
    """Stage 06: VEC4 as stage 05, ITEMS, the units each work-item holds (the channel / WG), and,
    forward, HOLD_OFFSETS: 1 up to HOLD_OFFSETS_MAX units. NVIDIA's compiler on the H200
    (results/registers_one_pass_nvidia-h200.json, WG 256): 59 / 51 registers at 7 units with and
    without the held offsets, 91 / 73 at 13, 178 / 124 at 25. Work-groups of 256 per SM, registers
    given out in blocks of 8 a work-item (helpers/registers.py: groups_per_unit): 4 and 4 at 7
    units (51 registers take 56), 2 and 3 at 13, 1 and 2 at 25. Timed there in an exploration
    (each checked, not recorded): at 25 units bn512@28 took 36.7 us without them and 45.4 with; at
    7, where recomputing them buys no work-group, it only cost time (bn2048@7 20.1 us against
    16.7)."""
    r = d.get("RADIX", 2)
    if r < 2 or r > 16 or r & (r - 1):
        raise ValueError(f"RADIX={r} for stage 06_one_pass: the values a work-item adds per tree level "
                         f"must be a power of two from 2 to 16 (e.g. RADIX=8)")
    wg = one_pass_wg(p, d)
    items = max(1, -(-units(p) // wg))
    if p.op != "batchnorm_forward":         # the backward kernel holds its offsets (2 float4s a unit
        return {**vec4(p, d), "WG": wg, "ITEMS": items}   # and one offset: more than 128 registers either way)
    return {**vec4(p, d), "WG": wg, "ITEMS": items, "HOLD_OFFSETS": int(items <= HOLD_OFFSETS_MAX)}


def channel_fits(p: Problem, d: dict):
    """Stage 06 holds a whole channel in one work-group's registers: N*H*W units <= WG*MAX_ITEMS,
    WG as one_pass_wg grows it."""
    need = wg_power_of_two(p, d)
    wg = one_pass_wg(p, d) if need is None else d["WG"]
    if need is None and units(p) > wg * MAX_ITEMS:
        need = (f"a channel of N*H*W = {p.dims['N'] * p.dims['HW']:,} values must fit one work-group's "
                f"registers: at most {wg} * {MAX_ITEMS} = {wg * MAX_ITEMS:,} "
                f"{'float4s' if p.dims['HW'] % 4 == 0 else 'floats'}")
    return need
