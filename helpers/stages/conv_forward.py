"""conv_forward: the forward convolution, in course order: a direct baseline, then Winograd
stages 01-05 (chapter 12) and 06 (F(4x4), chapter 12a), im2col and the implicit GEMM (chapter
11), and chapter 13's channel-last tensor-core kernel run forward (13_tc_nhwc.cu with FWD = 1: x
and w copied channel-last, the product with the bias and activation fused into its epilogue), then
chapter 16's direct kernel of any shape. A stage without ``epilogue`` computes the bare convolution and
refuses a bias or an activation by name; one without ``any_shape`` refuses all but plain 2-D shapes."""
from ..launch import direct, direct_nd, gemm, tensor_cores, winograd
from .conv_dgrad import CP_ASYNC, LDMATRIX, MMA_BF16, MMA_FP16, MMA_TF32, TO_TF32
from .params import (GEMM_TUNE, IGEMM_ND, IGEMM_ND_VARIANT, SPLIT_FILL, TC_TILES, TC_TILES_TUNE, TILES, TILES_WG, WG,
                     WINO_F23, WINO_F43)
from .stage import Stage

FORWARD_TC = {**TC_TILES, "FWD": 1}

STAGES = [
    Stage("conv_forward", 0, "direct", "conv_forward/00_direct.cl",
          "direct convolution, one work-item per output element: the baseline",
          family=direct, launch="per_output_element", defines=WG, tune={"WG": [64, 128, 256]},
          epilogue=True),
    Stage("conv_forward", 1, "wino_naive", "conv_forward/01_wino_naive.cl",
          "Winograd F(2x2,3x3) in four kernels, one work-item per element of each step",
          family=winograd, launch="per_element", defines=WG, tune={"WG": [64, 256]},
          requires=winograd.winograd_f23),
    Stage("conv_forward", 2, "wino_tiles", "conv_forward/02_wino_tiles.cl",
          "each work-item transforms a whole 4x4 input tile / 2x2 output tile in registers",
          family=winograd, launch="tiles", defines=WG, tune={"WG": [64, 256]}, requires=winograd.winograd_f23),
    Stage("conv_forward", 3, "wino_local", "conv_forward/03_wino_local.cl",
          "the 16 matrix products tiled through local memory (16x16 blocks)",
          family=winograd, launch="local", defines={"WG": 64, "TS": 16}, tune={"TS": [8, 16]},
          requires=winograd.winograd_f23),
    Stage("conv_forward", 4, "wino_transposed", "conv_forward/04_wino_transposed.cl",
          "V transposed: no local-memory bank conflicts in the products",
          family=winograd, launch="local", defines={"WG": 64, "TS": 16}, tune={"TS": [8, 16]},
          requires=winograd.winograd_f23),
    Stage("conv_forward", 5, "wino_blocked", "conv_forward/05_wino_blocked.cl",
          "register-blocked products: 64x64 per work-group, 4x4 per work-item, float4 local loads",
          **WINO_F23),
    Stage("conv_forward", 6, "wino4_blocked", "conv_forward/06_wino4_blocked.cl",
          "Winograd F(4x4,3x3): 6x6 input tiles, the 36 products through the course GEMM (2.25 "
          "multiplications per output instead of 4); unsupported layers run stage 05",
          tune=GEMM_TUNE, fallback="wino_blocked", **WINO_F43),
    Stage("conv_forward", 11, "im2col", "conv_forward/11_im2col.cl",
          "chapter 11: im2col into a column workspace (C*R*S x N*OH*OW), then the course GEMM",
          family=gemm, launch="im2col", defines=TILES_WG, tune=GEMM_TUNE, jit=gemm.im2col_vectors,
          requires=gemm.cols_requires, fast={"GEMM_VEC_B": 1}),
    Stage("conv_forward", 11, "igemm", "conv_forward/11_igemm.cl",
          "implicit GEMM: x gathered into the GEMM's B tiles, no column workspace; the weights turned "
          "to (K,C,R,S) first so that A's copy is coalesced (float4 when C*R*S % 4 == 0); a 1x1 layer "
          "at stride 1 without padding gathers nothing (B is x as it lies, float4 when H*W % 4 == 0); "
          "split-K where the product has fewer work-groups than SPLIT_TARGET",
          family=gemm, launch="igemm_fwd", defines={**TILES_WG, "SPLIT_TARGET": 1},
          tune={**GEMM_TUNE, "SPLIT_TARGET": SPLIT_FILL}, jit=gemm.igemm_fwd_vectors,
          requires=gemm.igemm_fwd_requires, fast={"POINTWISE": 1}),
    # one transpose for both copies (to_channel_last), the product its own kernel (conv_forward)
    Stage("conv_forward", 13, "tc_fp16_nhwc", "conv_dgrad/13_tc_nhwc.cu",
          "the input gradient's channel-last tensor-core product run forward: x and w copied "
          "channel-last, cp.async ring, mma.sync m16n8k16, bias and activation fused into the "
          "epilogue (C % 8 == 0)",
          family=tensor_cores, launch="mma_fwd", backend="cuda", precision="fp16", defines=FORWARD_TC,
          tune=TC_TILES_TUNE, jit=tensor_cores.fp16_operands, requires=tensor_cores.mma_fwd_requires, epilogue=True,
          ptx=(MMA_FP16, LDMATRIX, CP_ASYNC, ".entry to_channel_last(", ".entry conv_forward(")),
    Stage("conv_forward", 13, "tc_bf16_nhwc", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_nhwc on bfloat16 tensors (C % 8 == 0)",
          family=tensor_cores, launch="mma_fwd", backend="cuda", precision="bf16", defines=FORWARD_TC,
          tune=TC_TILES_TUNE, jit=tensor_cores.bf16_operands, requires=tensor_cores.mma_fwd_requires, epilogue=True,
          ptx=(MMA_BF16, ".entry to_channel_last(")),
    Stage("conv_forward", 13, "tc_tf32_nhwc", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_nhwc with TF32 operands rounded in the copies and mma.sync m16n8k8 (C % 4 == 0)",
          family=tensor_cores, launch="mma_fwd_tf32", backend="cuda", precision="tf32", defines=FORWARD_TC,
          tune=TC_TILES_TUNE, jit=tensor_cores.tf32_operands, requires=tensor_cores.mma_fwd_tf32_requires, epilogue=True,
          ptx=(MMA_TF32, TO_TF32, ".entry to_channel_last(", ".entry conv_forward(")),
    # chapter 16: every shape (groups, dilation, a stride per axis, a padding per side, 1-4 axes)
    Stage("conv_forward", 16, "any_shape", "conv_forward/16_any_shape.cl",
          "one work-item per output element of a convolution of any shape (1-4 spatial axes, groups, "
          "dilation, strides per axis, padding per side) seen as 4-D, with the bias and activation",
          family=direct_nd, launch="per_output_element", defines=WG, tune={"WG": [64, 128, 256]},
          epilogue=True, any_shape=True),
    # chapter 11's implicit GEMM for every shape (helpers/launch/igemm_nd.py): groups in one launch
    Stage("conv_forward", 16, "igemm_nd", "conv_forward/16_igemm_nd.cl",
          "implicit GEMM per group on the course GEMM's tiles (fitted to the group's channels), the "
          "groups in one launch, dilation, strides and padding per axis in the gather, ranks 1-4; the "
          "bias and activation in the epilogue",
          defines=TILES, tune=GEMM_TUNE, launch="forward", variants=(IGEMM_ND_VARIANT,), epilogue=True,
          **IGEMM_ND),
    # Chapter 11's algorithm chooser (helpers/chooser.py), here as for the input gradient: the
    # candidates ranked by their recorded speed, the best few timed once per device and shape
    Stage("conv_forward", 11, "auto", "",
          "the fastest registered stage for this device and shape within the workspace budget: ranked "
          "by a model of the recorded runs, the best few timed once and cached (helpers/chooser.py)", choose=True),
]
