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

from . import chooser, combining
from . import gemm as gemm_launch
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
    choose: Callable | None = None    # (problem, ctx, defines) -> name of the stage to run (stage auto)

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
          tune={"CPW": [4, 8, 16], "SPLIT": [4, 16], "WG": [64, 256]}),
    Stage("conv_dgrad", 8, "width", "conv_dgrad/08_width.cl",
          "XPW neighbouring x positions x CPW channels per work-item: a column table of XPW+2 "
          "entries, 4-wide row loads inside the tensor, each weight used XPW times",
          defines={"CPW": 4, "XPW": 4, "SPLIT": 4, "WG": 128}, geometry=combining.channel_width_tiles,
          jit=combining.fast_3x3, source=combining.source_for("conv_dgrad/08_width.cl"),
          tune={"CPW": [4, 8], "XPW": [4, 7, 8], "SPLIT": [4], "WG": [64, 128]}),
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
    Stage("conv_forward", 11, "im2col", "conv_forward/11_im2col.cl",
          "chapter 11: im2col into a column workspace (C*R*S x N*OH*OW), then the course GEMM",
          defines={**gemm_launch.TILES, "WG": 64}, requires=gemm_launch.cols_requires,
          jit=gemm_launch.im2col_vectors, steps=gemm_launch.im2col_steps, scratch=gemm_launch.cols_scratch,
          tune=dict(gemm_launch.TILES_TUNE)),
]

# conv_dgrad as a matrix product (chapter 11): dx (C x N*H*W) = w (C x K*R*S) . dy-columns,
# every stage on the course GEMM's tile loop (kernels/common/gemm_core.h).
_IGEMM = dict(defines=dict(gemm_launch.TILES), requires=gemm_launch.conv_tiles_requires,
              tune=dict(gemm_launch.TILES_TUNE))
CONV_DGRAD += [
    Stage("conv_dgrad", 11, "igemm_analytic", "conv_dgrad/11_igemm_analytic.cl",
          "implicit GEMM: dy gathered into the GEMM's B tiles with indices computed by division; "
          "strided layers multiply the zeros of the missing taps",
          geometry=gemm_launch.igemm_geometry, **_IGEMM),
    Stage("conv_dgrad", 11, "igemm_phases", "conv_dgrad/11_igemm_phases.cl",
          "implicit GEMM split into stride^2 phase sub-problems, each over only the taps that reach "
          "its input positions: no multiplied zeros",
          geometry=gemm_launch.phases_geometry, **_IGEMM),
    Stage("conv_dgrad", 11, "igemm_delta", "conv_dgrad/11_igemm_delta.cl",
          "the phase split with a precomputed offset (delta) table per phase: no division in the "
          "operand fetches",
          steps=gemm_launch.delta_steps, scratch=gemm_launch.delta_scratch, **_IGEMM),
    Stage("conv_dgrad", 11, "igemm_nhwc", "conv_dgrad/11_igemm_nhwc.cl",
          "igemm_analytic on channel-last copies: dy' to NHWC and w to (R,S,K,C), the GEMM "
          "(N*H*W) x C with k innermost, dx back to NCHW",
          defines={**gemm_launch.TILES, "WG": 64}, requires=gemm_launch.nhwc_requires,
          jit=gemm_launch.nhwc_vectors, steps=gemm_launch.nhwc_steps, scratch=gemm_launch.nhwc_scratch,
          tune=dict(gemm_launch.TILES_TUNE)),
    Stage("conv_dgrad", 11, "gemm_col2im", "conv_dgrad/11_gemm_col2im.cl",
          "explicit GEMM into a column workspace (C*R*S x N*OH*OW), then col2im adds each input's "
          "taps back", defines={**gemm_launch.TILES, "WG": 64}, requires=gemm_launch.cols_requires,
          fallback="igemm_delta", steps=gemm_launch.col2im_steps, scratch=gemm_launch.cols_scratch,
          tune=dict(gemm_launch.TILES_TUNE)),
]

# conv_dgrad's Winograd stage comes after the direct ladder; its fallback for other shapes is
# the best direct stage of the ladder.
CONV_DGRAD.append(
    _wino("conv_dgrad", 12, "winograd", "conv_dgrad/12_winograd.cl",
          "3x3 stride 1: Winograd F(2x2,3x3) on dy with the rotated filter (conv_forward stage 05)",
          dict(WINO_BLOCKED), dict(WINO_BLOCKED_TUNE), fallback="width"))

# gemm: the course's matrix product C = A . B (chapter 11)
GEMM = [
    Stage("gemm", 1, "naive", "gemm/01_naive.cl",
          "one work-item per element of C; every operand fetched from global memory",
          defines={"WG": 64}, geometry=gemm_launch.gemm_naive, tune={"WG": [32, 64, 128, 256]}),
    Stage("gemm", 2, "local_tiles", "gemm/02_local_tiles.cl",
          "TS x TS tiles of A and B through local memory, one element of C per work-item",
          defines={"TS": 16}, geometry=gemm_launch.gemm_local, tune={"TS": [8, 16]}),
    Stage("gemm", 3, "register_blocked", "gemm/03_register_blocked.cl",
          "a WM x WN block of C per work-item in registers, float4 tile loads where rows allow "
          "(kernels/common/gemm_core.h)",
          defines=dict(gemm_launch.TILES), geometry=gemm_launch.gemm_blocked, jit=gemm_launch.gemm_vectors,
          requires=gemm_launch.gemm_tiles_requires, tune=dict(gemm_launch.TILES_TUNE)),
]

# conv_dgrad's algorithm chooser (chapter 11): times the other registered stages once per device
# and layer shape within a workspace limit (WORKSPACE_MB), caches the winner, runs it.
CONV_DGRAD.append(
    Stage("conv_dgrad", 11, "auto", "", "the fastest registered stage for this device and shape "
          "within a workspace limit, timed once and cached (helpers/chooser.py)",
          defines={"WORKSPACE_MB": chooser.DEFAULT_LIMIT_MB}, choose=chooser.choose))

# conv3d_dgrad: the 3-D input gradient through vol2col (chapter 11)
CONV3D_DGRAD = [
    Stage("conv3d_dgrad", 11, "vol2col", "conv3d_dgrad/11_vol2col.cl",
          "GEMM over K into a column workspace (C*T*R*S x N*OD*OH*OW), then col2vol",
          defines={**gemm_launch.TILES, "WG": 64}, requires=gemm_launch.vol_requires,
          steps=gemm_launch.vol2col_steps, scratch=gemm_launch.vol_scratch),
]

REGISTRY: dict[str, list[Stage]] = {
    "conv_dgrad": CONV_DGRAD,
    "conv_forward": CONV_FORWARD,
    "batchnorm_forward": BATCHNORM_FORWARD,
    "batchnorm_backward": BATCHNORM_BACKWARD,
    "gemm": GEMM,
    "conv3d_dgrad": CONV3D_DGRAD,
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
