"""JIT parameter sets that stages of several operations share (named once, used by value).

A stage's entry names one of these where its defaults or its search are exactly the set; the
validator checks every value of every set like any other entry's (helpers/stages/validate.py).
"""

from ..launch import depthwise, igemm_nd, winograd

WG = {"WG": 64}
WG_TUNE = {"WG": [32, 64, 128, 256]}

# The course GEMM's tiles (kernels/common/gemm_core.h, helpers/launch/gemm.py), shared by every
# stage built on it, and its switches GEMM_PREFETCH and GEMM_LDS4 (default 0: a device nobody
# tuned for builds the plain core; tuned per device, e.g. python -m helpers.bench --tune-only
# GEMM_LDS4,GEMM_PREFETCH on top of the tiles)
TILES = {"TM": 64, "TN": 64, "TK": 16, "WM": 4, "WN": 4, "GEMM_PREFETCH": 0, "GEMM_LDS4": 0}
# split-K and the weight gradient's slices (gemm.igemm_fwd_splits, wgrad.filled): the work-groups a
# launch aims for, the reduction cut where it has fewer (1: never; the registry's default, tuned per
# device)
SPLIT_FILL = [1, 256, 512, 1024]
GEMM_TUNE = {"TM": [64, 128], "TN": [64, 128], "TK": [8, 16], "WM": [4, 8], "WN": [4, 8],
             "GEMM_LDS4": [0, 1], "GEMM_PREFETCH": [0, 1]}
TILES_WG = {**TILES, "WG": 64}           # with the work-group of the copy kernels beside the GEMM

# Winograd F(2x2,3x3)'s register-blocked products (chapter 12: conv_forward 05, conv_dgrad 12):
# the launch, its tiles and what it needs, the same for both operations
WINO_BLOCKED = {"WG": 64, "TM": 64, "TN": 64, "REG": 4, "TK": 8, "PREFETCH": 1}
WINO_BLOCKED_TUNE = {"TM": [64, 128], "TN": [64, 128], "REG": [4, 8], "TK": [8, 16]}
WINO_F23 = dict(family=winograd, launch="blocked", defines=WINO_BLOCKED, tune=WINO_BLOCKED_TUNE,
                requires=winograd.winograd_f23)

# Winograd F(4x4,3x3) (chapter 12a): 6x6 tiles, the 36 products as a batch through the course
# GEMM (its tiles and tune lists). JOINT_TRANSFORMS = 1: the filter and input transforms in one
# launch (0: two); WINO_CHANNEL_MAJOR = 1: V and M stored channel-major (0: product-major); both
# are chapter 12a's recorded pairs
WINO4 = {**TILES, "WG": 64, "JOINT_TRANSFORMS": 1, "WINO_CHANNEL_MAJOR": 1}
# its launch and what it needs (conv_forward 06, conv_dgrad 12), its float4 stores where the
# output's width allows (WINO_VEC_OUT)
WINO_F43 = dict(family=winograd, launch="blocked_f4x4", defines=WINO4, jit=winograd.wino_vectors,
                requires=winograd.winograd_f43, fast={"WINO_VEC_OUT": 1})

# Chapter 13's channel-last tensor-core kernel (13_tc_nhwc.cu), both directions: its tiles
TC_TILES = {"BN": 64, "STAGES": 3, "CH": 4}
TC_TILES_TUNE = {"BN": [64, 128], "STAGES": [2, 3], "CH": [4, 8]}

# Chapter 16's depthwise stages (conv_dgrad and conv_wgrad 16_dw_tiles, 16_dw_regs;
# helpers/launch/depthwise.py): a TX x TY tile per work-group slice (shrunk to a smaller plane,
# the rest of the work-group more slices), XPW outputs of a row per work-item in dw_regs;
# 2-D depthwise layers only, the rest run any_shape. dw_regs' defaults: the fastest of the sets
# timed on most MobileNetV2 and ConvNeXt depthwise layers on the H200 (the strided layers' weight
# gradient preferred XPW = 4; results/conv_wgrad_mobilenetv2_dw_nvidia-h200.json runs the defaults)
DEPTHWISE = dict(family=depthwise, jit=depthwise.jit, requires=depthwise.depthwise_requires, fallback="any_shape", any_shape=True)
DW_TILES = {"TX": 32, "TY": 8}
DW_TILES_TUNE = {"TX": [16, 32], "TY": [4, 8, 16]}
DW_REGS = {"TX": 8, "TY": 8, "XPW": 8}
DW_REGS_TUNE = {"TX": [4, 8, 16], "TY": [4, 8, 16], "XPW": [4, 8]}

# Chapter 16's implicit GEMM for convolutions of any shape (conv_forward, conv_dgrad, conv_wgrad
# 16_igemm_nd; helpers/launch/igemm_nd.py): the course GEMM's tiles, fitted per layer to the
# group's channels; every shape of helpers/ops/shape.py, ranks 1-4
IGEMM_ND = dict(family=igemm_nd, jit=igemm_nd.jit, requires=igemm_nd.igemm_nd_requires, any_shape=True)
# a small tile with both switches of the tile loop on, and short slices (many of them) for the
# weight gradient: the grid meets every partial tile and slice with them too
IGEMM_ND_VARIANT = {"TM": 32, "TN": 32, "TK": 8, "WM": 4, "WN": 4, "GEMM_LDS4": 1, "GEMM_PREFETCH": 1}
