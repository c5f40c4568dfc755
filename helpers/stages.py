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
