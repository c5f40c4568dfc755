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

import numpy as np

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
]

# ---------------------------------------------------------------------------------------------
# Winograd F(2x2,3x3) (chapter 12): four kernels per stage, shared by conv_forward and conv_dgrad.
#
# The kernels see a forward 3x3 convolution of a ``src`` with CI channels into a ``dst`` with CO
# channels: conv_forward as it is; conv_dgrad renamed (dy -> dx with the rotated filter, see
# kernels/conv_dgrad/12_winograd.cl). Scratch: U (16 x CIP x COP), V (16 x CIP x PP),
# M (16 x COP x PP), with CI, CO and the number of tiles P padded up to the GEMM's blocks.

def wino_view(p: Problem) -> dict:
    """The forward convolution the Winograd kernels compute, in their names."""
    d = p.dims
    if p.op == "conv_dgrad":
        v = dict(src="grad_output", srcy="output", dst="grad_input", N=d["N"], CI=d["K"], CO=d["C"],
                 IH=d["OH"], IW=d["OW"], OH=d["H"], OW=d["W"], PADT=d["KH"] - 1 - d["pad"])
    else:
        v = dict(src="input", srcy="input", dst="output", N=d["N"], CI=d["C"], CO=d["K"],
                 IH=d["H"], IW=d["W"], OH=d["OH"], OW=d["OW"], PADT=d["pad"])
    v["TH"], v["TW"] = (v["OH"] + 1) // 2, (v["OW"] + 1) // 2
    v["P"] = v["N"] * v["TH"] * v["TW"]
    return v


def wino_blocks(d: dict) -> tuple:
    """(CI, CO, P) multiples the stage's matrix product needs (1: no padding)."""
    if "TM" in d:
        return d["TK"], d["TM"], d["TN"]
    if "TS" in d:
        return d["TS"], d["TS"], d["TS"]
    return 1, 1, 1


def wino_padded(p: Problem, d: dict) -> tuple:
    v = wino_view(p)
    bc, bo, bp = wino_blocks(d)
    return round_up(v["CI"], bc), round_up(v["CO"], bo), round_up(v["P"], bp)


# conv_dgrad checks each element against its own magnitude. Winograd's rounding error scales
# with the magnitudes of the whole 4x4 tile (helpers/ops/conv_forward.py explains it), so with
# one or two channels to sum over, a border element of dx (PAD = 0: it sees a single dy) can
# miss that tolerance by far (chapter 12 measures 77x with K = 1, 4x with K = 2, 0.18x with
# K = 3..6, 0.035x with K = 8). Layers that thin are tiny anyway: they take the fallback.
WINO_DGRAD_MIN_K = 8


def wino_requires(p: Problem, d: dict):
    dims = p.dims
    if (dims["KH"], dims["KW"]) != (3, 3) or dims["stride"] != 1:
        return (f"Winograd F(2x2,3x3) needs a 3x3 kernel with stride 1; this problem has a "
                f"{dims['KH']}x{dims['KW']} kernel with stride {dims['stride']}")
    if p.op == "conv_dgrad" and dims["K"] < WINO_DGRAD_MIN_K:
        return (f"the Winograd input gradient needs K >= {WINO_DGRAD_MIN_K} output channels to stay "
                f"within conv_dgrad's per-element tolerance; this problem has K = {dims['K']}")
    if "REG" in d and (d["REG"] % 4 or d["TM"] % d["REG"] or d["TN"] % d["REG"]):
        return f"REG={d['REG']} must be a multiple of 4 that divides TM={d['TM']} and TN={d['TN']}"
    cip, cop, pp = wino_padded(p, d)
    if 16 * max(cip, cop) * max(pp, cip) > 2**31 - 1:
        return (f"its scratch matrices would hold {16 * max(cip, cop) * pp:,} floats; the kernels "
                f"index with 32-bit integers (use a smaller batch)")
    return None


def wino_scratch(p: Problem, d: dict) -> dict:
    cip, cop, pp = wino_padded(p, d)
    return {"U": 16 * cip * cop, "V": 16 * cip * pp, "M": 16 * cop * pp}


def wino_steps(plan) -> list:
    """Filter transform, input transform, the 16 matrix products, output transform."""
    p, d = plan.problem, plan.defines
    v = wino_view(p)
    cip, cop, pp = (np.int32(x) for x in wino_padded(p, d))
    i32 = {k: np.int32(v[k]) for k in ("N", "CI", "CO", "IH", "IW", "OH", "OW", "PADT", "TH", "TW")}
    wg = d["WG"]
    filt = ("weight", "U", i32["CI"], i32["CO"], cip, cop)
    inp = (v["src"], v["srcy"], "V", i32["N"], i32["CI"], i32["IH"], i32["IW"], i32["TH"], i32["TW"],
           i32["PADT"], cip, pp)
    gemm = ("U", "V", "M", cip, cop, pp)
    out = ("M", v["dst"], i32["N"], i32["CO"], i32["OH"], i32["OW"], i32["TH"], i32["TW"], cop, pp)
    if "TS" not in d and "TM" not in d and plan.stage.name == "wino_naive":  # one work-item per element
        one = lambda n: ((round_up(int(n), wg),), (wg,))
        return [Step("wino_filter", *one(16 * cop * cip), filt),
                Step("wino_input", *one(16 * pp * cip), inp),
                Step("wino_gemm", *one(16 * cop * pp), gemm),
                Step("wino_output", *one(v["N"] * v["CO"] * v["OH"] * v["OW"]), out)]
    steps = [Step("wino_filter", (round_up(int(cop), wg), int(cip)), (wg, 1), filt),
             Step("wino_input", (round_up(int(pp), wg), int(cip)), (wg, 1), inp)]
    if "TM" in d:
        steps.append(Step("wino_gemm", (int(pp) // d["REG"], int(cop) // d["REG"], 16),
                          (d["TN"] // d["REG"], d["TM"] // d["REG"], 1), gemm))
    elif "TS" in d:
        steps.append(Step("wino_gemm", (int(pp), int(cop), 16), (d["TS"], d["TS"], 1), gemm))
    else:
        steps.append(Step("wino_gemm", (round_up(16 * int(cop) * int(pp), wg),), (wg,), gemm))
    steps.append(Step("wino_output", (round_up(v["P"], wg), int(v["CO"])), (wg, 1), out))
    return steps


def per_output_element(p: Problem, d: dict):
    """One work-item per output element: dim 0 = oh*OW + ow, dim 1 = output channel, dim 2 = image."""
    wg = d["WG"]
    return (round_up(p.dims["OH"] * p.dims["OW"], wg), p.dims["K"], p.dims["N"]), (wg, 1, 1)


def _wino(op, number, name, kernel, title, defines, tune, fallback=None):
    return Stage(op, number, name, kernel, title, defines=defines, requires=wino_requires,
                 fallback=fallback, steps=wino_steps, scratch=wino_scratch, tune=tune)


WINO_BLOCKED = {"WG": 64, "TM": 64, "TN": 64, "REG": 4, "TK": 8, "PREFETCH": 1}
WINO_BLOCKED_TUNE = {"TM": [64, 128], "TN": [64, 128], "REG": [4, 8], "TK": [8, 16]}

# conv_forward: the forward convolution (chapter 12: a direct baseline, then Winograd stages 1-5)
CONV_FORWARD = [
    Stage("conv_forward", 0, "direct", "conv_forward/00_direct.cl",
          "direct convolution, one work-item per output element: the baseline",
          defines={"WG": 64}, geometry=per_output_element, tune={"WG": [64, 128, 256]}),
    _wino("conv_forward", 1, "wino_naive", "conv_forward/01_wino_naive.cl",
          "Winograd F(2x2,3x3) in four kernels, one work-item per element of each step",
          {"WG": 64}, {"WG": [64, 256]}),
    _wino("conv_forward", 2, "wino_tiles", "conv_forward/02_wino_tiles.cl",
          "each work-item transforms a whole 4x4 input tile / 2x2 output tile in registers",
          {"WG": 64}, {"WG": [64, 256]}),
    _wino("conv_forward", 3, "wino_local", "conv_forward/03_wino_local.cl",
          "the 16 matrix products tiled through local memory (16x16 blocks)",
          {"WG": 64, "TS": 16}, {"TS": [8, 16]}),
    _wino("conv_forward", 4, "wino_transposed", "conv_forward/04_wino_transposed.cl",
          "V transposed: no local-memory bank conflicts in the products",
          {"WG": 64, "TS": 16}, {"TS": [8, 16]}),
    _wino("conv_forward", 5, "wino_blocked", "conv_forward/05_wino_blocked.cl",
          "register-blocked products: 64x64 per work-group, 4x4 per work-item, float4 local loads",
          dict(WINO_BLOCKED), dict(WINO_BLOCKED_TUNE)),
]

# conv_dgrad's Winograd stage comes after the direct ladder; its fallback for other shapes is
# the best direct stage of the ladder.
CONV_DGRAD.append(
    _wino("conv_dgrad", 12, "winograd", "conv_dgrad/12_winograd.cl",
          "3x3 stride 1: Winograd F(2x2,3x3) on dy with the rotated filter (conv_forward stage 05)",
          dict(WINO_BLOCKED), dict(WINO_BLOCKED_TUNE), fallback="naive"))

REGISTRY: dict[str, list[Stage]] = {
    "conv_dgrad": CONV_DGRAD,
    "conv_forward": CONV_FORWARD,
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
