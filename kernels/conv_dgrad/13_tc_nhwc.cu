// Stage 13 tc_fp16_nhwc (and tc_bf16_nhwc, tc_tf32_nhwc): the implicit GEMM on channel-last
// copies, both operands copied by cp.async into a ring of STAGES shared buffers. With ILV = 32 the
// same kernel reads dy' interleaved instead (tc_fp16_nchw32, tc_bf16_nchw32, tc_tf32_nchw32).
//
// What changed since tc_fp16_pipe: the order of the reduction and the layout it reads.
//  - There, A (dy') was gathered one 2-byte value at a time: in NCHW the values a position needs
//    for the reduction index (k, r, s) lie OH*OW apart, so every value cost its own load and its
//    own index arithmetic, and the gather, not the tensor cores, set the pace.
//  - Here the reduction runs in the order (r, s, k), k fastest, over channel-last copies: dy' as
//    (N, OH, OW, K) and w as (C, KH, KW, K). For one position and one tap (r, s), a step of
//    the reduction is CH * 16 contiguous bytes (CH = 4: 32 fp16 or 16 tf32 values), CH 16-byte
//    cp.async copies, zero-filled where the tap misses dy. The index arithmetic is done once per
//    16 bytes instead of once per value, and A travels as B does: global to shared memory
//    without registers, STAGES - 1 steps ahead of the mma. What arithmetic remains stays out of
//    the loop: (r, s, k) advance by counting, and the shared addresses are fixed beforehand.
//  - The copies are two small kernels before the product (dy_to_nhwc, w_to_crsk below). The
//    first fuses the activation's derivative and the rounding to the mma's input type, so the
//    product reads operands ready to use. Their cost is part of the stage's time.
// Layout in shared memory: a row (one position of A, one channel of B) is CH 16-byte chunks (64 or
// 128 bytes), XOR-swizzled as in tc_fp16_ldm, so ldmatrix and the cp.async stores are conflict-free.
// Viewed in 16-byte chunks the fragments of m16n8k16 (fp16, bf16) and m16n8k8 (tf32) are the
// same (a k-step is two chunks in both), so one kernel serves the three precisions; TF32 picks
// the element type and the instruction.
// Tiles: a block owns 128 positions x BN channels, warps of 64 x 32 (BN = 64: 4 warps, 128: 8).
// dx is written in NCHW by store_dx (tc.cuh), as every stage of the chapter.
// The interleaved layout (ILV = 32, NCHW32 or NC/32HW32, as MegEngine's CUTLASS-based convolution
// kernels read it): dy' as (N, KR/32, OH, OW, 32), groups of 32 channels, each group an image of
// 32-channel pixels. K is padded with zeros to KR, a multiple of 32 (w too: (C, KH, KW, KR)), so
// a 16-byte copy never straddles a group and no K is refused: the zeros are multiplied instead. A
// step of the reduction still reads CH * 16 contiguous bytes per position; what changes is what
// lies next to them (the same channels of the next position, not the next channels of the same
// position) and the copy that makes the layout.
// Requirements (helpers/launch/tensor_cores.py: mma_nhwc_requires): channel-last, K a multiple of 8
// (fp16, bf16) or 4 (tf32), so that a 16-byte chunk never straddles two taps; interleaved, none.
// Both: shared memory STAGES * (128 + BN) * 16 * CH bytes within the 48 KiB a block may declare
// statically.
// The forward pass (FWD = 1: conv_forward's tc_fp16_nhwc, tc_bf16_nhwc, tc_tf32_nhwc) is the same
// product with other roles: rows are output positions, columns output channels, the reduction runs
// over (r, s, c) of the input x copied to (N, H, W, C), and w to (K, KH, KW, C). Only the gather
// changes: input row oh * STRIDE - PAD + r, no division and no test of the stride at any stride.
// Both copies are one transpose kernel (to_channel_last): w (C, K*KH*KW) is an image of C channels
// and K*KH*KW pixels. The epilogue adds the bias and applies the activation to the float32
// accumulators before the store (BIAS, ACT), so a layer's whole forward step is one product.
// In the kernel's names the forward problem is (N, C <- K, H <- OH, W <- OW, K <- C, OH <- H,
// OW <- W): the launch passes the scalars in that order (helpers/launch/tensor_cores.py: mma_fwd_steps).
// Split-K (SPLITK > 1, input gradient only): where a layer has too few blocks of positions x
// channels to fill the GPU (small batches, deep layers: res512@7 at batch 1 has 8), the reduction
// is cut into SPLITK runs of chunks, one per grid layer z; each block adds its partial sums into a
// float32 copy of dx with atomicAdd, zeroed first (splitk_zero), and splitk_store rounds it into dx.
// How many splits: helpers/launch/tensor_cores.py: nhwc_splits (the stage's SPLIT_TARGET: blocks wanted).
// WGMMA = 1 (tc_fp16_wgmma, tc_bf16_wgmma, tc_tf32_wgmma; Hopper only, built for sm_90a): the same
// copies, ring and reduction order, the product on the warpgroup MMA instead of ldmatrix and
// mma.sync. Two warpgroups per block, 64 positions each; one wgmma.mma_async per k-step of a chunk
// multiplies the warpgroup's 64 x 32-byte slice of A by all BN rows of B, both read by the tensor
// cores straight from the ring through descriptors (tc.cuh: wg_desc), whose 128-byte swizzle is SWZ
// with CH = 8. The ring lives in dynamic shared memory from a multiple of 1024 bytes; a chunk's
// wgmma group runs while the block copies a later chunk (wgmma_wait<1>, then a barrier before the
// slot of the chunk before is refilled). BN = 64, 128 or 256: the launch narrows the stage's 256
// to what C needs and to the device's fill (helpers/launch/tensor_cores.py: wgmma_fit). Input gradient only.
// TMA = 1 (tc_fp16_tma, tc_bf16_tma, tc_tf32_tma; with WGMMA): the same product, its copies
// made by Hopper's Tensor Memory Accelerator instead of cp.async. A block's 128 positions are a
// patch of the image, PN images x PH rows x PW columns (helpers/launch/tensor_cores.py: tma_patch picks it
// per layer), so the A tile of a tap is one 4-d box of dy' and the B tile one 3-d box of w; the
// host describes both tensors in tensor maps (helpers/engine/backends/cuda.py: tensor_map), the
// TMA writes each box swizzled as wgmma reads it and zeros where the box leaves the tensor (the
// padding, the image's edges, channels past K or C). One thread of a ninth warp issues the two
// copies of every chunk; mbarriers tell the two warpgroups when a slot has landed (its bytes
// counted) and the copying thread when they are done reading it. At stride S a block holds
// positions of one phase (h % S, w % S) and copies only the taps that reach it: a quarter of the
// 3 x 3 taps' work at stride 2, where the gather of WGMMA multiplies zeros for the others.
// TMA_STORE = 1 (with TMA; where the layer allows it, helpers/launch/tensor_cores.py: tma_store): the
// epilogue through the ring, now free: the block's sums laid out as its box of dx, written by one
// TMA store instead of every thread's own stores.
// JIT parameters: KH, KW, STRIDE, ACT, TF32, BF16, BN, STAGES, CH, ILV, FWD, BIAS, SPLITK, WGMMA,
// TMA, PH, PW, TMA_STORE.
// Measured (H200, ResNet-50 layers at batch 64, results/conv_dgrad_resnet50_tc_nvidia-h200.json):
// fp16 135.1 TFLOP/s geometric mean, x2.67 tc_fp16_pipe, x0.67 cuDNN fp16; tf32 81.7 TFLOP/s, x0.61
// cuDNN TF32. Interleaved (ILV = 32): the same within 3 % on every layer (NHWC / NCHW32 time
// x0.97 to x1.01). Nsight Compute (results/tc/ncu_nhwc_nvidia-h200.txt): issue slots half busy;
// the busiest pipeline the integer ALU (fp16) or the tensor operations (tf32: ncu's "Shared"
// pipeline, the one FP64 and tensor units share); 25 % theoretical occupancy.
// WGMMA = 1 (results/conv_dgrad_resnet50_wgmma_nvidia-h200.json): x1.27 (tf32) and x1.19 (fp16) over
// the mma.sync product on ResNet-50, x0.78 cuDNN in the same precision (both). Nsight Compute
// (results/tc/ncu_wgmma_nvidia-h200.txt): the tensor pipe busy 57 % of the cycles on vgg512@28,
// L2 32 % and DRAM 6 %; one block per SM, 0.42 eligible warps per scheduler.
// TMA = 1 (results/conv_dgrad_{resnet50,vgg16}_tma_nvidia-h200.json): x1.22 (tf32) and x1.20 (fp16)
// over WGMMA on ResNet-50 (x1.91 and x1.89 on the stride-2 layer), x1.25 and x1.22 on VGG-16; x0.96
// and x0.92 cuDNN on ResNet-50, x1.00 and x0.98 on VGG-16; vgg512@28 in TF32 at 64 % of the dense
// TF32 data-sheet rate. Nsight Compute (results/tc/ncu_tma_nvidia-h200.txt): the tensor pipeline
// busy 80 % (tf32) on vgg512@28. TMA_STORE = 1 (results/conv_dgrad_{resnet50,vgg16}_tma_store{0,1}_
// nvidia-h200.json): x1.10 to x1.16 on the layers where it runs (res64@56 and vgg256@56 in TF32,
// vgg64@224 in all three precisions).

#include "tc.cuh"

#ifndef TF32
#define TF32 0                // 1: float tensors, tf32 operands, m16n8k8; 0: 16-bit, m16n8k16
#endif
#ifndef BN
#define BN 64                 // channels per block: 64 (4 warps) or 128 (8 warps)
#endif
#ifndef STAGES
#define STAGES 3              // shared buffers of A and B (2 or more)
#endif
#ifndef CH
#define CH 4                  // 16-byte chunks per shared row (4 or 8): the reduction's step
#endif
#ifndef ILV
#define ILV 0                 // 0: dy' channel-last (N, OH, OW, K); 32: interleaved (N, KR/32, OH, OW, 32)
#endif
#ifndef FWD
#define FWD 0                 // 1: the forward pass, y = act(x * w + bias) (conv_forward)
#endif
#ifndef BIAS
#define BIAS 0                // forward: 1 adds bias[k] in the epilogue
#endif
static_assert(ILV == 0 || ILV == 32, "dy' is channel-last (ILV 0) or in groups of 32 channels (ILV 32)");
static_assert(!(FWD && ILV), "the forward pass reads x channel-last");
#ifndef SPLITK
#define SPLITK 1              // runs of the reduction, one per grid layer (1: the whole sum per block)
#endif
#ifndef WGMMA
#define WGMMA 0               // 1: the product on Hopper's warpgroup MMA (below; sm_90a only)
#endif
#ifndef TMA
#define TMA 0                 // 1: both operands by the Tensor Memory Accelerator (below; with WGMMA)
#endif
#ifndef PH
#define PH 8                  // TMA: a block's positions are a patch of PN images x PH rows x PW columns
#endif
#ifndef PW
#define PW 16
#endif
#ifndef TMA_STORE
#define TMA_STORE 0           // TMA: 1 writes dx through shared memory and one TMA store (the epilogue below)
#endif
#if WGMMA && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "WGMMA = 1 needs a build for sm_90a (NVRTC --gpu-architecture=sm_90a or compute_90a)"
#endif
static_assert(!WGMMA || (CH == 8 && (BN == 64 || BN == 128 || BN == 256) && !FWD),
              "wgmma reads 128-byte rows (CH = 8), 64, 128 or 256 channels per block, input gradient only");
static_assert(!TMA || (WGMMA && !ILV && 128 % (PH * PW) == 0),
              "TMA: with WGMMA, channel-last, a patch of 128 positions (PN * PH * PW = 128)");
static_assert(!TMA_STORE || (TMA && SPLITK == 1 && STRIDE == 1),
              "TMA_STORE: with TMA, the whole sum per block (SPLITK = 1), stride 1 (one box of dx per block)");
static_assert(!TMA_STORE || 128 * BN * (TF32 ? 4 : 2) <= STAGES * (128 + BN) * 16 * CH,
              "TMA_STORE: the block's box of dx (128 positions x BN channels) must fit the ring it is staged in");
static_assert(SPLITK == 1 || !FWD, "split-K serves the input gradient (its epilogue needs the whole sum)");
// the copy of dy' fuses the activation's derivative (input gradient); forward, ACT is the epilogue's
#define DERIV (ACT != ACT_NONE && !FWD)
#define BM 128                // positions per block
#if WGMMA
#define THREADS (256 + 32 * TMA)  // two warpgroups, 64 positions x BN channels each (TMA: + the copying warp)
#else
#define THREADS (2 * BN)      // warps: 2 along the positions x BN/32 along the channels
#endif
#define ROW (16 * CH)         // bytes per shared row

#if TF32
typedef float elem;
#define EPC 4                 // elements per 16-byte chunk
__device__ __forceinline__ elem operand(float v) { return __uint_as_float(tf32_bits(v)); }
__device__ __forceinline__ void mma_step(float c[4], const unsigned a[4], const unsigned b[2]) { mma_tf32(c, a, b); }
#else
typedef h16 elem;
#define EPC 8
__device__ __forceinline__ elem operand(float v) { return to_h16(v); }
__device__ __forceinline__ void mma_step(float c[4], const unsigned a[4], const unsigned b[2]) { mma_16(c, a, b); }
#endif
#define BK (CH * EPC)         // reduction indices per step of the ring: one shared row
// byte offset of chunk j of row r: the chunk index XOR-ed with the row's place in a 128-byte line
// group, so the 8 rows an ldmatrix reads (and the rows a warp's copies write) hit 8 different
// 16-byte bank groups
#if CH == 4
#define SWZ(r, j) ((r) * ROW + ((((j) ^ (((r) >> 1) & 3))) << 4))
#else
#define SWZ(r, j) ((r) * ROW + ((((j) ^ ((r) & 7))) << 4))
#endif

// the reduction's extent: K, or K padded with zeros to a whole group of 32 channels
__device__ __forceinline__ int padded_k(int K) { return ILV ? (K + ILV - 1) / ILV * ILV : K; }

// -- dy' = dy * act'(y) to channel-last (or interleaved), rounded to the mma's input type ----------
// A 64 x 64 block of (k, p), p = oh*OW + ow, through shared memory: reads along p and writes along
// k, both coalesced, values in pairs (one 4- or 8-byte access per thread: a warp moves 128 or 256
// bytes per row). An odd OH*OW has no aligned pairs along p and is read one value at a time.
// Interleaved, a row of the block is two groups' pixels (two runs of 32 values) and the channels
// from K to KR are written as zeros.
// Block (32, 8); grid (ceil(OH*OW / 64), ceil(KR / 64), N).
#if FWD
#define DY_COPY to_channel_last
#elif ILV
#define DY_COPY dy_to_nchw32
#else
#define DY_COPY dy_to_nhwc
#endif
#define TILE 64
#if TF32
#define TILE_PAD 1            // rows of 65 words
typedef float2 pair_t;
__device__ __forceinline__ pair_t pair_of(elem a, elem b) { return make_float2(a, b); }
#else
#define TILE_PAD 2            // rows of 33 words, so a pair of values is one aligned word
typedef unsigned pair_t;
__device__ __forceinline__ pair_t pair_of(elem a, elem b) { return pack2(a, b); }
#endif

// the value of dy' at o as the mma reads it
__device__ __forceinline__ elem ready(const elem* dy, const elem* y, long o) {
#if !DERIV
    return TF32 ? operand(value(dy[o])) : dy[o];    // 16-bit: the bits as they are
#else
    return operand(value(dy[o]) * act_derivative(value(y[o])));
#endif
}

extern "C" __global__ void __launch_bounds__(256)
DY_COPY(const elem* __restrict__ dy, const elem* __restrict__ y, elem* __restrict__ out, int K, int OH, int OW) {
    __shared__ __align__(16) elem tile[TILE][TILE + TILE_PAD];     // [k][p]
    const int P = OH * OW, n = blockIdx.z, tx = threadIdx.x, KR = padded_k(K);
    const int p0 = blockIdx.x * TILE, k0 = blockIdx.y * TILE;
    const long base = (long)n * K * P;
    for (int i = threadIdx.y; i < TILE; i += 8) {
        const int k = k0 + i, p = p0 + 2 * tx;
        if (k >= K) {                                   // a padding channel (interleaved only)
            tile[i][2 * tx] = tile[i][2 * tx + 1] = operand(0.f);
            continue;
        }
        const long o = base + (long)k * P + p;
        if (P % 2 == 0) {                               // the same branch for the whole grid
            if (p < P) {
#if !DERIV && !TF32
                *(unsigned*)&tile[i][2 * tx] = *(const unsigned*)&dy[o];
#elif !DERIV
                const float2 v = *(const float2*)&dy[o];
                tile[i][2 * tx] = operand(v.x);
                tile[i][2 * tx + 1] = operand(v.y);
#else
                tile[i][2 * tx] = ready(dy, y, o);
                tile[i][2 * tx + 1] = ready(dy, y, o + 1);
#endif
            }
        } else {
            if (p < P) tile[i][2 * tx] = ready(dy, y, o);
            if (p + 1 < P) tile[i][2 * tx + 1] = ready(dy, y, o + 1);
        }
    }
    __syncthreads();
    for (int i = threadIdx.y; i < TILE; i += 8) {       // KR is a multiple of 4 or 8: pairs along k
        const int p = p0 + i, k = k0 + 2 * tx;
#if ILV
        const long o = (((long)n * (KR / ILV) + k / ILV) * P + p) * ILV + k % ILV;
#else
        const long o = base + (long)p * K + k;
#endif
        if (p < P && k < KR) *(pair_t*)&out[o] = pair_of(tile[2 * tx][i], tile[2 * tx + 1][i]);
    }
}

#if !FWD
// -- w (C, K, KH, KW) to (C, KH, KW, KR), rounded to the mma's input type --------------------------
// Per channel c, the K x (KH*KW) block is transposed through shared memory, WK values of k at a
// time: read as one contiguous run, written as KH*KW runs of WK; the padding channels from K to KR
// (interleaved only) as zeros. Block 256; grid (ceil(KR/WK), C).
#define WK (KH * KW <= 25 ? 128 : 32)      // helpers/launch/tensor_cores.py: mma_nhwc_steps uses the same
extern "C" __global__ void __launch_bounds__(256)
w_to_crsk(const elem* __restrict__ w, elem* __restrict__ out, int C, int K) {
    __shared__ elem t[WK * KH * KW];
    const int c = blockIdx.y, k0 = blockIdx.x * WK, KR = padded_k(K);
    const int kn = max(0, min(WK, K - k0)), kw = min(WK, KR - k0);   // values read, written
    const elem* src = w + ((long)c * K + k0) * KH * KW;
    for (int i = threadIdx.x; i < kn * KH * KW; i += blockDim.x) t[i] = src[i];
    __syncthreads();
    for (int i = threadIdx.x; i < WK * KH * KW; i += blockDim.x) {
        const int rs = i / WK, kx = i % WK;
        if (kx < kw) out[((long)c * KH * KW + rs) * KR + k0 + kx] = kx >= kn ? operand(0.f)
                                                                   : TF32 ? operand(value(t[kx * KH * KW + rs]))
                                                                          : t[kx * KH * KW + rs];
    }
}

#endif

// -- the product: dx (N*H*W x C, stored NCHW) = A (N*H*W x KH*KW*K) . B (KH*KW*K x C) ------------
// (forward: y (N*OH*OW x K) = x' (N*OH*OW x KH*KW*C) . w' (KH*KW*C x K), in the kernel's names)
#if FWD
#define PRODUCT conv_forward
#define BIAS_ARG const elem* __restrict__ bias,
#else
#define PRODUCT conv_dgrad
#define BIAS_ARG
#endif
#if SPLITK > 1
typedef float out_t;          // the float32 copy of dx the splits add into
#else
typedef elem out_t;
#endif
#if WGMMA
// A warpgroup's product of one chunk: its 64 rows of the A slot (from as) by the BN rows of the B
// slot (from bs), CH / 2 wgmma k-steps issued and committed as one group
__device__ __forceinline__ void wgmma_chunk(float* acc, unsigned as, unsigned bs) {
    wgmma_fence();
    pin(acc, BN / 2);
#pragma unroll
    for (int h = 0; h < CH / 2; h++)      // k-steps of 32 bytes along the rows
        Wgmma<BN, TF32>::run(acc, wg_desc(as + 32 * h), wg_desc(bs + 32 * h));
    wgmma_commit();
}
#endif
#if TMA
#if TMA_STORE
#define OPERANDS const void* __restrict__ a_map, const void* __restrict__ b_map, const void* __restrict__ d_map
#else
#define OPERANDS const void* __restrict__ a_map, const void* __restrict__ b_map   // tensor maps of dy', w
#endif
#else
#define OPERANDS const elem* __restrict__ dyp, const elem* __restrict__ wp
#endif
extern "C" __global__ void __launch_bounds__(THREADS)
PRODUCT(OPERANDS, out_t* __restrict__ dx, BIAS_ARG
        int N, int C, int H, int W, int K, int OH, int OW, int PAD) {
#if WGMMA
    // the ring in dynamic shared memory (more than the 48 KiB a block may declare statically), from
    // the first multiple of 1024 bytes: every slot then starts at one, as wgmma's swizzle wants
    extern __shared__ unsigned char ring[];
    const unsigned a_base = (smem_addr(ring) + 1023) & ~1023u, b_base = a_base + STAGES * BM * ROW;
#else
    __shared__ __align__(128) unsigned char As[STAGES][BM * ROW];
    __shared__ __align__(128) unsigned char Bs[STAGES][BN * ROW];
    const unsigned a_base = smem_addr(As[0]), b_base = smem_addr(Bs[0]);
#endif
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int HW = H * W, KR = padded_k(K), KC = (KR + BK - 1) / BK;
#if TMA
    // The block's positions: at stride S, dx splits into S x S phases, the positions (h, w) with
    // h % S = ph and w % S = pw, each a grid of HQ x WQ (chapter 11's phases). Only the taps r = r0,
    // r0 + S, ... (r0 = (ph + PAD) % S) and s = s0, s0 + S, ... reach phase (ph, pw), and tap r
    // reads row i + (ph + PAD - r) / S of dy for the phase's row i = h / S: a shift, as at stride 1
    // (where there is one phase and every tap). A block holds a patch of one phase: PN images x PH
    // rows x PW columns of its grid, its row m (of A, and of the product) the phase's position
    // (n0 + m / (PH * PW), i0 + m / PW % PH, j0 + m % PW). The A tile of tap (r, s) and channels
    // k0 .. k0 + BK - 1 is then one box of dy' (N, OH, OW, K): from (n0, i0 + (ph + PAD - r) / S,
    // j0 + (pw + PAD - s) / S, k0), PN x PH x PW x BK, rows outside dy' (the padding, the image's
    // edges, channels past K) zeros. The B tile is one box of w (C, KH*KW, K): from (c0, r * KW + s,
    // k0), BN x 1 x BK. One thread copies both with two instructions; the Tensor Memory
    // Accelerator writes them swizzled as wgmma reads them.
    constexpr int PN = BM / (PH * PW);
    const int HQ = (H + STRIDE - 1) / STRIDE, WQ = (W + STRIDE - 1) / STRIDE;
    const int tiles_w = (WQ + PW - 1) / PW, tiles_h = (HQ + PH - 1) / PH;
    // the phase is the grid's fastest index: the S * S blocks of one patch run side by side, so the
    // halves of a 32-byte sector of dx that two phases write meet in the L2 cache, not in DRAM
    const int phase_hw = blockIdx.x % (STRIDE * STRIDE), tile = blockIdx.x / (STRIDE * STRIDE);
    const int j0 = tile % tiles_w * PW, i0 = tile / tiles_w % tiles_h * PH, n0 = tile / (tiles_w * tiles_h) * PN;
    const int ph = phase_hw / STRIDE, pw = phase_hw % STRIDE;
    const int r0 = (ph + PAD) % STRIDE, s0 = (pw + PAD) % STRIDE;
    const int NR = (KH - r0 + STRIDE - 1) / STRIDE, NS = (KW - s0 + STRIDE - 1) / STRIDE;   // taps per axis
    const int taps = max(0, NR) * max(0, NS);
#else
    const int taps = KH * KW;
#endif
    // this block's run of the reduction: chunks first .. first + chunks - 1 of taps * KC
#if SPLITK > 1
    const int per = (taps * KC + SPLITK - 1) / SPLITK, first = blockIdx.z * per;
    const int chunks = max(0, min(taps * KC - first, per));
#else
    const int first = 0, chunks = taps * KC;
#endif
    const int c0 = blockIdx.y * BN;
#if TMA
    // a chunk's slot is full once its copies' bytes have landed (full[slot]), and empty once the
    // 8 warps of the product are done reading it (empty[slot]); each barrier's phases alternate
    __shared__ __align__(8) unsigned long long bars[2 * STAGES];
    const unsigned full = smem_addr(bars), empty = full + 8 * STAGES;
    if (tid == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(full + 8 * s, 1);
            mbar_init(empty + 8 * s, 8);
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (warp == 8) {                      // the copying warp: its first thread
        if (lane == 0) {
            // the phase's taps counted (ir, is): tap (r0 + S * ir, s0 + S * is)
            int ir = taps ? first / KC / NS : 0, is = taps ? first / KC % NS : 0;    // (no taps: no chunks)
            int k0 = first % KC * BK, slot = 0, phase = 0;
            for (int i = 0; i < chunks; i++) {
                if (i >= STAGES) mbar_wait(empty + 8 * slot, phase ^ 1);   // chunk i - STAGES is read
                mbar_expect_bytes(full + 8 * slot, (BM + BN) * ROW);
                const int r = r0 + STRIDE * ir, s = s0 + STRIDE * is;
                tensor_copy_4d(a_base + slot * (BM * ROW), a_map, k0, j0 + (pw + PAD - s) / STRIDE,
                               i0 + (ph + PAD - r) / STRIDE, n0, full + 8 * slot);
                tensor_copy_3d(b_base + slot * (BN * ROW), b_map, k0, r * KW + s, c0, full + 8 * slot);
                if ((k0 += BK) >= KR) {
                    k0 = 0;
                    if (++is == NS) { is = 0; ++ir; }
                }
                if (++slot == STAGES) { slot = 0; phase ^= 1; }
            }
        }
        return;                           // (no barrier of the whole block follows)
    }
    // Warpgroup wg multiplies rows 64 wg .. 64 wg + 63 of the A tile by the whole B tile; its warp
    // w holds rows 16 w .. 16 w + 15 of that, all BN channels (acc[0][nt]: channels 8 nt ..).
    const int wg = warp >> 2;
    float acc[1][BN / 8][4];
    for (int nt = 0; nt < BN / 8; nt++)
        for (int e = 0; e < 4; e++) acc[0][nt][e] = 0.0f;
    for (int i = 0, slot = 0, phase = 0, last = 0; i < chunks; i++) {
        mbar_wait(full + 8 * slot, phase);    // chunk i has landed
        const unsigned as = a_base + slot * (BM * ROW) + wg * 64 * ROW, bs = b_base + slot * (BN * ROW);
        wgmma_chunk(&acc[0][0][0], as, bs);
        wgmma_wait<1>();                  // this warp's products of chunk i-1 are done ...
        pin(&acc[0][0][0], BN / 2);
        if (i > 0 && lane == 0) mbar_arrive(empty + 8 * last);    // ... its slot may be refilled
        last = slot;
        if (++slot == STAGES) { slot = 0; phase ^= 1; }
    }
    wgmma_wait<0>();
    pin(&acc[0][0][0], BN / 2);
    const int warp_m = wg * 64 + (warp & 3) * 16, warp_n = 0;
#else
    const int m0 = blockIdx.x * BM, NP = N * H * W, RSK = KH * KW * KR;
    // where pixel pix of dy' holds channel k: pix * PIX + at_k(k)
#if ILV
    const int PIX = ILV, IMG = KR / ILV * OH * OW;    // interleaved: an image is KR/32 group images
    const long GROUP = (long)OH * OW * ILV;
    auto at_k = [&](int k) { return (unsigned)k / ILV * GROUP + (unsigned)k % ILV; };
#else
    const int PIX = K, IMG = OH * OW;
    auto at_k = [&](int k) { return (long)k; };
#endif

    // this thread copies chunk j of the A and B rows arow + e * STEP. STEP is a multiple of 8, so
    // those rows share their swizzle: their shared addresses differ by e * STEP rows.
    const int j = tid % CH, arow = tid / CH;
    constexpr int STEP = THREADS / CH, AROWS = BM / STEP, BROWS = BN / STEP;
    static_assert(STEP % 8 == 0, "the copied rows of a thread must share their swizzle");
    // per A row: h + PAD, w + PAD and, at stride 1, the pixel of dy that tap (0, 0) reads (r and s
    // then move it by r * OW + s); at other strides the image's first pixel. Forward: the input
    // row and column of tap (0, 0), h * STRIDE - PAD and w * STRIDE - PAD, and its pixel (r and s
    // move it by + r * OW + s at every stride)
    int a_pix[AROWS], a_h[AROWS], a_w[AROWS];
#pragma unroll
    for (int e = 0; e < AROWS; e++) {
        const int pos = m0 + arow + e * STEP;
        const int img = pos / HW, h = pos % HW / W, x = pos % W;
#if FWD
        a_h[e] = pos < NP ? h * STRIDE - PAD : -(1 << 20);    // a position past N*H*W misses every tap
        a_w[e] = x * STRIDE - PAD;
        a_pix[e] = img * IMG + (h * STRIDE - PAD) * OW + x * STRIDE - PAD;
#else
        a_h[e] = pos < NP ? h + PAD : -(1 << 20);    // a position past N*H*W misses every tap
        a_w[e] = x + PAD;
        a_pix[e] = STRIDE == 1 ? img * IMG + (h + PAD) * OW + x + PAD : img * IMG;
#endif
    }
    int b_row[BROWS];                                 // per B row: its offset in w, -1 past C
#pragma unroll
    for (int e = 0; e < BROWS; e++) b_row[e] = c0 + arow + e * STEP < C ? (c0 + arow + e * STEP) * RSK : -1;

    // the next chunk to copy, advanced by counting (no division per chunk): tap (r, s), the
    // chunk's first channel k0, and its slot in the ring
    int cr = first / KC / KW, cs = first / KC % KW, ck0 = first % KC * BK, cslot = 0;
    const unsigned a_dst = a_base + SWZ(arow, j), b_dst = b_base + SWZ(arow, j);
    auto copy_next = [&]() {
        const int k = ck0 + j * EPC;
        const bool k_ok = k < KR;
        const long ko = at_k(k);
#pragma unroll
        for (int e = 0; e < AROWS; e++) {
#if FWD
            const int ih = a_h[e] + cr, iw = a_w[e] + cs;
            const bool ok = k_ok && (unsigned)ih < (unsigned)OH && (unsigned)iw < (unsigned)OW;
            const long o = (long)(a_pix[e] + cr * OW + cs) * PIX + ko;
#elif STRIDE == 1
            const int oh = a_h[e] - cr, ow = a_w[e] - cs;
            const bool ok = k_ok && (unsigned)oh < (unsigned)OH && (unsigned)ow < (unsigned)OW;
            const long o = (long)(a_pix[e] - cr * OW - cs) * PIX + ko;
#else
            const int oh_s = a_h[e] - cr, ow_s = a_w[e] - cs;
            const int oh = oh_s / STRIDE, ow = ow_s / STRIDE;
            const bool ok = k_ok && oh_s >= 0 && ow_s >= 0 && oh_s % STRIDE == 0 && ow_s % STRIDE == 0
                         && oh < OH && ow < OW;
            const long o = (long)(a_pix[e] + oh * OW + ow) * PIX + ko;
#endif
            cp_async16(a_dst + cslot * (BM * ROW) + e * STEP * ROW, ok ? dyp + o : dyp, ok ? 16 : 0);
        }
#pragma unroll
        for (int e = 0; e < BROWS; e++) {
            const bool ok = k_ok && b_row[e] >= 0;
            cp_async16(b_dst + cslot * (BN * ROW) + e * STEP * ROW, ok ? wp + b_row[e] + (cr * KW + cs) * KR + k : wp,
                       ok ? 16 : 0);
        }
        if ((ck0 += BK) >= KR) {
            ck0 = 0;
            if (++cs == KW) { cs = 0; ++cr; }
        }
        cslot = cslot + 1 == STAGES ? 0 : cslot + 1;
    };
    // the first STAGES - 1 chunks go out before the loop; slot: the ring's slot of chunk i
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < chunks) copy_next();
        cp_async_commit();
    }
    int slot = 0;

#if WGMMA
    // Warpgroup wg multiplies rows 64 wg .. 64 wg + 63 of the A tile by the whole B tile; its warp
    // w holds rows 16 w .. 16 w + 15 of that, all BN channels (acc[0][nt]: channels 8 nt ..).
    const int wg = warp >> 2;
    float acc[1][BN / 8][4];
    for (int nt = 0; nt < BN / 8; nt++)
        for (int e = 0; e < 4; e++) acc[0][nt][e] = 0.0f;
    for (int i = 0; i < chunks; i++) {
        cp_async_wait<STAGES - 2>();      // this thread's copies of chunk i have landed
        fence_async_shared();             // ... where wgmma can see them
        __syncthreads();                  // everyone's
        const unsigned as = a_base + slot * (BM * ROW) + wg * 64 * ROW, bs = b_base + slot * (BN * ROW);
        slot = slot + 1 == STAGES ? 0 : slot + 1;
        wgmma_chunk(&acc[0][0][0], as, bs);
        wgmma_wait<1>();                  // chunk i-1's products are done (chunk i's may run on) ...
        pin(&acc[0][0][0], BN / 2);
        __syncthreads();                  // ... in both warpgroups: its slot may be refilled
        if (i + STAGES - 1 < chunks) copy_next();
        cp_async_commit();                // (an empty group near the end keeps the count)
    }
    wgmma_wait<0>();
    pin(&acc[0][0][0], BN / 2);
    const int warp_m = wg * 64 + (warp & 3) * 16, warp_n = 0;
#else
    const int warp_m = (warp & 1) * 64, warp_n = (warp >> 1) * 32;
    // each lane's ldmatrix addresses within a slot, for every k-step of a chunk: fixed
    unsigned a_ld[CH / 2][4], b_ld[CH / 2][2];
#pragma unroll
    for (int h = 0; h < CH / 2; h++) {
#pragma unroll
        for (int mt = 0; mt < 4; mt++) a_ld[h][mt] = SWZ(warp_m + mt * 16 + (lane & 15), 2 * h + (lane >> 4));
#pragma unroll
        for (int np = 0; np < 2; np++)
            b_ld[h][np] = SWZ(warp_n + np * 16 + ((lane >> 4) << 3) + (lane & 7), 2 * h + ((lane >> 3) & 1));
    }

    float acc[4][4][4];
    zero_acc(acc);
    for (int i = 0; i < chunks; i++) {
        cp_async_wait<STAGES - 2>();      // this thread's copies of chunk i have landed
        __syncthreads();                  // everyone's; and chunk i-1's buffers are no longer read
        if (i + STAGES - 1 < chunks) copy_next();
        cp_async_commit();                // (an empty group near the end keeps the count)
        const unsigned as = a_base + slot * (BM * ROW), bs = b_base + slot * (BN * ROW);
        slot = slot + 1 == STAGES ? 0 : slot + 1;
#pragma unroll
        for (int h = 0; h < CH / 2; h++) {              // k-steps of two chunks each
            unsigned a[4][4], b[4][2];
#pragma unroll
            for (int mt = 0; mt < 4; mt++) ldmatrix_x4(a[mt], as + a_ld[h][mt]);
#pragma unroll
            for (int np = 0; np < 2; np++)
                ldmatrix_b2(b[2 * np], b[2 * np + 1], bs + b_ld[h][np]);
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++) mma_step(acc[mt][nt], a[mt], b[nt]);
        }
    }
#endif
    cp_async_wait<0>();
#endif

#if FWD
    // the epilogue, on the float32 accumulators: + bias of the column's channel, then the activation
    float bias_of[4][2];
#pragma unroll
    for (int nt = 0; nt < 4; nt++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int c = c0 + warp_n + nt * 8 + 2 * t + e;
            bias_of[nt][e] = BIAS && c < C ? value(bias[c]) : 0.f;
        }
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mt][nt][e] = act_forward(acc[mt][nt][e] + bias_of[nt][e & 1]);
#endif
#if TMA_STORE
    // The epilogue through shared memory: the ring is free once both warpgroups are done (their
    // wgmma_wait<0>; every copied chunk was waited for). Each thread puts its sums, rounded, where
    // they lie in the block's box of dx: PN images x BN channels x PH rows x PW columns, columns
    // fastest (the order of dx, NCHW); then one thread writes the whole box with one TMA store,
    // which leaves out what falls outside dx (images, rows, columns past the tensor, channels past C).
    bar_sync_first(256);                  // the two warpgroups only (the copying warp has left)
    elem* box = (elem*)(ring + (a_base - smem_addr(ring)));
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int m = warp_m + g + (e >> 1) * 8, c = nt * 8 + 2 * t + (e & 1);
            put(&box[(m / (PH * PW) * BN + c) * (PH * PW) + m % (PH * PW)], acc[0][nt][e]);
        }
    fence_async_shared();                 // the writes, visible to the TMA ...
    bar_sync_first(256);                  // ... everyone's
    if (tid == 0) {
        tensor_store_4d(d_map, a_base, j0, i0, c0, n0);
        tensor_store_wait();              // the box stays in shared memory until the TMA has read it
    }
    return;
#endif
#if TMA
    const PatchRows<PH, PW> rows{n0, i0, j0, N, H, W, C, STRIDE, ph, pw};
    const int m_block = 0;                // rows counted within the patch
#else
    const LinearRows rows{NP, HW, C};
    const int m_block = m0;
#endif
#if SPLITK > 1
    store_dx(dx, acc, rows, m_block + warp_m, c0 + warp_n, g, t, C, HW, Add());
#else
    store_dx(dx, acc, rows, m_block + warp_m, c0 + warp_n, g, t, C, HW);
#endif
}

#if SPLITK > 1
// -- split-K: the float32 dx zeroed before the product, rounded into dx after it ----------------
extern "C" __global__ void __launch_bounds__(256) splitk_zero(float* __restrict__ dx32, int n) {
    for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256) dx32[i] = 0.f;
}
extern "C" __global__ void __launch_bounds__(256) splitk_store(const float* __restrict__ dx32, elem* __restrict__ dx, int n) {
    for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256) put(&dx[i], dx32[i]);
}
#endif
