"""The one registry of stages: for each operation, its kernels in course order.

Notebooks, tests, the benchmark and the plots all read REGISTRY; nothing else lists stages.
A stage's number is the chapter that teaches it (conv_dgrad) or its place in the chapter.

Each Stage says which kernel file it builds, with which default JIT parameters (-D options),
how it is launched (geometry), what it requires of a problem and what happens when that fails
(``fallback``: the stage run instead; None: run_stage refuses with an error naming the need).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .problem import Problem


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


@dataclass(frozen=True)
class Step:
    """One kernel launch of a stage: kernel name, NDRange, and the arguments by name."""
    kernel: str
    global_size: tuple
    local_size: tuple | None
    args: tuple  # names of buffers (inputs, outputs, scratch) or scalars, or literal numpy scalars


@dataclass(frozen=True)
class Stage:
    op: str
    number: int
    name: str
    kernel: str                      # file under kernels/
    title: str                       # one line: what this stage does
    defines: dict = field(default_factory=dict)   # default JIT parameters (tuned values override)
    geometry: Callable | None = None  # (problem, defines) -> (global, local) for single-kernel stages
    entry: str = ""                  # kernel function name (default: the op's name)
    requires: Callable | None = None  # (problem, defines) -> None if supported, else the unmet need
    fallback: str | None = None       # stage name to run when ``requires`` fails; None: refuse
    jit: Callable | None = None       # (problem, defines) -> extra defines derived from the problem
    steps: Callable | None = None     # (plan) -> [Step, ...] for stages of several kernels
    scratch: Callable | None = None   # (problem, defines) -> {name: number of float32}
    source: Callable | None = None    # (defines) -> generated kernel source (instead of the file's)
    tune: dict = field(default_factory=dict)  # define -> candidate values for the benchmark's search

    @property
    def key(self) -> str:
        return f"{self.number:02d}_{self.name}"


# ---------------------------------------------------------------------------------------------
# conv_dgrad: the input gradient of a convolution layer (chapters 02-08, 12)

def per_input_element(p: Problem, d: dict):
    """One work-item per input element: dim 0 = h*W + w, dim 1 = input channel, dim 2 = image."""
    wg = d["WG"]
    return (round_up(p.dims["H"] * p.dims["W"], wg), p.dims["C"], p.dims["N"]), (wg, 1, 1)


CONV_DGRAD = [
    Stage("conv_dgrad", 2, "naive", "conv_dgrad/02_naive.cl",
          "one work-item per input element; bounds and stride checks inside the loops",
          defines={"WG": 64}, geometry=per_input_element, tune={"WG": [32, 64, 128, 256]}),
    Stage("conv_dgrad", 3, "memoized_bounds", "conv_dgrad/03_memoized_bounds.cl",
          "padding and stride checks evaluated once per work-item into a table, looked up in the k loop",
          defines={"WG": 64}, geometry=per_input_element, tune={"WG": [32, 64, 128, 256]}),
    Stage("conv_dgrad", 4, "weight_vec", "conv_dgrad/04_weight_vec.cl",
          "3x3 (JIT time): the 9 weights of a (c, k) pair as one 8-wide load + one scalar; "
          "other kernel sizes: stage 03's path",
          defines={"WG": 64}, geometry=per_input_element, tune={"WG": [32, 64, 128, 256]}),
    Stage("conv_dgrad", 5, "input_vec", "conv_dgrad/05_input_vec.cl",
          "3x3 stride 1: 3-wide loads of dy rows for work-items whose window is inside the tensor; "
          "scalar at borders and for strides",
          defines={"WG": 64}, geometry=per_input_element, tune={"WG": [32, 64, 128, 256]}),
]


# ---------------------------------------------------------------------------------------------
# batchnorm_forward and batchnorm_backward: batch normalization (chapter 14). Both operations
# share one stage list (the same names); each stage file holds the forward (training and
# inference) and the backward kernels. Every stage launches through ``steps`` because eps and
# momentum are float32 kernel arguments (literal numpy scalars in the Step).

BN_TRAIN = ("x", "gamma", "beta", "running_mean", "running_var", "y", "mean", "inv_std",
            "running_mean_out", "running_var_out", "N", "C", "HW")
BN_INFER = ("x", "gamma", "beta", "running_mean", "running_var", "y", "N", "C", "HW")
BN_BACKWARD = ("grad_output", "output", "x", "gamma", "mean", "inv_std", "grad_input", "grad_gamma",
               "grad_beta", "N", "C", "HW")


def _bn_blocks(p: Problem, d: dict) -> int:
    """Stage 05: blocks of WG*ITEMS units per channel (a unit is a float4 when H*W % 4 == 0)."""
    hw = p.dims["HW"]
    units = p.dims["N"] * (hw // 4 if hw % 4 == 0 else hw)
    return -(-units // (d["WG"] * d["ITEMS"]))


def _bn_geometry(kind: str):
    def geometry(p: Problem, d: dict):
        c, wg = p.dims["C"], d["WG"]
        if kind == "per_channel":          # one work-item per channel
            return (round_up(c, wg),), (wg,)
        if kind == "group_per_channel":    # one work-group per channel
            return (wg * c,), (wg,)
        return (wg * _bn_blocks(p, d), c), (wg, 1)   # blocks of a channel x channels
    return geometry


def _bn_steps(kind: str, fused: bool = False):
    import numpy as np

    def steps(plan) -> list:
        p, d = plan.problem, plan.defines
        g, l = _bn_geometry(kind)(p, d)
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
    return steps


def _bn_scratch(fused: bool = False):
    def scratch(p: Problem, d: dict) -> dict:
        out = {}
        if p.op == "batchnorm_forward" and p.dims["training"] and not p.dims["update"]:
            out = {"running_mean_out": p.dims["C"], "running_var_out": p.dims["C"]}  # never written
        if fused and (p.op == "batchnorm_backward" or p.dims["training"]):
            out["partials"] = (2 if p.op == "batchnorm_backward" else 3) * p.dims["C"] * _bn_blocks(p, d)
        return out
    return scratch


def _bn_wg_power_of_two(p: Problem, d: dict):
    wg = d["WG"]
    if wg < 4 or wg & (wg - 1):
        return f"WG must be a power of two >= 4 (the reduction tree halves it), got {wg}"
    if d.get("ITEMS", 1) < 1:
        return f"ITEMS must be >= 1, got {d['ITEMS']}"
    return None


def _bn_stages(op: str) -> list:
    tree = dict(requires=_bn_wg_power_of_two, tune={"WG": [64, 128, 256, 512, 1024]})
    return [
        Stage(op, 1, "naive", "batchnorm/01_naive.cl",
              "one work-item per channel loops over N*H*W values: three passes forward, two backward",
              defines={"WG": 64}, steps=_bn_steps("per_channel"), scratch=_bn_scratch(),
              tune={"WG": [32, 64, 128]}),
        Stage(op, 2, "local_two_pass", "batchnorm/02_local_two_pass.cl",
              "one work-group per channel, coalesced reads, sums through a local-memory tree, one pass per sum",
              defines={"WG": 256}, steps=_bn_steps("group_per_channel"), scratch=_bn_scratch(), **tree),
        Stage(op, 3, "welford", "batchnorm/03_welford.cl",
              "single pass for the statistics: Welford per work-item, Chan's merge in the tree",
              defines={"WG": 256}, steps=_bn_steps("group_per_channel"), scratch=_bn_scratch(), **tree),
        Stage(op, 4, "vec4", "batchnorm/04_vec4.cl",
              "float4 loads and stores on aligned addresses, a scalar head and tail per slab",
              defines={"WG": 256}, steps=_bn_steps("group_per_channel"), scratch=_bn_scratch(), **tree),
        Stage(op, 5, "fused", "batchnorm/05_fused.cl",
              "many work-groups per channel: block partials, then merge + normalize in one kernel; "
              "each tensor read twice",
              defines={"WG": 256, "ITEMS": 4}, steps=_bn_steps("blocks", fused=True),
              scratch=_bn_scratch(fused=True),
              jit=lambda p, d: {"VEC4": int(p.dims["HW"] % 4 == 0)},
              requires=_bn_wg_power_of_two,
              tune={"WG": [128, 256, 512], "ITEMS": [1, 2, 4, 8]}),
    ]


BATCHNORM_FORWARD = _bn_stages("batchnorm_forward")
BATCHNORM_BACKWARD = _bn_stages("batchnorm_backward")

REGISTRY: dict[str, list[Stage]] = {
    "conv_dgrad": CONV_DGRAD,
    "batchnorm_forward": BATCHNORM_FORWARD,
    "batchnorm_backward": BATCHNORM_BACKWARD,
}


def _stages(op: str) -> list[Stage]:
    if op not in REGISTRY:
        raise ValueError(f"unknown op {op!r}; the course has {', '.join(sorted(REGISTRY))}")
    return REGISTRY[op]


def stage_names(op: str) -> list[str]:
    """Names of an operation's stages in course order."""
    return [s.name for s in _stages(op)]


def get_stage(op: str, stage) -> Stage:
    """A stage by name, by number, or by key ('02_naive')."""
    stages = _stages(op)
    for s in stages:
        if stage in (s.name, s.key) or (isinstance(stage, int) and not isinstance(stage, bool) and stage == s.number):
            return s
    listing = ", ".join(f"{s.number} {s.name}" for s in stages)
    raise ValueError(f"{op} has no stage {stage!r}; its stages are: {listing}")
