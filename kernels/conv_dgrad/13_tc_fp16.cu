// Stage 13 tc_fp16 / tc_bf16: stage tc_tf32 with 16-bit inputs and outputs (BF16=0: IEEE half,
// BF16=1: bfloat16, set by the stage), fp32 accumulators.
//
// What changed since tc_tf32: dy, y, w and dx are stored in 16 bits (the host converts them once,
// on upload), so every byte moved carries twice the values, and the warp issues
// mma.sync.m16n8k16: twice the reduction depth per instruction, at twice TF32's rate on A100
// and H100. A fragment register now holds 2 values adjacent in k, so the shared rows keep k
// contiguous and one 32-bit load fetches both. The fused product dy * act'(y) is computed in
// float and rounded once to 16 bits before the mma; the sums stay fp32 until the final store.
// Shared layout: rows of 32 values padded by 8 (80 bytes = 20 words): fragment loads hit bank
// (20g + t) % 32, 32 different banks; the 16-byte stores of a row are conflict-free too (each
// quarter-warp's 8 rows start 20 words apart).
// Launch, tiles, JIT parameters: as tc_tf32 (plus BF16).
// Measured (H200, ResNet-50, batch 64): see chapter 13's recorded table. No faster than tc_tf32:
// the gather of A still sets the time.

#include "tc.cuh"

#define BM 128                // positions per block
#define BN 64                 // channels per block
#define BK 32                 // reduction indices per chunk
#define PAD_H 8               // 16-bit values of padding per shared row

extern "C" __global__ void __launch_bounds__(128)
conv_dgrad(const h16* __restrict__ dy, const h16* __restrict__ y, const h16* __restrict__ w,
           h16* __restrict__ dx, int N, int C, int H, int W, int K, int OH, int OW, int PAD) {
    __shared__ __align__(16) h16 As[BM][BK + PAD_H];     // row = position
    __shared__ __align__(16) h16 Bs[BN][BK + PAD_H];     // row = channel
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
        // A: this thread's row, BK taps in order, 8 values per 16-byte store
        Tap q = tap_at(k0);
#pragma unroll
        for (int j = 0; j < BK; j += 8) {
            h16 v[8];
#pragma unroll
            for (int e = 0; e < 8; e++) {
                v[e] = to_h16(grad_at(dy, y, tap_offset(q, p, K, OH, OW)));
                next_tap(q);
            }
            *(uint4*)&As[tid][j] = make_uint4(pack2(v[0], v[1]), pack2(v[2], v[3]),
                                              pack2(v[4], v[5]), pack2(v[6], v[7]));
        }
        // B: w[c][k0 + kk], copied as stored (no conversion)
#pragma unroll
        for (int i = 0; i < BN * BK / 128; i++) {
            const int c = tid / BK + i * (128 / BK), kk = tid % BK;
            const bool ok = c0 + c < C && k0 + kk < KTOT;
            Bs[c][kk] = ok ? w[(c0 + c) * KTOT + k0 + kk] : (h16)0;
        }
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < BK; ks += 16) {
            unsigned a[4][4], b[4][2];
#pragma unroll
            for (int mt = 0; mt < 4; mt++) {
                const int r = warp_m + mt * 16 + g;
                a[mt][0] = *(const unsigned*)&As[r][ks + 2 * t];
                a[mt][1] = *(const unsigned*)&As[r + 8][ks + 2 * t];
                a[mt][2] = *(const unsigned*)&As[r][ks + 2 * t + 8];
                a[mt][3] = *(const unsigned*)&As[r + 8][ks + 2 * t + 8];
            }
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                const int n = warp_n + nt * 8 + g;
                b[nt][0] = *(const unsigned*)&Bs[n][ks + 2 * t];
                b[nt][1] = *(const unsigned*)&Bs[n][ks + 2 * t + 8];
            }
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++) mma_16(acc[mt][nt], a[mt], b[nt]);
        }
        __syncthreads();
    }

    store_dx(dx, acc, m0 + warp_m, c0 + warp_n, g, t, NP, C, HW);
}
