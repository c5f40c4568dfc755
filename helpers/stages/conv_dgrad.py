"""conv_dgrad: the input gradient of a convolution layer (chapters 02-13), in course order.

A CUDA twin of an OpenCL stage is named ``<name>_cuda``: the same number, family, launch,
defines and tune lists (the validator checks it); its fallback is a CUDA stage.
"""
from dataclasses import replace

from ..launch import direct, direct_nd, gemm, local, tensor_cores
from .params import (DEPTHWISE, DW_REGS, DW_REGS_TUNE, DW_TILES, DW_TILES_TUNE, GEMM_TUNE, IGEMM_ND, IGEMM_ND_VARIANT,
                     TC_TILES, TC_TILES_TUNE, TILES, TILES_WG, WG, WG_TUNE, WINO_F23, WINO_F43)
from .stage import Stage

# Chapter 09: tiles in local memory (helpers/launch/local.py: geometry, constraints). Stride 1
# only; strided layers and kernels whose tile does not fit run stage 08 (the CUDA twins: 03's):
# the launch of every stage of chapters 09-10
TILED = dict(family=local, launch="tiles", jit=local.jit_tile, requires=local.stride_one, fallback="width")
LOCAL_TUNE = {"TY": [4, 8], "XPW": [4, 8], "CPW": [4, 8]}
# 09's defaults (XPW = CPW = 4) with TY = 8 would need 512 work-items per group: TY stays 4 (the
# H200 search over all combinations kept TY = 4 for both stages: results/local/run2_tune_*)
LOCAL_TUNE_09 = {"XPW": [4, 8], "CPW": [4, 8]}
PREFETCH = {"TX": 32, "TY": 4, "CB": 32, "KC": 4, "XPW": 4, "CPW": 4, "BUFFERS": 2}
# Chapter 10: the slab transposed for float4 reads; VEC4 and WPAD describe the layout to the bank
# model (helpers/chapters/local.py). 10_swizzle's switch ROWCOPY=1 (default 0: the recorded runs)
# copies dy by whole stored rows: a candidate of the search, so the grid tests and the PTX
# compile take it too.
SLAB = {**PREFETCH, "XPW": 8, "VEC4": 1, "WPAD": 0}
SLAB_PADDED = {**SLAB, "WPAD": 4}

# Chapter 11: the phase split's GEMMs, each phase compiled with its tap counts as constants
# (PHASE_CONSTANT) and dx stored through local memory (STORE_LOCAL); SPLIT_TARGET: the
# work-groups split-K aims for (1: never split)
PHASES = {**TILES, "PHASE_CONSTANT": 1, "STORE_LOCAL": 1, "SPLIT_TARGET": 1}
PHASES_TUNE = {**GEMM_TUNE, "SPLIT_TARGET": [1, 128, 256, 512]}

# the input gradient's F(4x4) also searches WG, the work-group of its three transform kernels (the
# output transform's time moves with it: res128@28 0.038 -> 0.033 ms at 32 on the H200). Searched
# on its own (./course record: tune-wino4-wg): with the tile lists it would triple the search.
WINO4_DGRAD_TUNE = {**GEMM_TUNE, "WG": [32, 64, 128]}

# Chapter 13, the channel-last tensor-core kernel (13_tc_nhwc.cu) with split-K for the input
# gradient: SPLIT_TARGET is the blocks its product should have; fewer, and a reduction of at least
# SPLIT_MIN terms is split (helpers/launch/tensor_cores.py: nhwc_splits); 1 never splits
NHWC_TC = {**TC_TILES, "SPLIT_TARGET": 128, "SPLIT_MIN": 2048}
NHWC_TC_TUNE = {**TC_TILES_TUNE, "SPLIT_TARGET": [1, 128, 256, 512]}
# the same kernel with the product on Hopper's warpgroup MMA (WGMMA = 1, built for sm_90a): two
# warpgroups per block, each wgmma.mma_async reading a 64 x 32-byte slice of A and a BN x 32-byte
# slice of B straight from the swizzled shared ring; the ring (128-byte rows) in dynamic shared
# memory. BN is the widest block; each layer's is narrowed to its channels and to the device's fill
# (helpers/launch/tensor_cores.py: wgmma_fit), so it is not searched: a search over one layer set would not see it
WGMMA_TC = {**NHWC_TC, "WGMMA": 1, "BN": 256, "CH": 8, "STAGES": 4}
WGMMA_TC_TUNE = {"STAGES": [3, 4, 5], "SPLIT_TARGET": [1, 128, 256, 512]}
# step 8: both operands copied by Hopper's Tensor Memory Accelerator (TMA = 1): a block's positions
# are a patch of the image, or at stride S of one of its S x S phases (helpers/launch/tensor_cores.py:
# tma_patch), so the A tile of a tap is one box of dy'; one thread of a ninth, copying warp issues a
# chunk's two boxes, mbarriers say when they have landed and when their slot is free; TMA_STORE =
# 1: dx written through shared memory by one TMA store per block, where the layer allows it
# (helpers/launch/tensor_cores.py: tma_store)
TMA_TC = {**WGMMA_TC, "TMA": 1, "TMA_STORE": 1}
# dy' interleaved in groups of 32 channels, (N, K/32, OH, OW, 32) (MegEngine's NCHW32), K padded
# with zeros to a whole group: no K is refused
NCHW32_TC = {**NHWC_TC, "ILV": 32}

# what the tensor-core stages' PTX must hold (tests/test_cuda.py compiles each for its archs)
MMA_TF32 = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
MMA_FP16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
MMA_BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
LDMATRIX, TO_TF32 = "ldmatrix.sync.aligned.m8n8.x4", "cvt.rna.tf32.f32"
CP_ASYNC, CP_WAIT = "cp.async.cg.shared.global", "cp.async.wait_group"
TENSOR_COPY_4D = "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
TENSOR_COPY_3D = "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
# (the wgmma shapes are m64n64: the PTX test's problem has 2 channels, so the blocks narrow to 64)


def with_twin(stage: Stage, name: str, kernel: str, title: str) -> list:
    """An OpenCL stage and its CUDA twin (``name`` = its name + "_cuda"): the same algorithm,
    launch, tile and tune lists in ``kernel`` (its .cu file); a fallback goes to stage 03's twin."""
    return [stage, replace(stage, name=name, kernel=kernel, title=title, backend="cuda",
                           fallback="memoized_bounds_cuda" if stage.fallback else None)]


STAGES = [
    # Chapters 02-08: the direct ladder, one work-item (or register tile) per input element
    *with_twin(
        Stage("conv_dgrad", 2, "naive", "conv_dgrad/02_naive.cl",
              "one work-item per input element; bounds and stride checks inside the loops",
              family=direct, launch="per_input_element", defines=WG, tune=WG_TUNE),
        "naive_cuda", "conv_dgrad/02_naive.cu",
        "stage 02 in CUDA: one thread per input element, the same loops"),
    Stage("conv_dgrad", 2, "naive_fp16", "conv_dgrad/02_naive_fp16.cl",
          "stage 02 on fp16 tensors: vload_half / vstore_half, the sum in float",
          family=direct, launch="per_input_element", precision="fp16", defines=WG, tune=WG_TUNE),
    *with_twin(
        Stage("conv_dgrad", 3, "memoized_bounds", "conv_dgrad/03_memoized_bounds.cl",
              "padding and stride checks evaluated once per work-item into a table, looked up in the k loop",
              family=direct, launch="per_input_element", defines=WG, tune=WG_TUNE),
        "memoized_bounds_cuda", "conv_dgrad/03_memoized_bounds.cu",
        "stage 03 in CUDA: the same per-thread tables of valid kernel rows and columns"),
    Stage("conv_dgrad", 4, "weight_vec", "conv_dgrad/04_weight_vec.cl",
          "3x3 (JIT time): the 9 weights of a (c, k) pair as one 8-wide load + one scalar; "
          "other kernel sizes: stage 03's path",
          family=direct, launch="per_input_element", defines=WG, tune=WG_TUNE, fast={"KH": 3, "KW": 3}),
    Stage("conv_dgrad", 5, "input_vec", "conv_dgrad/05_input_vec.cl",
          "3x3 stride 1: 3-wide loads of dy rows for work-items whose window is inside the tensor; "
          "scalar at borders and for strides",
          family=direct, launch="per_input_element", defines=WG, tune=WG_TUNE,
          fast={"KH": 3, "KW": 3, "STRIDE": 1}, branches=("inside",)),
    Stage("conv_dgrad", 6, "output_depth", "conv_dgrad/06_output_depth.cl",
          "3x3 with K % 16 == 0 (JIT time): 16 output depths per iteration, their 144 weights through "
          "nine 16-wide loads (ping-pong), depth loop innermost; otherwise stage 05's loops",
          family=direct, launch="per_input_element", defines=WG, tune=WG_TUNE, jit=direct.depth16,
          fast={"KH": 3, "KW": 3, "K16": 1}, branches=("inside",)),
    Stage("conv_dgrad", 7, "input_depth", "conv_dgrad/07_input_depth.cl",
          "CPW input channels per work-item reuse each dy value; generated 3x3 block with split "
          "weight loads (SPLIT depths at a time) when K % 16 == 0; general loops otherwise",
          family=direct, launch="channel_tiles", defines={"CPW": 4, "SPLIT": 4, "WG": 128},
          tune={"CPW": [4, 8, 16], "SPLIT": [4, 16], "WG": [64, 256]}, jit=direct.fast_3x3, generate=direct.unrolled,
          fast={"FAST": 1}, branches=("inside",)),
    Stage("conv_dgrad", 8, "width", "conv_dgrad/08_width.cl",
          "XPW neighbouring x positions x CPW channels per work-item: a column table of XPW+2 "
          "entries, 4-wide row loads inside the tensor, each weight used XPW times",
          family=direct, launch="channel_width_tiles", defines={"CPW": 4, "XPW": 4, "SPLIT": 4, "WG": 128},
          tune={"CPW": [4, 8], "XPW": [4, 7, 8], "SPLIT": [4], "WG": [64, 128]}, jit=direct.fast_3x3,
          generate=direct.unrolled, fast={"FAST": 1}, branches=("inside",)),

    # Chapter 09: a work-group's tile of dy and of the weights in local memory
    Stage("conv_dgrad", 9, "local_tile", "conv_dgrad/09_local_tile.cl",
          "a group copies its tile's dy patch (with halo) and weight slab into local memory per chunk "
          "of KC output channels; one work-item per (position, channel) sums from local memory",
          # TX = 32 or CB = 8: 512 work-items per group (the H200 search kept 16 x 4 x 4)
          defines={"TX": 16, "TY": 4, "CB": 4, "KC": 8}, tune={"KC": [4, 8]}, **TILED),
    Stage("conv_dgrad", 9, "register_block", "conv_dgrad/09_register_block.cl",
          "the same tile; each work-item sums XPW positions x CPW channels in registers from one "
          "row of dy and CPW weights read from local memory",
          defines={"TX": 32, "TY": 4, "CB": 32, "KC": 8, "XPW": 4, "CPW": 4}, tune=LOCAL_TUNE_09, **TILED),
    *with_twin(
        Stage("conv_dgrad", 9, "prefetch", "conv_dgrad/09_prefetch.cl",
              "the next chunk's global loads in flight during the arithmetic (registers), stored into "
              "the other half of a double local buffer: one barrier per chunk",
              defines=PREFETCH, tune=LOCAL_TUNE_09, **TILED),
        "prefetch_cuda", "conv_dgrad/09_prefetch.cu",
        "stage 09_prefetch in CUDA: the same tile, double buffer and one barrier per chunk"),

    # Chapter 10: bank conflicts. The slab transposed for float4 reads (its copy conflicts), then
    # two fixes: padding, XOR swizzle; then what the profiler shows next: the copy's arithmetic,
    # done once (hoisted). Each has a CUDA twin (ncu counts its bank conflicts).
    *with_twin(
        Stage("conv_dgrad", 10, "transposed", "conv_dgrad/10_transposed.cl",
              "09_prefetch with the weight slab stored [depth*tap][channel] and float4 reads of weights "
              "and dy rows; the copy's stores down a column conflict",
              defines=SLAB, tune=LOCAL_TUNE, **TILED),
        "transposed_cuda", "conv_dgrad/10_transposed.cu",
        "stage 10_transposed in CUDA: the same slab layout and accesses"),
    *with_twin(
        Stage("conv_dgrad", 10, "padded", "conv_dgrad/10_padded.cl",
              "rows of the transposed slab padded by 4 floats: the copy's stores 4-way instead of "
              "32-way, float4 reads kept",
              defines=SLAB_PADDED, tune=LOCAL_TUNE, **TILED),
        "padded_cuda", "conv_dgrad/10_padded.cu",
        "stage 10_padded in CUDA: the same slab layout and accesses"),
    *with_twin(
        Stage("conv_dgrad", 10, "swizzle", "conv_dgrad/10_swizzle.cl",
              "no padding: float4s of a row XOR-swizzled by the row, the copy storing 4 channels x 8 "
              "rows per warp; ROWCOPY=1: dy copied by whole stored rows",
              defines={**SLAB, "ROWCOPY": 0}, tune={**LOCAL_TUNE, "ROWCOPY": [0, 1]}, **TILED),
        "swizzle_cuda", "conv_dgrad/10_swizzle.cu",
        "stage 10_swizzle in CUDA: the same slab layout and accesses"),
    *with_twin(
        Stage("conv_dgrad", 10, "hoisted", "conv_dgrad/10_hoisted.cl",
              "10_padded with the copy's index arithmetic done once: per copied element an offset, a "
              "limit on k0 and a local address in registers, one add per chunk",
              defines=SLAB_PADDED, tune=LOCAL_TUNE, **TILED),
        "hoisted_cuda", "conv_dgrad/10_hoisted.cu",
        "stage 10_hoisted in CUDA: the same slab layout and accesses"),

    # Chapter 11: dx (C x N*H*W) = w (C x K*R*S) . dy-columns, every stage on the course GEMM's
    # tile loop (kernels/common/gemm_core.h, helpers/launch/gemm.py)
    Stage("conv_dgrad", 11, "igemm_analytic", "conv_dgrad/11_igemm_analytic.cl",
          "implicit GEMM: dy gathered into the GEMM's B tiles with indices computed by division; "
          "strided layers multiply the zeros of the missing taps",
          family=gemm, launch="igemm", defines=TILES, tune=GEMM_TUNE, requires=gemm.conv_tiles_requires),
    Stage("conv_dgrad", 11, "igemm_phases", "conv_dgrad/11_igemm_phases.cl",
          "implicit GEMM split into stride^2 phase sub-problems, each over only the taps that reach "
          "its input positions: no multiplied zeros (stride 1: one phase); each phase compiled with "
          "its tap counts as constants; split-K where the product has too few work-groups",
          family=gemm, launch="phases", defines=PHASES, tune=PHASES_TUNE, jit=gemm.phase_split_k,
          requires=gemm.conv_tiles_requires, fast={"PHASED": 1}),
    Stage("conv_dgrad", 11, "igemm_delta", "conv_dgrad/11_igemm_delta.cl",
          "the phase split with a precomputed offset (delta) table per phase: no division in the "
          "operand fetches",
          family=gemm, launch="delta", defines=TILES, tune=GEMM_TUNE, jit=gemm.phase_split,
          requires=gemm.conv_tiles_requires, fast={"PHASED": 1}),
    Stage("conv_dgrad", 11, "igemm_taps", "conv_dgrad/11_igemm_taps.cl",
          "igemm_phases with the reduction walked tap by tap (channels innermost): a step of TK lies "
          "in one tap, decoded once per step; an element is one multiply-add and a load. K % TK == 0, "
          "else igemm_phases",
          family=gemm, launch="phases", defines=PHASES, tune=PHASES_TUNE, jit=gemm.phase_split_k,
          requires=gemm.taps_requires, fallback="igemm_phases", fast={"PHASED": 1}),
    Stage("conv_dgrad", 11, "igemm_nhwc", "conv_dgrad/11_igemm_nhwc.cl",
          "igemm_analytic on channel-last copies: dy' to NHWC and w to (R,S,K,C), the GEMM "
          "(N*H*W) x C with k innermost (float4 loads when C % 4 == 0), dx back to NCHW",
          family=gemm, launch="nhwc", defines=TILES_WG, tune=GEMM_TUNE, jit=gemm.nhwc_vectors,
          requires=gemm.nhwc_requires, fast={"GEMM_VEC_B": 1}),
    Stage("conv_dgrad", 11, "gemm_col2im", "conv_dgrad/11_gemm_col2im.cl",
          "explicit GEMM into a column workspace (C*R*S x N*OH*OW), then col2im adds each input's "
          "taps back",
          family=gemm, launch="col2im", defines=TILES_WG, tune=GEMM_TUNE, requires=gemm.cols_requires,
          fallback="igemm_delta"),

    # Chapters 12 and 12a: Winograd after the direct ladder; other shapes run the ladder's best
    Stage("conv_dgrad", 12, "winograd", "conv_dgrad/12_winograd.cl",
          "3x3 stride 1: Winograd F(2x2,3x3) on dy with the rotated filter (conv_forward stage 05)",
          fallback="width", **WINO_F23),
    Stage("conv_dgrad", 12, "winograd4", "conv_dgrad/12_winograd4.cl",
          "3x3 stride 1, K >= 16: Winograd F(4x4,3x3) on dy with the rotated filter (conv_forward "
          "stage 06); other layers run stage 12 winograd",
          tune=WINO4_DGRAD_TUNE, fallback="winograd", **WINO_F43),

    # Chapter 13 (CUDA): chapter 11's implicit GEMM on tensor cores, positions as mma rows and
    # channels as mma columns (helpers/launch/tensor_cores.py: mma; kernels/common/tc.cuh), one step per
    # file. The 16-bit stages store dy, y, w and dx in their precision; tf32 stores float32.
    Stage("conv_dgrad", 13, "tc_tf32", "conv_dgrad/13_tc_tf32.cu",
          "chapter 11's implicit GEMM on tensor cores: mma.sync m16n8k8 on TF32 operands from padded "
          "shared rows, fp32 sums",
          family=tensor_cores, launch="mma", backend="cuda", precision="tf32", ptx=(MMA_TF32, TO_TF32)),
    Stage("conv_dgrad", 13, "tc_fp16", "conv_dgrad/13_tc_fp16.cu",
          "fp16 tensors and mma.sync m16n8k16 (twice the depth per instruction), fp32 sums",
          family=tensor_cores, launch="mma", backend="cuda", precision="fp16", jit=tensor_cores.fp16_operands, ptx=(MMA_FP16,)),
    Stage("conv_dgrad", 13, "tc_bf16", "conv_dgrad/13_tc_fp16.cu",
          "tc_fp16 on bfloat16 tensors (fp32's range, 8-bit mantissa)",
          family=tensor_cores, launch="mma", backend="cuda", precision="bf16", jit=tensor_cores.bf16_operands, ptx=(MMA_BF16,)),
    Stage("conv_dgrad", 13, "tc_fp16_ldm", "conv_dgrad/13_tc_fp16_ldm.cu",
          "fragments by ldmatrix.x4 from unpadded shared rows, XOR-swizzled: no bank conflicts",
          family=tensor_cores, launch="mma", backend="cuda", precision="fp16", jit=tensor_cores.fp16_operands,
          ptx=(MMA_FP16, LDMATRIX)),
    Stage("conv_dgrad", 13, "tc_fp16_pipe", "conv_dgrad/13_tc_fp16_pipe.cu",
          "weights by cp.async into a ring of STAGES buffers, dy prefetched in registers one chunk "
          "ahead (activation applied there): loads in flight during the mma (K*R*S % 8 == 0)",
          family=tensor_cores, launch="mma", backend="cuda", precision="fp16", defines={"STAGES": 3},
          tune={"STAGES": [2, 3, 4]}, jit=tensor_cores.fp16_operands, requires=tensor_cores.mma_pipe_requires,
          fallback="tc_fp16_ldm", ptx=(MMA_FP16, LDMATRIX, CP_ASYNC, CP_WAIT)),
    # the same product on channel-last copies of dy' and w (reduction order r, s, k): both operands
    # by cp.async, 16 bytes per copy; one file for the three precisions
    Stage("conv_dgrad", 13, "tc_fp16_nhwc", "conv_dgrad/13_tc_nhwc.cu",
          "dy' and w copied channel-last, the reduction in (r, s, k) order: both operands by cp.async, "
          "16 bytes per copy, into a ring of STAGES buffers (K % 8 == 0)",
          family=tensor_cores, launch="mma_nhwc", backend="cuda", precision="fp16", defines=NHWC_TC,
          tune=NHWC_TC_TUNE, jit=tensor_cores.nhwc_fp16, requires=tensor_cores.mma_nhwc_requires, fallback="tc_fp16_pipe",
          ptx=(MMA_FP16, LDMATRIX, CP_ASYNC, CP_WAIT)),
    Stage("conv_dgrad", 13, "tc_bf16_nhwc", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_nhwc on bfloat16 tensors (K % 8 == 0)",
          family=tensor_cores, launch="mma_nhwc", backend="cuda", precision="bf16", defines=NHWC_TC,
          tune=NHWC_TC_TUNE, jit=tensor_cores.nhwc_bf16, requires=tensor_cores.mma_nhwc_requires, fallback="tc_bf16",
          ptx=(MMA_BF16, LDMATRIX, CP_ASYNC)),
    Stage("conv_dgrad", 13, "tc_tf32_nhwc", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_nhwc with TF32 operands rounded in the copies and mma.sync m16n8k8 (K % 4 == 0)",
          family=tensor_cores, launch="mma_nhwc_tf32", backend="cuda", precision="tf32", defines=NHWC_TC,
          tune=NHWC_TC_TUNE, jit=tensor_cores.nhwc_tf32, requires=tensor_cores.mma_nhwc_tf32_requires, fallback="tc_tf32",
          ptx=(MMA_TF32, LDMATRIX, CP_ASYNC, TO_TF32, ".entry dy_to_nhwc(")),
    # the product on Hopper's warpgroup MMA (sm_90a): wgmma reads both tiles from shared memory
    Stage("conv_dgrad", 13, "tc_fp16_wgmma", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_nhwc with the product on Hopper's wgmma.mma_async (sm_90a): operands read by the "
          "tensor cores from the swizzled shared ring, no ldmatrix (K % 8 == 0)",
          family=tensor_cores, launch="mma_nhwc", backend="cuda", precision="fp16", defines=WGMMA_TC,
          tune=WGMMA_TC_TUNE, jit=tensor_cores.nhwc_fp16, requires=tensor_cores.mma_nhwc_requires, fallback="tc_fp16_pipe",
          arch="sm_90a", ptx=("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", "wgmma.commit_group.sync.aligned",
                              "fence.proxy.async.shared::cta", CP_ASYNC)),
    Stage("conv_dgrad", 13, "tc_bf16_wgmma", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_wgmma on bfloat16 tensors (K % 8 == 0)",
          family=tensor_cores, launch="mma_nhwc", backend="cuda", precision="bf16", defines=WGMMA_TC,
          tune=WGMMA_TC_TUNE, jit=tensor_cores.nhwc_bf16, requires=tensor_cores.mma_nhwc_requires, fallback="tc_bf16",
          arch="sm_90a", ptx=("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", "fence.proxy.async.shared::cta")),
    Stage("conv_dgrad", 13, "tc_tf32_wgmma", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_wgmma with TF32 operands, wgmma m64nBNk8 (K % 4 == 0)",
          family=tensor_cores, launch="mma_nhwc_tf32", backend="cuda", precision="tf32", defines=WGMMA_TC,
          tune=WGMMA_TC_TUNE, jit=tensor_cores.nhwc_tf32, requires=tensor_cores.mma_nhwc_tf32_requires, fallback="tc_tf32",
          arch="sm_90a", ptx=("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32", "wgmma.fence.sync.aligned",
                              "wgmma.wait_group.sync.aligned", "fence.proxy.async.shared::cta", CP_ASYNC, TO_TF32)),
    # step 8: both operands by the Tensor Memory Accelerator, one box per operand and chunk (4-d
    # for dy', 3-d for w), paced by mbarriers; the product's copies are no longer cp.async
    Stage("conv_dgrad", 13, "tc_fp16_tma", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_wgmma with both operands copied by the Tensor Memory Accelerator: a block's "
          "positions a patch of the image (of one phase at a stride: only the taps that reach it), a "
          "tap's A tile one box of dy', one thread issues a chunk's copies, mbarriers pace the ring "
          "(K % 8 == 0)",
          family=tensor_cores, launch="mma_nhwc", backend="cuda", precision="fp16", defines=TMA_TC,
          tune=WGMMA_TC_TUNE, jit=tensor_cores.nhwc_fp16, requires=tensor_cores.mma_nhwc_requires, fallback="tc_fp16_pipe",
          arch="sm_90a", ptx=("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", TENSOR_COPY_4D, TENSOR_COPY_3D)),
    Stage("conv_dgrad", 13, "tc_bf16_tma", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_tma on bfloat16 tensors (K % 8 == 0)",
          family=tensor_cores, launch="mma_nhwc", backend="cuda", precision="bf16", defines=TMA_TC,
          tune=WGMMA_TC_TUNE, jit=tensor_cores.nhwc_bf16, requires=tensor_cores.mma_nhwc_requires, fallback="tc_bf16",
          arch="sm_90a", ptx=("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", TENSOR_COPY_4D, TENSOR_COPY_3D)),
    Stage("conv_dgrad", 13, "tc_tf32_tma", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_tma with TF32 operands (K % 4 == 0)",
          family=tensor_cores, launch="mma_nhwc_tf32", backend="cuda", precision="tf32", defines=TMA_TC,
          tune=WGMMA_TC_TUNE, jit=tensor_cores.nhwc_tf32, requires=tensor_cores.mma_nhwc_tf32_requires, fallback="tc_tf32",
          arch="sm_90a", ptx=("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32", TENSOR_COPY_4D, TENSOR_COPY_3D,
                              "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64",
                              "mbarrier.arrive.shared::cta.b64", TO_TF32)),
    # the interleaved layout: its own copy kernel, the same product
    Stage("conv_dgrad", 13, "tc_fp16_nchw32", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_nhwc reading dy' interleaved, (N, K/32, OH, OW, 32), K padded with zeros to a "
          "multiple of 32: any K",
          family=tensor_cores, launch="mma_nhwc", backend="cuda", precision="fp16", defines=NCHW32_TC,
          tune=NHWC_TC_TUNE, jit=tensor_cores.nhwc_fp16, requires=tensor_cores.mma_nhwc_requires,
          ptx=(MMA_FP16, LDMATRIX, CP_ASYNC, ".entry dy_to_nchw32(")),
    Stage("conv_dgrad", 13, "tc_bf16_nchw32", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_nchw32 on bfloat16 tensors",
          family=tensor_cores, launch="mma_nhwc", backend="cuda", precision="bf16", defines=NCHW32_TC,
          tune=NHWC_TC_TUNE, jit=tensor_cores.nhwc_bf16, requires=tensor_cores.mma_nhwc_requires, ptx=(MMA_BF16, ".entry dy_to_nchw32(")),
    Stage("conv_dgrad", 13, "tc_tf32_nchw32", "conv_dgrad/13_tc_nhwc.cu",
          "tc_fp16_nchw32 with TF32 operands",
          family=tensor_cores, launch="mma_nhwc_tf32", backend="cuda", precision="tf32", defines=NCHW32_TC,
          tune=NHWC_TC_TUNE, jit=tensor_cores.nhwc_tf32, requires=tensor_cores.mma_nhwc_requires,
          ptx=(MMA_TF32, TO_TF32, ".entry dy_to_nchw32(")),

    # Chapter 16: every shape (groups, dilation, a stride per axis, a padding per side, 1-4 axes)
    Stage("conv_dgrad", 16, "any_shape", "conv_dgrad/16_any_shape.cl",
          "one work-item per input element of a convolution of any shape (1-4 spatial axes, groups, "
          "dilation, strides per axis, padding per side) seen as 4-D, stage 02's checks on every axis",
          family=direct_nd, launch="per_input_element", defines=WG, tune=WG_TUNE, any_shape=True),
    # the depthwise ladder's next rungs (helpers/launch/depthwise.py): 2-D, groups = C = K; other
    # shapes run any_shape
    Stage("conv_dgrad", 16, "dw_tiles", "conv_dgrad/16_dw_tiles.cl",
          "depthwise (groups = C = K, 2-D): a slice of the work-group stages its tile of dy with the "
          "halo and the channel's R x S filter in local memory, one input element per work-item; "
          "other shapes run any_shape",
          defines=DW_TILES, tune=DW_TILES_TUNE, launch="dgrad", variants=({"TX": 4, "TY": 2},), **DEPTHWISE),
    Stage("conv_dgrad", 16, "dw_regs", "conv_dgrad/16_dw_regs.cl",
          "dw_tiles with XPW elements of a row per work-item: each tap row's shared dy window and "
          "filter row read into registers once, the taps a stride skips dropped when compiled, "
          "float4 stores when W % 4 == 0",
          defines=DW_REGS, tune=DW_REGS_TUNE, fast={"VEC": 1}, launch="dgrad",
          variants=({"TX": 2, "TY": 2, "XPW": 4},), **DEPTHWISE),
    # chapter 11's implicit GEMM for every shape (helpers/launch/igemm_nd.py): groups in one launch,
    # strides by phases, ranks 1-4
    Stage("conv_dgrad", 16, "igemm_nd", "conv_dgrad/16_igemm_nd.cl",
          "implicit GEMM per group on the course GEMM's tiles (fitted to the group's channels), the "
          "groups in one launch; the input positions split into phases per axis, each a GEMM over only "
          "the taps that reach it; dilation, strides and padding per axis in the gather, ranks 1-4",
          defines=TILES, tune=GEMM_TUNE, launch="dgrad", variants=(IGEMM_ND_VARIANT,), **IGEMM_ND),

    # Chapter 11's algorithm chooser: times the other registered stages once per device and layer
    # shape within the caller's workspace budget (workspace_limit), caches the winner, runs it.
    Stage("conv_dgrad", 11, "auto", "",
          "the fastest registered stage for this device and shape within the workspace budget, timed "
          "once and cached (helpers/chooser.py)", choose=True),
]
