"""The one registry of stages: for each operation, its kernels in course order. Data only.

Notebooks, tests, the benchmark and the plots all read REGISTRY; nothing else lists stages.
A stage's number is the chapter that teaches it (conv_dgrad) or its place in the chapter.

Each entry says which kernel file it builds (kernels/<op>/NN_name.cl, or .cu for CUDA), with
which backend ("opencl" or "cuda") and precision ("fp32", "tf32", "fp16", "bf16"; a reduced
precision is part of the stage's name), which kernel ``family`` launches it (helpers/launch/:
the grid and, for multi-kernel stages, the steps and their workspaces), default JIT parameters
(-D options; tuned values override), tune candidates for the benchmark's search, and by name
the family functions that derive defines from the problem (``jit``), say what a problem needs
(``requires``) and generate source (``source``). When ``requires`` fails, ``fallback`` names
the stage run instead; None: run_stage refuses with an error naming the need. ``fast`` names
the build defines that select a stage's fast path, so every run reports the path it took.
"""
from __future__ import annotations

from dataclasses import dataclass, field

BACKENDS = ("opencl", "cuda")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


@dataclass(frozen=True)
class Stage:
    op: str
    number: int
    name: str
    kernel: str                      # file under kernels/
    title: str                       # one line: what this stage does
    family: str = "direct"           # launcher module in helpers/launch/
    launch: str = ""                 # which launch of the family (its grid, its steps)
    backend: str = "opencl"
    precision: str = "fp32"
    defines: dict = field(default_factory=dict)   # default JIT parameters
    tune: dict = field(default_factory=dict)      # define -> candidate values for the search
    jit: str = ""                    # family function (problem, defines) -> derived defines
    requires: str = ""               # family function (problem, defines) -> None or the unmet need
    fallback: str | None = None      # stage name to run when ``requires`` fails; None: refuse
    source: str = ""                 # family function (stage, defines) -> generated kernel text;
                                     # a test's fault or a kernel exercise may set a callable
                                     # (defines) -> text on a copy (dataclasses.replace)
    fast: dict = field(default_factory=dict)  # the build defines that select the fast path (as the
                                     # kernel's #if reads them); empty: the stage has one path
    entry: str = ""                  # kernel function name of a one-kernel stage (default: the op)
    choose: bool = False             # stage auto: the running layer times the other stages and
                                     # runs the fastest within the workspace budget (helpers/chooser.py)
    epilogue: bool = False           # conv_forward: adds the bias and applies the activation
                                     # (helpers/ops/conv_forward.py: stage_requires)
    arch: str = ""                   # CUDA: the one GPU architecture the kernel is built for
                                     # (sm_90a: Hopper's wgmma); empty: the device's own

    @property
    def tensor_cores(self) -> bool:
        """A CUDA stage in a reduced precision runs its products on tensor cores (chapter 13)."""
        return self.backend == "cuda" and self.precision != "fp32"

    @property
    def key(self) -> str:
        return f"{self.number:02d}_{self.name}"


WG = {"WG": 64}
WG_TUNE = {"WG": [32, 64, 128, 256]}
DIRECT_DGRAD = dict(family="direct", launch="per_input_element", defines=WG, tune=WG_TUNE)
LOCAL = dict(family="local", launch="tiles", jit="jit_tile", requires="stride_one")
FALLBACK = {"opencl": "width", "cuda": "memoized_bounds_cuda"}   # of the local stages, per backend
LOCAL_TUNE = {"TY": [4, 8], "XPW": [4, 8], "CPW": [4, 8]}
# 09's defaults (XPW = CPW = 4) with TY = 8 would need 512 work-items per group: TY stays 4 (the
# H200 search over all combinations kept TY = 4 for both stages: results/local/run2_tune_*)
LOCAL_TUNE_09 = {"XPW": [4, 8], "CPW": [4, 8]}
PREFETCH = {"TX": 32, "TY": 4, "CB": 32, "KC": 4, "XPW": 4, "CPW": 4, "BUFFERS": 2}

# conv_dgrad: the input gradient of a convolution layer (chapters 02-10, 12)
CONV_DGRAD = [
    Stage("conv_dgrad", 2, "naive", "conv_dgrad/02_naive.cl",
          "one work-item per input element; bounds and stride checks inside the loops", **DIRECT_DGRAD),
    Stage("conv_dgrad", 2, "naive_cuda", "conv_dgrad/02_naive.cu",
          "stage 02 in CUDA: one thread per input element, the same loops", backend="cuda",
          **DIRECT_DGRAD),
    Stage("conv_dgrad", 2, "naive_fp16", "conv_dgrad/02_naive_fp16.cl",
          "stage 02 on fp16 tensors: vload_half / vstore_half, the sum in float", precision="fp16",
          **DIRECT_DGRAD),
    Stage("conv_dgrad", 3, "memoized_bounds", "conv_dgrad/03_memoized_bounds.cl",
          "padding and stride checks evaluated once per work-item into a table, looked up in the k loop",
          **DIRECT_DGRAD),
    Stage("conv_dgrad", 3, "memoized_bounds_cuda", "conv_dgrad/03_memoized_bounds.cu",
          "stage 03 in CUDA: the same per-thread tables of valid kernel rows and columns",
          backend="cuda", **DIRECT_DGRAD),
    Stage("conv_dgrad", 4, "weight_vec", "conv_dgrad/04_weight_vec.cl",
          "3x3 (JIT time): the 9 weights of a (c, k) pair as one 8-wide load + one scalar; "
          "other kernel sizes: stage 03's path", fast={"KH": 3, "KW": 3}, **DIRECT_DGRAD),
    Stage("conv_dgrad", 5, "input_vec", "conv_dgrad/05_input_vec.cl",
          "3x3 stride 1: 3-wide loads of dy rows for work-items whose window is inside the tensor; "
          "scalar at borders and for strides", fast={"KH": 3, "KW": 3, "STRIDE": 1}, **DIRECT_DGRAD),
    Stage("conv_dgrad", 6, "output_depth", "conv_dgrad/06_output_depth.cl",
          "3x3 with K % 16 == 0 (JIT time): 16 output depths per iteration, their 144 weights through "
          "nine 16-wide loads (ping-pong), depth loop innermost; otherwise stage 05's loops",
          jit="depth16", fast={"KH": 3, "KW": 3, "K16": 1}, **DIRECT_DGRAD),
    Stage("conv_dgrad", 7, "input_depth", "conv_dgrad/07_input_depth.cl",
          "CPW input channels per work-item reuse each dy value; generated 3x3 block with split "
          "weight loads (SPLIT depths at a time) when K % 16 == 0; general loops otherwise",
          family="direct", launch="channel_tiles", jit="fast_3x3", source="unrolled", fast={"FAST": 1},
          defines={"CPW": 4, "SPLIT": 4, "WG": 128},
          tune={"CPW": [4, 8, 16], "SPLIT": [4, 16], "WG": [64, 256]}),
    Stage("conv_dgrad", 8, "width", "conv_dgrad/08_width.cl",
          "XPW neighbouring x positions x CPW channels per work-item: a column table of XPW+2 "
          "entries, 4-wide row loads inside the tensor, each weight used XPW times",
          family="direct", launch="channel_width_tiles", jit="fast_3x3", source="unrolled", fast={"FAST": 1},
          defines={"CPW": 4, "XPW": 4, "SPLIT": 4, "WG": 128},
          tune={"CPW": [4, 8], "XPW": [4, 7, 8], "SPLIT": [4], "WG": [64, 128]}),
    # Chapter 09: tiles in local memory (helpers/launch/local.py: geometry, constraints). Stride 1
    # only; strided layers and kernels whose tile does not fit run stage 08 (the CUDA twins: 03's).
    Stage("conv_dgrad", 9, "local_tile", "conv_dgrad/09_local_tile.cl",
          "a group copies its tile's dy patch (with halo) and weight slab into local memory per chunk "
          "of KC output channels; one work-item per (position, channel) sums from local memory",
          defines={"TX": 16, "TY": 4, "CB": 4, "KC": 8}, tune={"KC": [4, 8]},   # TX = 32 or CB = 8:
          fallback="width", **LOCAL),     # 512 work-items per group (the H200 search kept 16 x 4 x 4)
    Stage("conv_dgrad", 9, "register_block", "conv_dgrad/09_register_block.cl",
          "the same tile; each work-item sums XPW positions x CPW channels in registers from one "
          "row of dy and CPW weights read from local memory",
          defines={"TX": 32, "TY": 4, "CB": 32, "KC": 8, "XPW": 4, "CPW": 4},
          tune=LOCAL_TUNE_09, fallback="width", **LOCAL),
    *[Stage("conv_dgrad", 9, name, "conv_dgrad/09_prefetch" + ext, title, backend=backend,
            defines=PREFETCH, tune=LOCAL_TUNE_09, fallback=FALLBACK[backend], **LOCAL)
      for name, ext, backend, title in (
          ("prefetch", ".cl", "opencl",
           "the next chunk's global loads in flight during the arithmetic (registers), stored into "
           "the other half of a double local buffer: one barrier per chunk"),
          ("prefetch_cuda", ".cu", "cuda",
           "stage 09_prefetch in CUDA: the same tile, double buffer and one barrier per chunk"))],
    # Chapter 10: bank conflicts. The slab transposed for float4 reads (its copy conflicts), then
    # two fixes: padding, XOR swizzle; then what the profiler shows next: the copy's arithmetic,
    # done once (hoisted). VEC4 and WPAD describe the layout to the bank model
    # (helpers/chapters/local.py). Each has a CUDA twin (ncu counts its bank conflicts). 10_swizzle's
    # switch ROWCOPY=1 (default 0: the recorded runs) copies dy by whole stored rows: a candidate of
    # the search, so the grid tests and the PTX compile take it too.
    *[Stage("conv_dgrad", 10, name + suffix, f"conv_dgrad/10_{name}{ext}",
            title if backend == "opencl" else f"stage 10_{name} in CUDA: the same slab layout and accesses",
            backend=backend, defines={**PREFETCH, "XPW": 8, "VEC4": 1, "WPAD": wpad, **switch},
            tune={**LOCAL_TUNE, **{k: [0, 1] for k in switch}}, fallback=FALLBACK[backend], **LOCAL)
      for name, wpad, switch, title in (
          ("transposed", 0, {}, "09_prefetch with the weight slab stored [depth*tap][channel] and float4 "
                                "reads of weights and dy rows; the copy's stores down a column conflict"),
          ("padded", 4, {}, "rows of the transposed slab padded by 4 floats: the copy's stores 4-way "
                            "instead of 32-way, float4 reads kept"),
          ("swizzle", 0, {"ROWCOPY": 0}, "no padding: float4s of a row XOR-swizzled by the row, the copy "
                                         "storing 4 channels x 8 rows per warp; ROWCOPY=1: dy copied by "
                                         "whole stored rows"),
          ("hoisted", 4, {}, "10_padded with the copy's index arithmetic done once: per copied element an "
                             "offset, a limit on k0 and a local address in registers, one add per chunk"))
      for suffix, ext, backend in (("", ".cl", "opencl"), ("_cuda", ".cu", "cuda"))],
]


# batchnorm_forward and batchnorm_backward (chapter 14): one stage list for both operations;
# each stage file holds the forward (training and inference) and the backward kernels.
def _bn_stages(op: str) -> list:
    tree = dict(family="batchnorm", launch="group_per_channel", requires="wg_power_of_two",
                defines={"WG": 256}, tune={"WG": [64, 128, 256, 512, 1024]})
    return [
        Stage(op, 1, "naive", "batchnorm/01_naive.cl",
              "one work-item per channel loops over N*H*W values: three passes forward, two backward",
              family="batchnorm", launch="per_channel", defines={"WG": 64}, tune={"WG": [32, 64, 128]}),
        Stage(op, 2, "local_two_pass", "batchnorm/02_local_two_pass.cl",
              "one work-group per channel, coalesced reads (COALESCED=0: a contiguous chunk per work-item), "
              "sums through a local-memory tree, one pass per sum (SPLIT_SUMS=0: both backward sums in one pass)",
              **{**tree, "defines": {"WG": 256, "COALESCED": 1, "SPLIT_SUMS": 1}}),
        Stage(op, 3, "welford", "batchnorm/03_welford.cl",
              "single pass for the statistics: Welford per work-item, Chan's merge in the tree", **tree),
        Stage(op, 4, "vec4", "batchnorm/04_vec4.cl",
              "float4 loads and stores on aligned addresses, a scalar head and tail per slab", **tree),
        Stage(op, 5, "fused", "batchnorm/05_fused.cl",
              "many work-groups per channel: block partials, then merge + normalize in one kernel "
              "(EARLY_LOADS=0: the block loaded after the merge); each tensor read twice",
              family="batchnorm", launch="blocks", requires="wg_power_of_two", jit="vec4", fast={"VEC4": 1},
              defines={"WG": 256, "ITEMS": 4, "REVERSE": 1, "EARLY_LOADS": 1}, tune={"WG": [128, 256, 512], "ITEMS": [1, 2, 4, 8]}),
        Stage(op, 6, "one_pass", "batchnorm/06_one_pass.cl",
              "channels that fit one work-group's registers: one launch, each tensor read once, "
              "two-pass statistics over registers (TWO_PASS_STATS=0: Welford's); larger channels run stage 05",
              family="batchnorm", launch="group_per_channel", requires="channel_fits", fallback="fused",
              jit="one_pass_items", defines={"WG": 256, "TWO_PASS_STATS": 1}, tune={"WG": [128, 256, 512, 1024]}),
    ]


BATCHNORM_FORWARD = _bn_stages("batchnorm_forward")
BATCHNORM_BACKWARD = _bn_stages("batchnorm_backward")

# The GEMM family (chapter 11): gemm_core.h's tiles (helpers/launch/gemm.py) and its switches
# GEMM_PREFETCH and GEMM_LDS4 (default 0: a device nobody tuned for builds the plain core; tuned
# per device, e.g. python -m helpers.bench --tune-only GEMM_LDS4,GEMM_PREFETCH on top of the tiles)
TILES = {"TM": 64, "TN": 64, "TK": 16, "WM": 4, "WN": 4, "GEMM_PREFETCH": 0, "GEMM_LDS4": 0}
GEMM_FAMILY = dict(family="gemm", tune={"TM": [64, 128], "TN": [64, 128], "TK": [8, 16], "WM": [4, 8], "WN": [4, 8],
                                        "GEMM_LDS4": [0, 1], "GEMM_PREFETCH": [0, 1]})

# Winograd F(2x2,3x3) (chapter 12): four kernels per stage (helpers/launch/winograd.py)
WINO = dict(family="winograd", requires="winograd_f23")
WINO_BLOCKED = dict(WINO, launch="blocked", defines={"WG": 64, "TM": 64, "TN": 64, "REG": 4, "TK": 8, "PREFETCH": 1},
                    tune={"TM": [64, 128], "TN": [64, 128], "REG": [4, 8], "TK": [8, 16]})

# Winograd F(4x4,3x3) (chapter 12a): 6x6 tiles, the 36 products as a batch through the course
# GEMM (gemm_core.h): its tile parameters and tune lists
# JOINT_TRANSFORMS = 1: the filter and input transforms in one launch (0: two; chapter 12a's pair)
# WINO_CHANNEL_MAJOR = 1: V and M stored channel-major (0: product-major; chapter 12a's pair)
WINO4_BLOCKED = dict(WINO, launch="blocked_f4x4", requires="winograd_f43",
                     defines={**TILES, "WG": 64, "JOINT_TRANSFORMS": 1, "WINO_CHANNEL_MAJOR": 1},
                     tune=GEMM_FAMILY["tune"], jit="wino_vectors", fast={"WINO_VEC_OUT": 1})

# the input gradient's F(4x4) also searches WG, the work-group of its three transform kernels (the
# output transform's time moves with it: res128@28 0.038 -> 0.033 ms at 32 on the H200). Searched
# on its own (./course record: tune-wino4-wg): with the tile lists it would triple the search.
WINO4_DGRAD_TUNE = {**GEMM_FAMILY["tune"], "WG": [32, 64, 128]}

# conv_forward: the forward convolution (chapter 12: a direct baseline, then Winograd stages 1-5;
# chapter 12a: stage 6, F(4x4))
CONV_FORWARD = [
    Stage("conv_forward", 0, "direct", "conv_forward/00_direct.cl",
          "direct convolution, one work-item per output element: the baseline",
          family="direct", launch="per_output_element", defines={"WG": 64}, tune={"WG": [64, 128, 256]},
          epilogue=True),
    Stage("conv_forward", 1, "wino_naive", "conv_forward/01_wino_naive.cl",
          "Winograd F(2x2,3x3) in four kernels, one work-item per element of each step",
          launch="per_element", defines={"WG": 64}, tune={"WG": [64, 256]}, **WINO),
    Stage("conv_forward", 2, "wino_tiles", "conv_forward/02_wino_tiles.cl",
          "each work-item transforms a whole 4x4 input tile / 2x2 output tile in registers",
          launch="tiles", defines={"WG": 64}, tune={"WG": [64, 256]}, **WINO),
    Stage("conv_forward", 3, "wino_local", "conv_forward/03_wino_local.cl",
          "the 16 matrix products tiled through local memory (16x16 blocks)",
          launch="local", defines={"WG": 64, "TS": 16}, tune={"TS": [8, 16]}, **WINO),
    Stage("conv_forward", 4, "wino_transposed", "conv_forward/04_wino_transposed.cl",
          "V transposed: no local-memory bank conflicts in the products",
          launch="local", defines={"WG": 64, "TS": 16}, tune={"TS": [8, 16]}, **WINO),
    Stage("conv_forward", 5, "wino_blocked", "conv_forward/05_wino_blocked.cl",
          "register-blocked products: 64x64 per work-group, 4x4 per work-item, float4 local loads",
          **WINO_BLOCKED),
    Stage("conv_forward", 6, "wino4_blocked", "conv_forward/06_wino4_blocked.cl",
          "Winograd F(4x4,3x3): 6x6 input tiles, the 36 products through the course GEMM (2.25 "
          "multiplications per output instead of 4); unsupported layers run stage 05", fallback="wino_blocked",
          **WINO4_BLOCKED),
    Stage("conv_forward", 11, "im2col", "conv_forward/11_im2col.cl",
          "chapter 11: im2col into a column workspace (C*R*S x N*OH*OW), then the course GEMM",
          launch="im2col", defines={**TILES, "WG": 64}, requires="cols_requires", jit="im2col_vectors",
          fast={"GEMM_VEC_B": 1}, **GEMM_FAMILY),
]

# conv_dgrad as a matrix product (chapter 11): dx (C x N*H*W) = w (C x K*R*S) . dy-columns,
# every stage on the course GEMM's tile loop (kernels/common/gemm_core.h, helpers/launch/gemm.py).
IGEMM = dict(GEMM_FAMILY, defines=TILES, requires="conv_tiles_requires")
CONV_DGRAD += [
    Stage("conv_dgrad", 11, "igemm_analytic", "conv_dgrad/11_igemm_analytic.cl",
          "implicit GEMM: dy gathered into the GEMM's B tiles with indices computed by division; "
          "strided layers multiply the zeros of the missing taps", launch="igemm", **IGEMM),
    Stage("conv_dgrad", 11, "igemm_phases", "conv_dgrad/11_igemm_phases.cl",
          "implicit GEMM split into stride^2 phase sub-problems, each over only the taps that reach "
          "its input positions: no multiplied zeros (stride 1: one phase); each phase compiled with "
          "its tap counts as constants; split-K where the product has too few work-groups",
          launch="phases", jit="phase_split_k", fast={"PHASED": 1},
          **dict(IGEMM, defines={**TILES, "PHASE_CONSTANT": 1, "STORE_LOCAL": 1, "SPLIT_TARGET": 1},
                 tune={**GEMM_FAMILY["tune"], "SPLIT_TARGET": [1, 128, 256, 512]})),
    Stage("conv_dgrad", 11, "igemm_delta", "conv_dgrad/11_igemm_delta.cl",
          "the phase split with a precomputed offset (delta) table per phase: no division in the "
          "operand fetches", launch="delta", jit="phase_split", fast={"PHASED": 1}, **IGEMM),
    Stage("conv_dgrad", 11, "igemm_taps", "conv_dgrad/11_igemm_taps.cl",
          "igemm_phases with the reduction walked tap by tap (channels innermost): a step of TK lies "
          "in one tap, decoded once per step; an element is one multiply-add and a load. K % TK == 0, "
          "else igemm_phases", launch="phases", jit="phase_split_k", fast={"PHASED": 1}, fallback="igemm_phases",
          **dict(IGEMM, requires="taps_requires",
                 defines={**TILES, "PHASE_CONSTANT": 1, "STORE_LOCAL": 1, "SPLIT_TARGET": 1},
                 tune={**GEMM_FAMILY["tune"], "SPLIT_TARGET": [1, 128, 256, 512]})),
    Stage("conv_dgrad", 11, "igemm_nhwc", "conv_dgrad/11_igemm_nhwc.cl",
          "igemm_analytic on channel-last copies: dy' to NHWC and w to (R,S,K,C), the GEMM "
          "(N*H*W) x C with k innermost (float4 loads when C % 4 == 0), dx back to NCHW",
          launch="nhwc", defines={**TILES, "WG": 64}, requires="nhwc_requires", jit="nhwc_vectors",
          fast={"GEMM_VEC_B": 1}, **GEMM_FAMILY),
    Stage("conv_dgrad", 11, "gemm_col2im", "conv_dgrad/11_gemm_col2im.cl",
          "explicit GEMM into a column workspace (C*R*S x N*OH*OW), then col2im adds each input's "
          "taps back", launch="col2im", defines={**TILES, "WG": 64}, requires="cols_requires",
          fallback="igemm_delta", **GEMM_FAMILY),
]

# conv_dgrad's Winograd stage comes after the direct ladder; its fallback for other shapes is
# the best direct stage of the ladder.
CONV_DGRAD.append(
    Stage("conv_dgrad", 12, "winograd", "conv_dgrad/12_winograd.cl",
          "3x3 stride 1: Winograd F(2x2,3x3) on dy with the rotated filter (conv_forward stage 05)",
          fallback="width", **WINO_BLOCKED))
CONV_DGRAD.append(
    Stage("conv_dgrad", 12, "winograd4", "conv_dgrad/12_winograd4.cl",
          "3x3 stride 1, K >= 16: Winograd F(4x4,3x3) on dy with the rotated filter (conv_forward "
          "stage 06); other layers run stage 12 winograd", fallback="winograd",
          **{**WINO4_BLOCKED, "tune": WINO4_DGRAD_TUNE}))

# gemm: the course's matrix product C = A . B (chapter 11)
GEMM = [
    Stage("gemm", 1, "naive", "gemm/01_naive.cl",
          "one work-item per element of C; every operand fetched from global memory",
          family="gemm", launch="gemm_naive", defines={"WG": 64}, tune={"WG": [32, 64, 128, 256]}),
    Stage("gemm", 2, "local_tiles", "gemm/02_local_tiles.cl",
          "TS x TS tiles of A and B through local memory, one element of C per work-item",
          family="gemm", launch="gemm_local", defines={"TS": 16}, tune={"TS": [8, 16]}),
    Stage("gemm", 3, "register_blocked", "gemm/03_register_blocked.cl",
          "a WM x WN block of C per work-item in registers, float4 tile loads where rows allow "
          "(kernels/common/gemm_core.h)", launch="gemm_blocked", defines=TILES, jit="gemm_vectors",
          requires="gemm_tiles_requires", fast={"GEMM_VEC_A": 1, "GEMM_VEC_B": 1}, **GEMM_FAMILY),
]

# conv_dgrad on tensor cores (chapter 13, CUDA): the implicit GEMM with positions as mma rows and
# channels as mma columns (helpers/launch/gemm.py: mma; kernels/common/tc.cuh), one step per
# file. The 16-bit stages store dy, y, w and dx in their precision; tf32 stores float32.
TC = dict(family="gemm", launch="mma", backend="cuda")
CONV_DGRAD += [
    Stage("conv_dgrad", 13, "tc_tf32", "conv_dgrad/13_tc_tf32.cu",
          "chapter 11's implicit GEMM on tensor cores: mma.sync m16n8k8 on TF32 operands from padded "
          "shared rows, fp32 sums", precision="tf32", **TC),
    Stage("conv_dgrad", 13, "tc_fp16", "conv_dgrad/13_tc_fp16.cu",
          "fp16 tensors and mma.sync m16n8k16 (twice the depth per instruction), fp32 sums",
          precision="fp16", jit="fp16_operands", **TC),
    Stage("conv_dgrad", 13, "tc_bf16", "conv_dgrad/13_tc_fp16.cu",
          "tc_fp16 on bfloat16 tensors (fp32's range, 8-bit mantissa)",
          precision="bf16", jit="bf16_operands", **TC),
    Stage("conv_dgrad", 13, "tc_fp16_ldm", "conv_dgrad/13_tc_fp16_ldm.cu",
          "fragments by ldmatrix.x4 from unpadded shared rows, XOR-swizzled: no bank conflicts",
          precision="fp16", jit="fp16_operands", **TC),
    Stage("conv_dgrad", 13, "tc_fp16_pipe", "conv_dgrad/13_tc_fp16_pipe.cu",
          "weights by cp.async into a ring of STAGES buffers, dy prefetched in registers one chunk "
          "ahead (activation applied there): loads in flight during the mma (K*R*S % 8 == 0)",
          precision="fp16", jit="fp16_operands", defines={"STAGES": 3}, tune={"STAGES": [2, 3, 4]},
          requires="mma_pipe_requires", fallback="tc_fp16_ldm", **TC),
]
# the same product on channel-last copies of dy' and w (reduction order r, s, k): both operands by
# cp.async, 16 bytes per copy; one file for the three precisions (13_tc_nhwc.cu: TF32, BF16)
# the tiles of 13_tc_nhwc.cu, both directions; the input gradient adds split-K: SPLIT_TARGET is the
# blocks its product should have; fewer, and a reduction of at least SPLIT_MIN terms is split
# (helpers/launch/gemm.py: nhwc_splits); 1 never splits
TC_TILES, TC_TILES_TUNE = {"BN": 64, "STAGES": 3, "CH": 4}, {"BN": [64, 128], "STAGES": [2, 3], "CH": [4, 8]}
NHWC_TC = dict(family="gemm", backend="cuda", defines={**TC_TILES, "SPLIT_TARGET": 128, "SPLIT_MIN": 2048},
               tune={**TC_TILES_TUNE, "SPLIT_TARGET": [1, 128, 256, 512]})
FORWARD_TC = dict(NHWC_TC, defines={**TC_TILES, "FWD": 1}, tune=TC_TILES_TUNE)
# the same kernel with the product on Hopper's warpgroup MMA (WGMMA = 1, built for sm_90a): two
# warpgroups per block, each wgmma.mma_async reading a 64 x 32-byte slice of A and a BN x 32-byte
# slice of B straight from the swizzled shared ring; the ring (128-byte rows) in dynamic shared memory.
# BN is the widest block; each layer's is narrowed to its channels and to the device's fill
# (helpers/launch/gemm.py: wgmma_fit), so it is not searched: a search over one layer set would not see it
WGMMA_TC = dict(NHWC_TC, arch="sm_90a",
                defines={**NHWC_TC["defines"], "WGMMA": 1, "BN": 256, "CH": 8, "STAGES": 4},
                tune={"STAGES": [3, 4, 5], "SPLIT_TARGET": [1, 128, 256, 512]})
CONV_DGRAD += [
    Stage("conv_dgrad", 13, name, "conv_dgrad/13_tc_nhwc.cu", title, precision=precision, jit=jit,
          launch=launch, requires=requires, fallback=fallback, **kind)
    for kind, entries in (
        (NHWC_TC, (
            ("tc_fp16_nhwc", "fp16", "nhwc_fp16", "mma_nhwc", "mma_nhwc_requires", "tc_fp16_pipe",
             "dy' and w copied channel-last, the reduction in (r, s, k) order: both operands by cp.async, "
             "16 bytes per copy, into a ring of STAGES buffers (K % 8 == 0)"),
            ("tc_bf16_nhwc", "bf16", "nhwc_bf16", "mma_nhwc", "mma_nhwc_requires", "tc_bf16",
             "tc_fp16_nhwc on bfloat16 tensors (K % 8 == 0)"),
            ("tc_tf32_nhwc", "tf32", "nhwc_tf32", "mma_nhwc_tf32", "mma_nhwc_tf32_requires", "tc_tf32",
             "tc_fp16_nhwc with TF32 operands rounded in the copies and mma.sync m16n8k8 (K % 4 == 0)"))),
        (WGMMA_TC, (
            ("tc_fp16_wgmma", "fp16", "nhwc_fp16", "mma_nhwc", "mma_nhwc_requires", "tc_fp16_pipe",
             "tc_fp16_nhwc with the product on Hopper's wgmma.mma_async (sm_90a): operands read by the "
             "tensor cores from the swizzled shared ring, no ldmatrix (K % 8 == 0)"),
            ("tc_bf16_wgmma", "bf16", "nhwc_bf16", "mma_nhwc", "mma_nhwc_requires", "tc_bf16",
             "tc_fp16_wgmma on bfloat16 tensors (K % 8 == 0)"),
            ("tc_tf32_wgmma", "tf32", "nhwc_tf32", "mma_nhwc_tf32", "mma_nhwc_tf32_requires", "tc_tf32",
             "tc_fp16_wgmma with TF32 operands, wgmma m64nBNk8 (K % 4 == 0)"))))
    for name, precision, jit, launch, requires, fallback, title in entries]
# step 8: the same product with both operands copied by Hopper's Tensor Memory Accelerator (TMA =
# 1): a block's positions are a patch of the image, or at stride S of one of its S x S phases
# (helpers/launch/gemm.py: tma_patch), so the A tile of a tap is one box of dy'; one thread of a
# ninth, copying warp issues a chunk's two boxes, mbarriers say when they have landed and when
# their slot is free; TMA_STORE = 1: dx written through shared memory by one TMA store per block,
# where the layer allows it (helpers/launch/gemm.py: tma_store)
TMA_TC = dict(WGMMA_TC, defines={**WGMMA_TC["defines"], "TMA": 1, "TMA_STORE": 1})
CONV_DGRAD += [
    Stage("conv_dgrad", 13, name, "conv_dgrad/13_tc_nhwc.cu", title, precision=precision, jit=jit,
          launch=launch, requires=requires, fallback=fallback, **TMA_TC)
    for name, precision, jit, launch, requires, fallback, title in (
        ("tc_fp16_tma", "fp16", "nhwc_fp16", "mma_nhwc", "mma_nhwc_requires", "tc_fp16_pipe",
         "tc_fp16_wgmma with both operands copied by the Tensor Memory Accelerator: a block's positions "
         "a patch of the image (of one phase at a stride: only the taps that reach it), a tap's A tile "
         "one box of dy', one thread issues a chunk's copies, mbarriers pace the ring (K % 8 == 0)"),
        ("tc_bf16_tma", "bf16", "nhwc_bf16", "mma_nhwc", "mma_nhwc_requires", "tc_bf16",
         "tc_fp16_tma on bfloat16 tensors (K % 8 == 0)"),
        ("tc_tf32_tma", "tf32", "nhwc_tf32", "mma_nhwc_tf32", "mma_nhwc_tf32_requires", "tc_tf32",
         "tc_fp16_tma with TF32 operands (K % 4 == 0)"))]
# the same kernel on dy' interleaved in groups of 32 channels, (N, K/32, OH, OW, 32) (MegEngine's
# NCHW32), K padded with zeros to a whole group: no K is refused
CONV_DGRAD += [
    Stage("conv_dgrad", 13, name, "conv_dgrad/13_tc_nhwc.cu", title, precision=precision, jit=jit,
          launch=launch, requires="mma_nhwc_requires", **{**NHWC_TC, "defines": {**NHWC_TC["defines"], "ILV": 32}})
    for name, precision, jit, launch, title in (
        ("tc_fp16_nchw32", "fp16", "nhwc_fp16", "mma_nhwc",
         "tc_fp16_nhwc reading dy' interleaved, (N, K/32, OH, OW, 32), K padded with zeros to a "
         "multiple of 32: any K"),
        ("tc_bf16_nchw32", "bf16", "nhwc_bf16", "mma_nhwc", "tc_fp16_nchw32 on bfloat16 tensors"),
        ("tc_tf32_nchw32", "tf32", "nhwc_tf32", "mma_nhwc_tf32", "tc_fp16_nchw32 with TF32 operands"))]
# chapter 13's channel-last tensor-core kernel on the forward pass (13_tc_nhwc.cu with FWD = 1): x and w
# copied channel-last, the product with the bias and activation fused into its epilogue
CONV_FORWARD += [
    Stage("conv_forward", 13, name, "conv_dgrad/13_tc_nhwc.cu", title, precision=precision, jit=jit, launch=launch,
          requires=requires, epilogue=True, **FORWARD_TC)
    for name, precision, jit, launch, requires, title in (
        ("tc_fp16_nhwc", "fp16", "fp16_operands", "mma_fwd", "mma_fwd_requires",
         "the input gradient's channel-last tensor-core product run forward: x and w copied channel-last, "
         "cp.async ring, mma.sync m16n8k16, bias and activation fused into the epilogue (C % 8 == 0)"),
        ("tc_bf16_nhwc", "bf16", "bf16_operands", "mma_fwd", "mma_fwd_requires",
         "tc_fp16_nhwc on bfloat16 tensors (C % 8 == 0)"),
        ("tc_tf32_nhwc", "tf32", "tf32_operands", "mma_fwd_tf32", "mma_fwd_tf32_requires",
         "tc_fp16_nhwc with TF32 operands rounded in the copies and mma.sync m16n8k8 (C % 4 == 0)"))]

# conv_dgrad's algorithm chooser (chapter 11): times the other registered stages once per device
# and layer shape within the caller's workspace budget (workspace_limit), caches the winner, runs it.
CONV_DGRAD.append(
    Stage("conv_dgrad", 11, "auto", "", "the fastest registered stage for this device and shape "
          "within the workspace budget, timed once and cached (helpers/chooser.py)", choose=True))

# conv3d_dgrad: the 3-D input gradient through vol2col (chapter 11)
CONV3D_DGRAD = [
    Stage("conv3d_dgrad", 11, "vol2col", "conv3d_dgrad/11_vol2col.cl",
          "GEMM over K into a column workspace (C*T*R*S x N*OD*OH*OW), then col2vol",
          launch="vol2col", defines={**TILES, "WG": 64}, requires="vol_requires", family="gemm"),
]

# conv_wgrad: the weight gradient, a long sum (N*OH*OW terms) behind each of few outputs
# (C*K*R*S); kernels/conv_wgrad/README.md explains the ladder.
CONV_WGRAD = [
    Stage("conv_wgrad", 1, "naive", "conv_wgrad/01_naive.cl",
          "one work-item per weight (c, k, r, s) walks the whole sum over (n, oh, ow) alone",
          family="direct", launch="per_weight", defines=WG, tune=WG_TUNE),
    Stage("conv_wgrad", 2, "split_reduction", "conv_wgrad/02_split_reduction.cl",
          "the sum split into slices of WG*ITEMS positions, one work-group per (weight, slice) "
          "reducing in local memory; a second kernel adds the slices' partials in a fixed order",
          family="wgrad", launch="split_reduction", requires="split_requires",
          defines={"WG": 128, "ITEMS": 16}, tune={"WG": [64, 128, 256], "ITEMS": [4, 16, 64]}),
    Stage("conv_wgrad", 3, "igemm", "conv_wgrad/03_igemm.cl",
          "implicit GEMM dw^T (K x C*R*S) = dy'^T . cols^T on the course GEMM's tiles, x gathered "
          "into the B tiles, float4 loads of dy' when OH*OW % 4 == 0; the deep reduction split "
          "into slices of SLICE positions, summed in order by stage 02's second kernel",
          family="wgrad", launch="igemm_split", defines={**TILES, "SLICE": 4096}, jit="vectors",
          requires="igemm_requires", fast={"GEMM_VEC_A": 1},
          tune={**GEMM_FAMILY["tune"], "SLICE": [1024, 4096, 16384]}),
    Stage("conv_wgrad", 4, "winograd", "conv_wgrad/04_winograd.cl",
          "Winograd F(3x3,4x4): 4x4 tiles of dy' and 6x6 patches of x transformed, 36 products "
          "over the tiles on the course GEMM (a quarter of stage 03's multiplications), split into "
          "slices of SLICE tiles, summed in order and transformed back; other layers run stage 03",
          family="wgrad", launch="winograd", defines={**TILES, "SLICE": 512, "WG": 64},
          requires="winograd_requires", fallback="igemm",
          tune={**GEMM_FAMILY["tune"], "TK": [16], "SLICE": [128, 512, 2048], "GEMM_LDS4": [0, 1],
                "GEMM_PREFETCH": [0, 1]}),
]

REGISTRY: dict[str, list[Stage]] = {
    "conv_dgrad": CONV_DGRAD,
    "conv_wgrad": CONV_WGRAD,
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


def stage_names(op: str, backend: str | None = "opencl") -> list[str]:
    """Names of an operation's stages in course order: its OpenCL stages (what runs on any
    device), those of another backend ("cuda"), or all (backend=None)."""
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; the backends are {', '.join(BACKENDS)}")
    return [s.name for s in _stages(op) if backend is None or s.backend == backend]


def get_stage(op: str, stage) -> Stage:
    """A stage by name, by number, or by key ('02_naive'). A number picks the OpenCL stage of
    that chapter; its twins in other backends are reached by name ('naive_cuda'). A Stage itself
    (a ``dataclasses.replace``d copy: a kernel exercise, a planted fault) is returned as it is."""
    if isinstance(stage, Stage):
        if stage.op != op:
            raise ValueError(f"stage {stage.key} belongs to {stage.op}, not to {op}")
        return stage
    stages = _stages(op)
    for s in stages:
        if stage in (s.name, s.key):
            return s
    if isinstance(stage, int) and not isinstance(stage, bool):
        for s in stages:
            if stage == s.number and s.backend == "opencl":
                return s
    listing = ", ".join(f"{s.number} {s.name}" for s in stages)
    raise ValueError(f"{op} has no stage {stage!r}; its stages are: {listing}")


def twin_of(s: Stage) -> Stage | None:
    """The OpenCL stage a CUDA twin repeats (its name without '_cuda': '10_hoisted_cuda' ->
    '10_hoisted', the same algorithm, tile and layout), or None for a stage that is no twin."""
    if s.backend != "cuda" or not s.name.endswith("_cuda"):
        return None
    return get_stage(s.op, s.name.removesuffix("_cuda"))


# chapters 09-10's stages that have a CUDA twin (timed and counted side by side in chapter 10)
LOCAL_TWINNED = tuple(t.name for t in map(twin_of, CONV_DGRAD) if t is not None and t.family == "local")
