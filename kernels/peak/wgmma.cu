// The rate of Hopper's warpgroup MMA with nothing to feed, then with copies beside it: step 7's
// product loop (chapter 13, kernels/conv_dgrad/13_tc_nhwc.cu with WGMMA = 1) without the gather,
// the bounds and the barriers. Two warpgroups per block each multiply a 64-row tile of A by a
// BN-row tile of B that stay in shared memory (their values are whatever the memory holds: only the
// rate is measured), four k-steps of 32 bytes per iteration, a commit, then wgmma_wait<WAITN>,
// ITERS times. With copies > 0 every thread also issues that many 16-byte cp.async per iteration
// (step 7 with 256-wide blocks: 12, 48 KB per block) from src, which stays in the L2 cache, into a
// part of shared memory the tensor cores do not read, and waits for the previous iteration's.
// One block per SM; helpers/tc_peak.py times it.
// JIT parameters: TF32 (1: tf32 operands, m64nBNk8; 0: fp16, m64nBNk16), BN (64, 128, 256),
// WAITN (0 or 1: groups left in flight at each wait). Built for sm_90a only.

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
#define SINK (48 * 1024)      // bytes of shared memory the copies write (after the two tiles)
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "the wgmma rate needs a build for sm_90a (NVRTC --gpu-architecture=sm_90a or compute_90a)"
#endif

// src: span bytes, read 4 KB per copy instruction of the block, cycling. out is written only if
// the sums hit an impossible value, so the compiler keeps the products.
extern "C" __global__ void __launch_bounds__(256)
wgmma_rate(const float* __restrict__ src, float* __restrict__ out, int iters, int copies, long span) {
    extern __shared__ unsigned char tiles[];
    const unsigned a_base = (smem_addr(tiles) + 1023) & ~1023u, b_base = a_base + 128 * 128;
    const unsigned sink = b_base + BN * 128;
    const int wg = threadIdx.x >> 7;
    float acc[BN / 2];
    for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
    const unsigned as = a_base + wg * 64 * 128;
    long off = ((long)blockIdx.x * 4096 * 16 + threadIdx.x * 16) % span;
#pragma unroll 1
    for (int it = 0; it < iters; it++) {   // one iteration per chunk, as in step 7
        for (int c = 0; c < copies; c++) {
            cp_async16(sink + (c * 256 + threadIdx.x) % (SINK / 16) * 16, (const char*)src + off, 16);
            off += 256 * 16;
            if (off >= span) off -= span;
        }
        cp_async_commit();
        wgmma_fence();
        pin(acc, BN / 2);
#pragma unroll
        for (int h = 0; h < 4; h++) Wgmma<BN, TF32>::run(acc, wg_desc(as + 32 * h), wg_desc(b_base + 32 * h));
        wgmma_commit();
        wgmma_wait<WAITN>();
        pin(acc, BN / 2);
        cp_async_wait<1>();               // the previous iteration's copies have landed
    }
    wgmma_wait<0>();
    cp_async_wait<0>();
    pin(acc, BN / 2);
    float s = 0.0f;
    for (int i = 0; i < BN / 2; i++) s += acc[i];
    if (s == 12345.0f) out[threadIdx.x] = s;
}
