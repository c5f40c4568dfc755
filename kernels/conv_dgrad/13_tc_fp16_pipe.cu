// Stage 13 tc_fp16_pipe: stage tc_fp16_ldm with the next chunk's loads in flight during the
// current chunk's mma: weights by cp.async into a ring of STAGES shared buffers, dy into
// registers one chunk ahead.
//
// What changed since tc_fp16_ldm: there, each chunk loaded, waited at a barrier, computed and
// waited again, so the tensor cores idled during every load. Here:
//  - B (the weights, contiguous in k) is copied with cp.async, 16 bytes at a time, straight
//    from global to shared memory (no registers, no wait at the instruction); copies run
//    STAGES - 1 chunks ahead, each chunk's copies one commit group, cp.async.wait_group lets
//    the copies of later chunks stay in flight. A 16-byte chunk is all inside a row of w or
//    all past it only when K*KH*KW % 8 == 0 (the requirement; other layers run tc_fp16_ldm).
//  - A (dy, gathered) cannot be copied that way: each value is a separate 2-byte gather, and
//    the activation's derivative is applied on the way. Its raw loads for chunk i+1 are issued
//    before chunk i's mma, the products and the store to the other half of a double buffer
//    after it, so the load latency hides behind the mma.
// One barrier per chunk: it orders the stores of chunk i+1 (and the copies that landed) before
// their reads, and the reads of chunk i-1 before their buffers are overwritten.
// Layout, fragments, tiles: as tc_fp16_ldm. JIT parameters: KH, KW, STRIDE, ACT, BF16, STAGES.
// Measured (H200, ResNet-50, batch 64): see chapter 13's recorded table (faster than
// tc_fp16_ldm, still well behind cuDNN fp16).

#include "tc.cuh"

#define BM 128                // positions per block
#define BN 64                 // channels per block
#define BK 32                 // reduction indices per chunk: 4 chunks of 8 values per row
#ifndef STAGES
#define STAGES 3              // shared buffers of B (2 or more)
#endif
#define SWZ(r, j) ((r) * BK + (((j) ^ (((r) >> 1) & 3)) << 3))

extern "C" __global__ void __launch_bounds__(128)
conv_dgrad(const h16* __restrict__ dy, const h16* __restrict__ y, const h16* __restrict__ w,
           h16* __restrict__ dx, int N, int C, int H, int W, int K, int OH, int OW, int PAD) {
    __shared__ __align__(128) h16 As[2][BM * BK];        // row = position, swizzled, double
    __shared__ __align__(128) h16 Bs[STAGES][BN * BK];   // row = channel, swizzled, a ring
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int NP = N * H * W, HW = H * W, KTOT = K * KH * KW;
    const int chunks = (KTOT + BK - 1) / BK;
    const int m0 = blockIdx.x * BM, c0 = blockIdx.y * BN;
    const int warp_m = (warp & 1) * 64, warp_n = (warp >> 1) * 32;

    const Position p = position_at(m0 + tid, NP, H, W, K, OH, OW, PAD);   // this thread's row of A

    // B's copies of chunk i into ring slot i % STAGES: 2 x 16 bytes per thread, zeros past C or KTOT
    auto copy_b = [&](int i) {
        const int k0 = i * BK;
        h16* slot = Bs[i % STAGES];
#pragma unroll
        for (int e = 0; e < BN * BK / 8 / 128; e++) {
            const int v = tid + e * 128, c = v >> 2, j = v & 3;
            const bool ok = c0 + c < C && k0 + 8 * j < KTOT;
            cp_async16(smem_addr(slot + SWZ(c, j)), ok ? w + (c0 + c) * KTOT + k0 + 8 * j : w, ok ? 16 : 0);
        }
    };
    // A's raw loads of chunk i (dy and y at this thread's BK taps; offset -1 where a tap misses)
    h16 raw_dy[BK];
#if ACT != ACT_NONE
    h16 raw_y[BK];
#endif
    int offs[BK];
    auto load_a = [&](int i) {
        Tap q = tap_at(i * BK);
#pragma unroll
        for (int e = 0; e < BK; e++) {
            offs[e] = tap_offset(q, p, K, OH, OW);
            raw_dy[e] = offs[e] >= 0 ? dy[offs[e]] : (h16)0;
#if ACT != ACT_NONE
            raw_y[e] = offs[e] >= 0 ? y[offs[e]] : (h16)0;
#endif
            next_tap(q);
        }
    };
    // ... then dy * act'(y), rounded to 16 bits, into this thread's row of As[b]
    auto store_a = [&](int b) {
#pragma unroll
        for (int j = 0; j < BK / 8; j++) {
            h16 v[8];
#pragma unroll
            for (int e = 0; e < 8; e++) {
#if ACT == ACT_NONE
                v[e] = raw_dy[8 * j + e];
#else
                v[e] = offs[8 * j + e] >= 0
                     ? to_h16(value(raw_dy[8 * j + e]) * act_derivative(value(raw_y[8 * j + e]))) : (h16)0;
#endif
            }
            *(uint4*)&As[b][SWZ(tid, j)] = make_uint4(pack2(v[0], v[1]), pack2(v[2], v[3]),
                                                      pack2(v[4], v[5]), pack2(v[6], v[7]));
        }
    };

    float acc[4][4][4];
    zero_acc(acc);

    // prologue: B's first STAGES - 1 chunks in flight, A's first chunk stored
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < chunks) copy_b(s);
        cp_async_commit();
    }
    load_a(0);
    store_a(0);

    for (int i = 0; i < chunks; i++) {
        cp_async_wait<STAGES - 2>();      // this thread's copies of chunk i have landed
        __syncthreads();                  // everyone's, and A's store of chunk i; chunk i-1 is read
        if (i + STAGES - 1 < chunks) copy_b(i + STAGES - 1);
        cp_async_commit();                // (an empty group near the end keeps the count)
        if (i + 1 < chunks) load_a(i + 1);
        const unsigned as = smem_addr(As[i & 1]), bs = smem_addr(Bs[i % STAGES]);
#pragma unroll
        for (int ks = 0; ks < BK; ks += 16) {
            unsigned a[4][4], b[4][2];
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
                ldmatrix_x4(a[mt], as + 2 * SWZ(warp_m + mt * 16 + (lane & 15), (ks >> 3) + (lane >> 4)));
#pragma unroll
            for (int np = 0; np < 2; np++)
                ldmatrix_b2(b[2 * np], b[2 * np + 1],
                            bs + 2 * SWZ(warp_n + np * 16 + ((lane >> 4) << 3) + (lane & 7), (ks >> 3) + ((lane >> 3) & 1)));
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++) mma_16(acc[mt][nt], a[mt], b[nt]);
        }
        if (i + 1 < chunks) store_a((i + 1) & 1);
    }
    cp_async_wait<0>();

    store_dx(dx, acc, m0 + warp_m, c0 + warp_n, g, t, NP, C, HW);
}
