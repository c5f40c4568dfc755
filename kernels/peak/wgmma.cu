// The rate of Hopper's warpgroup MMA with nothing to feed, then with copies beside it: step 7's
// product loop (chapter 13, kernels/conv_dgrad/13_tc_nhwc.cu with WGMMA = 1) without the gather,
// the bounds and the barriers. Two warpgroups per block each multiply a 64-row tile of A by a
// BN-row tile of B that stay in shared memory (their values are whatever the memory holds: only the
// rate is measured), four k-steps of 32 bytes per iteration, a commit, then wgmma_wait<WAITN>,
// ITERS times. With copies > 0 the block also moves copies x 4 KB per iteration (step 7 with
// 256-wide blocks: 12, 48 KB) from src, which stays in the L2 cache, into a part of shared memory
// the tensor cores do not read, and waits for the previous iteration's:
//   BULK = 0: every thread issues copies 16-byte cp.async, as step 7's threads do;
//   BULK = 1: one thread issues cp.async.bulk, the Tensor Memory Accelerator's one-dimensional
//             form, 16 KB each, completing on an mbarrier (tc.cuh: mbar_*) that counts the bytes.
// One block per SM; helpers/tc_peak.py times it.
// JIT parameters: TF32 (1: tf32 operands, m64nBNk8; 0: fp16, m64nBNk16), BN (64, 128, 256),
// WAITN (0 or 1: groups left in flight at each wait), BULK. Built for sm_90a only.

#include "tc.cuh"

#ifndef TF32
#define TF32 1
#endif
#ifndef BN
#define BN 256
#endif
#ifndef WAITN
#define WAITN 1
#endif
#ifndef BULK
#define BULK 0
#endif
#define SINK (48 * 1024)      // bytes of shared memory the copies write (after the two tiles)
#define PIECE (16 * 1024)     // bytes per bulk copy
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "the wgmma rate needs a build for sm_90a (NVRTC --gpu-architecture=sm_90a or compute_90a)"
#endif

// src: span bytes, read 4 KB per copy instruction of the block, cycling. out is written only if
// the sums hit an impossible value, so the compiler keeps the products.
extern "C" __global__ void __launch_bounds__(256)
wgmma_rate(const float* __restrict__ src, float* __restrict__ out, int iters, int copies, long span) {
    extern __shared__ unsigned char tiles[];
    const unsigned a_base = (smem_addr(tiles) + 1023) & ~1023u, b_base = a_base + 128 * 128;
    const unsigned sink = b_base + BN * 128, bars = sink + SINK;    // BULK: one mbarrier per parity of it
    const int wg = threadIdx.x >> 7;
#if BULK
    if (threadIdx.x == 0) {
        mbar_init(bars, 1);
        mbar_init(bars + 8, 1);
    }
    __syncthreads();
#endif
    float acc[BN / 2];
    for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
    const unsigned as = a_base + wg * 64 * 128;
#if BULK
    long off = (long)blockIdx.x * 4096 * 16 % span;
#else
    long off = ((long)blockIdx.x * 4096 * 16 + threadIdx.x * 16) % span;
#endif
#pragma unroll 1
    for (int it = 0; it < iters; it++) {   // one iteration per chunk, as in step 7
#if BULK
        if (copies && threadIdx.x == 0) {
            const unsigned bar = bars + 8 * (it & 1), bytes = copies * 256 * 16;
            mbar_expect_bytes(bar, bytes);
            for (unsigned b = 0; b < bytes; b += PIECE) {
                bulk_copy(sink + b % SINK, (const char*)src + off, PIECE, bar);
                off += PIECE;
                if (off + PIECE > span) off = 0;
            }
        }
#else
        for (int c = 0; c < copies; c++) {
            cp_async16(sink + (c * 256 + threadIdx.x) % (SINK / 16) * 16, (const char*)src + off, 16);
            off += 256 * 16;
            if (off >= span) off -= span;
        }
        cp_async_commit();
#endif
        wgmma_fence();
        pin(acc, BN / 2);
#pragma unroll
        for (int h = 0; h < 4; h++) Wgmma<BN, TF32>::run(acc, wg_desc(as + 32 * h), wg_desc(b_base + 32 * h));
        wgmma_commit();
        wgmma_wait<WAITN>();
        pin(acc, BN / 2);
#if BULK                                  // the previous iteration's copies have landed
        if (copies && it > 0) mbar_wait(bars + 8 * ((it - 1) & 1), ((it - 1) >> 1) & 1);
#else
        cp_async_wait<1>();
#endif
    }
    wgmma_wait<0>();
#if BULK
    if (copies) mbar_wait(bars + 8 * ((iters - 1) & 1), ((iters - 1) >> 1) & 1);
#else
    cp_async_wait<0>();
#endif
    pin(acc, BN / 2);
    float s = 0.0f;
    for (int i = 0; i < BN / 2; i++) s += acc[i];
    if (s == 12345.0f) out[threadIdx.x] = s;
}
