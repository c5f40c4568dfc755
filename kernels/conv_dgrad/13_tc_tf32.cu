// Stage 13 tc_tf32: chapter 11's implicit GEMM on tensor cores, TF32 inputs, fp32 accumulators.
//
//     dx[(n,h,w)][c] = sum over (k,r,s) of  dy'[(n,h,w)][(k,r,s)]  *  w[c][(k,r,s)]
//        M x N = (N*H*W) x C                  A: M x K, gathered       B: K x N, w as it lies (IOHW)
//
// What changed since chapter 11: the multiply-adds. A warp issues mma.sync.m16n8k8 (kernels/
// common/tc.cuh): one instruction multiplies a 16x8 tile of A by an 8x8 tile of B into a 16x8
// tile of fp32 sums, its operands spread over the warp's 32 lanes in registers ("fragments").
// The operands are TF32: fp32 with the mantissa rounded to 10 bits (cvt.rna, once, when the
// tiles are stored to shared memory), so each product is exact in fp32 and only the inputs lose
// precision (chapter 13 measures how much).
// Everything else is chapter 11's: a block of 4 warps owns 128 positions x 64 channels; per
// chunk of BK = 32 reduction indices it gathers A (dy' at the taps, zero where a tap misses dy,
// the activation's derivative fused on the read) and copies B into shared memory; each warp then
// computes its 64 x 32 sub-tile: 4 x 4 mma tiles, 4 k-steps of 8, and writes it to dx (store_dx
// in tc.cuh, as every stage of the chapter does).
// Shared layout: rows padded by 4 words (chapter 10's padding): the fragment loads below read
// A[g][t] for g < 8, t < 4 at bank (36g + t) % 32 = 4g + t: 32 different banks, no conflict.
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W). All float32 in memory.
// Launch: grid (ceil(N*H*W/128), ceil(C/64)) of 128 threads (helpers/launch/tensor_cores.py: mma).
// JIT parameters: KH, KW, STRIDE, ACT. Strided layers multiply the zeros of the missing taps.
// Measured (H200, ResNet-50 layers at batch 64, results/conv_dgrad_resnet50_tc_nvidia-h200.json): see
// chapter 13's recorded table; bounded by the gather of A, not by the tensor cores.

#include "tc.cuh"

#define BM 128                // positions per block
#define BN 64                 // channels per block
#define BK 32                 // reduction indices per chunk
#define PAD_W 4               // words of padding per shared row

extern "C" __global__ void __launch_bounds__(128)
conv_dgrad(const float* __restrict__ dy, const float* __restrict__ y, const float* __restrict__ w,
           float* __restrict__ dx, int N, int C, int H, int W, int K, int OH, int OW, int PAD) {
    __shared__ __align__(16) unsigned As[BM][BK + PAD_W];   // tf32 bits, row = position
    __shared__ __align__(16) unsigned Bs[BN][BK + PAD_W];   // tf32 bits, row = channel
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int NP = N * H * W, HW = H * W, KTOT = K * KH * KW;
    const int m0 = blockIdx.x * BM, c0 = blockIdx.y * BN;
    const int warp_m = (warp & 1) * 64, warp_n = (warp >> 1) * 32;

    // the position whose row of A this thread gathers: decoded once
    const Position p = position_at(m0 + tid, NP, H, W, K, OH, OW, PAD);

    float acc[4][4][4];
    zero_acc(acc);

    for (int k0 = 0; k0 < KTOT; k0 += BK) {
        // A: this thread's row, BK taps in order, 16 bytes per store
        Tap q = tap_at(k0);
#pragma unroll
        for (int j = 0; j < BK; j += 4) {
            unsigned v[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                v[e] = tf32_bits(grad_at(dy, y, tap_offset(q, p, K, OH, OW)));
                next_tap(q);
            }
            *(uint4*)&As[tid][j] = make_uint4(v[0], v[1], v[2], v[3]);
        }
        // B: w[c][k0 + kk]; a warp reads one row, 32 consecutive floats
#pragma unroll
        for (int i = 0; i < BN * BK / 128; i++) {
            const int c = tid / BK + i * (128 / BK), kk = tid % BK;
            const bool ok = c0 + c < C && k0 + kk < KTOT;
            Bs[c][kk] = tf32_bits(ok ? w[(c0 + c) * KTOT + k0 + kk] : 0.0f);
        }
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < BK; ks += 8) {
            unsigned a[4][4], b[4][2];
#pragma unroll
            for (int mt = 0; mt < 4; mt++) {
                const int r = warp_m + mt * 16 + g;
                a[mt][0] = As[r][ks + t];
                a[mt][1] = As[r + 8][ks + t];
                a[mt][2] = As[r][ks + t + 4];
                a[mt][3] = As[r + 8][ks + t + 4];
            }
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                const int n = warp_n + nt * 8 + g;
                b[nt][0] = Bs[n][ks + t];
                b[nt][1] = Bs[n][ks + t + 4];
            }
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++) mma_tf32(acc[mt][nt], a[mt], b[nt]);
        }
        __syncthreads();
    }

    store_dx(dx, acc, m0 + warp_m, c0 + warp_n, g, t, NP, C, HW);
}
