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

from . import combining
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
    Stage("conv_dgrad", 6, "output_depth", "conv_dgrad/06_output_depth.cl",
          "3x3 with K % 16 == 0 (JIT time): 16 output depths per iteration, their 144 weights through "
          "nine 16-wide loads (ping-pong), depth loop innermost; otherwise stage 05's loops",
          defines={"WG": 64}, geometry=per_input_element, jit=combining.depth16,
          tune={"WG": [32, 64, 128, 256]}),
    Stage("conv_dgrad", 7, "input_depth", "conv_dgrad/07_input_depth.cl",
          "CPW input channels per work-item reuse each dy value; generated 3x3 block with split "
          "weight loads (SPLIT depths at a time) when K % 16 == 0; general loops otherwise",
          defines={"CPW": 4, "SPLIT": 4, "WG": 128}, geometry=combining.channel_tiles,
          jit=combining.fast_3x3, source=combining.source_for("conv_dgrad/07_input_depth.cl"),
          tune={"CPW": [2, 4, 8, 16], "SPLIT": [1, 4, 16], "WG": [64, 256]}),
    Stage("conv_dgrad", 8, "width", "conv_dgrad/08_width.cl",
          "XPW neighbouring x positions x CPW channels per work-item: a column table of XPW+2 "
          "entries, 4-wide row loads inside the tensor, each weight used XPW times",
          defines={"CPW": 4, "XPW": 4, "SPLIT": 4, "WG": 128}, geometry=combining.channel_width_tiles,
          jit=combining.fast_3x3, source=combining.source_for("conv_dgrad/08_width.cl"),
          tune={"CPW": [4, 8, 16], "XPW": [2, 4, 7, 8], "SPLIT": [1, 4], "WG": [64, 128]}),
]

REGISTRY: dict[str, list[Stage]] = {
    "conv_dgrad": CONV_DGRAD,
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
