"""conv_wgrad: the weight gradient, a long sum (N*OH*OW terms) behind each of few outputs
(C*K*R*S), chapter 15; kernels/conv_wgrad/README.md explains the ladder."""
from ..launch import direct, direct_nd, wgrad
from .params import (DEPTHWISE, DW_REGS, DW_REGS_TUNE, DW_TILES, DW_TILES_TUNE, GEMM_TUNE, IGEMM_ND, IGEMM_ND_VARIANT,
                     SPLIT_FILL, TILES, WG, WG_TUNE)
from .stage import Stage

SPLIT_TARGETS = [1024, 2048, 4096, 8192]    # depthwise: the work-groups the splits aim for

STAGES = [
    Stage("conv_wgrad", 1, "naive", "conv_wgrad/01_naive.cl",
          "one work-item per weight (c, k, r, s) walks the whole sum over (n, oh, ow) alone",
          family=direct, launch="per_weight", defines=WG, tune=WG_TUNE),
    # the split stages also run with short slices, so that every case of the grid sums several
    # (the defaults' slices are longer than most of the grid's sums)
    Stage("conv_wgrad", 2, "split_reduction", "conv_wgrad/02_split_reduction.cl",
          "the sum split into slices of WG*ITEMS positions, one work-group per (weight, slice) "
          "reducing in local memory; a second kernel adds the slices' partials in a fixed order",
          family=wgrad, launch="split_reduction", defines={"WG": 128, "ITEMS": 16},
          tune={"WG": [64, 128, 256], "ITEMS": [4, 16, 64]}, requires=wgrad.split_requires,
          variants=({"WG": 8, "ITEMS": 2},)),
    Stage("conv_wgrad", 3, "igemm", "conv_wgrad/03_igemm.cl",
          "implicit GEMM dw^T (K x C*R*S) = dy'^T . cols^T on the course GEMM's tiles, x gathered "
          "into the B tiles, float4 loads of dy' when OH*OW % 4 == 0; the deep reduction split "
          "into slices of SLICE positions, summed in order by stage 02's second kernel",
          family=wgrad, launch="igemm_split", defines={**TILES, "SLICE": 4096},
          tune={**GEMM_TUNE, "SLICE": [1024, 4096, 16384]}, jit=wgrad.vectors, requires=wgrad.igemm_requires,
          fast={"GEMM_VEC_A": 1}, variants=({"SLICE": 32},)),
    Stage("conv_wgrad", 4, "winograd", "conv_wgrad/04_winograd.cl",
          "Winograd F(3x3,4x4): 4x4 tiles of dy' and 6x6 patches of x transformed, 36 products "
          "over the tiles on the course GEMM (a quarter of stage 03's multiplications), split into "
          "slices of SLICE tiles (fewer where the launch has fewer work-groups than SPLIT_TARGET), "
          "summed in order and transformed back, the taps stored through local memory (STORE_LOCAL) "
          "and, where a row of x is longer than a cache line (W >= LOAD_LOCAL_W), the x patches "
          "loaded through it; other layers run stage 03",
          family=wgrad, launch="winograd",
          defines={**TILES, "SLICE": 512, "WG": 64, "SPLIT_TARGET": 1, "LOAD_LOCAL_W": 33, "STORE_LOCAL": 1},
          tune={**GEMM_TUNE, "TK": [16], "SLICE": [128, 512, 2048], "SPLIT_TARGET": SPLIT_FILL},
          jit=wgrad.wino_jit, requires=wgrad.winograd_requires,
          fallback="igemm",
          variants=({"SLICE": 4, "TK": 4}, {"SLICE": 4, "TK": 4, "LOAD_LOCAL_W": 1 << 20, "STORE_LOCAL": 0})),
    Stage("conv_wgrad", 5, "igemm_phases", "conv_wgrad/05_igemm_phases.cl",
          "stage 03 for strided layers: x first cut into its stride x stride phase planes (a "
          "workspace, padding stored as zeros), so each tap reads one plane at stride 1 without "
          "bounds tests; stride 1 runs stage 03",
          family=wgrad, launch="igemm_phases", defines={**TILES, "SLICE": 4096, "WG": 256},
          tune={**GEMM_TUNE, "SLICE": [1024, 4096, 16384]}, jit=wgrad.vectors, requires=wgrad.phases_requires,
          fallback="igemm", fast={"GEMM_VEC_A": 1}, variants=({"SLICE": 32, "WG": 8},)),
    Stage("conv_wgrad", 6, "igemm_blocked", "conv_wgrad/06_igemm_blocked.cl",
          "stage 03's implicit GEMM with x copied along the reduction as it lies (coalesced), each "
          "work-item's position decoded once per step and its taps once, 8x8 register blocks and float4 "
          "tile reads on a tuned GPU; slices summed in order (shorter where the launch has fewer "
          "work-groups than SPLIT_TARGET); strided layers natively",
          family=wgrad, launch="igemm_blocked", defines={**TILES, "SLICE": 1024, "SPLIT_TARGET": 1},
          tune={"TM": [64, 128], "TN": [64, 128], "TK": [8, 16], "WM": [8], "WN": [8], "GEMM_LDS4": [1],
                "GEMM_PREFETCH": [0, 1], "SLICE": [1024, 4096], "SPLIT_TARGET": SPLIT_FILL},
          jit=wgrad.blocked_jit, requires=wgrad.blocked_requires, fast={"GEMM_VEC_A": 1},
          variants=({"SLICE": 32, "TK": 8}, {"TM": 32, "TN": 32, "WM": 4, "WN": 4, "GEMM_LDS4": 1,
                                              "GEMM_PREFETCH": 1, "SLICE": 16, "TK": 8})),
    # chapter 16: every shape (groups, dilation, a stride per axis, a padding per side, 1-4 axes)
    Stage("conv_wgrad", 16, "any_shape", "conv_wgrad/16_any_shape.cl",
          "one work-item per weight of a convolution of any shape (1-4 spatial axes, groups, dilation, "
          "strides per axis, padding per side) seen as 4-D, walking its whole sum alone",
          family=direct_nd, launch="per_weight", defines=WG, tune=WG_TUNE, any_shape=True),
    # the depthwise ladder (helpers/launch/depthwise.py): 2-D, groups = C = K; other shapes run
    # any_shape. The variants: small tiles, one split per channel (a work-group walks all its
    # tiles) and many splits
    Stage("conv_wgrad", 16, "dw_tiles", "conv_wgrad/16_dw_tiles.cl",
          "depthwise (groups = C = K, 2-D): each work-group sums a channel's R x S weights over a split "
          "of its output tiles, the input tile with its halo staged in local memory, all R x S sums "
          "in registers, added across the group in local memory; stage 02's ordered second pass",
          defines={**DW_TILES, "SPLIT_TARGET": 2048}, tune={**DW_TILES_TUNE, "SPLIT_TARGET": SPLIT_TARGETS},
          variants=({"TX": 4, "TY": 2, "SPLIT_TARGET": 1}, {"TX": 2, "TY": 4, "SPLIT_TARGET": 64}), launch="wgrad", **DEPTHWISE),
    Stage("conv_wgrad", 16, "dw_regs", "conv_wgrad/16_dw_regs.cl",
          "dw_tiles with XPW positions of a row per work-item: their dy' in registers (float4s when "
          "OW % 4 == 0), each tap row's shared input window read once from local memory",
          defines={**DW_REGS, "SPLIT_TARGET": 4096}, tune={**DW_REGS_TUNE, "SPLIT_TARGET": SPLIT_TARGETS},
          fast={"VEC": 1}, variants=({"TX": 2, "TY": 2, "XPW": 4, "SPLIT_TARGET": 1},), launch="wgrad", **DEPTHWISE),
    # stage 06's implicit GEMM for every shape (helpers/launch/igemm_nd.py): groups and slices in one
    # launch, slices summed in order
    Stage("conv_wgrad", 16, "igemm_nd", "conv_wgrad/16_igemm_nd.cl",
          "stage 06's implicit GEMM per group (tile fitted to the group's channels), x copied along the "
          "reduction, groups and slices of SLICE positions in one launch (shorter where the launch has "
          "fewer work-groups than SPLIT_TARGET), the slices summed in order; dilation, strides and padding "
          "per axis in the gather, ranks 1-4",
          defines={**TILES, "SLICE": 1024, "SPLIT_TARGET": 1},
          tune={**GEMM_TUNE, "SLICE": [1024, 4096], "SPLIT_TARGET": SPLIT_FILL}, launch="wgrad",
          fast={"GEMM_VEC_A": 1}, variants=({**IGEMM_ND_VARIANT, "SLICE": 32},), **IGEMM_ND),
    # Chapter 11's algorithm chooser (helpers/chooser.py), here as for the input gradient: the
    # candidates ranked by their recorded speed, the best few timed once per device and shape
    Stage("conv_wgrad", 11, "auto", "",
          "the fastest registered stage for this device and shape within the workspace budget: ranked "
          "by a model of the recorded runs, the best few timed once and cached (helpers/chooser.py)", choose=True),
]
