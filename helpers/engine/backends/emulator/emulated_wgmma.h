// kernels/common/tc.cuh's Hopper instructions on the CPU (sm_90a builds for the emulator, cuda.h):
// wgmma.mma_async reads both operands from shared memory through their descriptors, K-major with
// the 128-byte swizzle (the one layout the kernels use; others stop the launch), and adds into the
// accumulators of the warpgroup's 128 threads, laid out as helpers/engine/fragments.py's model
// says (instructions.cpp). It is asynchronous as on the GPU: an operation reads shared memory and
// writes the accumulators only when wgmma.wait_group requires it done, so a kernel that refills a
// slot too early, or reads its sums before waiting, computes something else. Not modelled (the
// emulator refuses TMA stages): mbarriers, bulk and tensor copies, the TMA store, named barriers.
#ifndef COURSE_EMULATED_WGMMA_H
#define COURSE_EMULATED_WGMMA_H

// dynamic shared memory: a kernel's `extern __shared__ T name[];` points here (emulated.py)
__shared__ __align__(1024) unsigned char emu_dynamic_shared[227 * 1024];

__device__ __forceinline__ void wgmma_fence() {}            // register order: nothing to order here
__device__ __forceinline__ void wgmma_commit() { emu::wgmma_commit(); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { emu::wgmma_wait(N); }
__device__ __forceinline__ void fence_async_shared() {}     // cp.async copies have landed at their wait
__device__ __forceinline__ void pin(float*, int) {}

template <int BN_, bool TF32_OPS> struct Wgmma {
    static __device__ __forceinline__ void run(float* d, unsigned long long a, unsigned long long b) {
        emu::wgmma(TF32_OPS ? emu::MMA_TF32 : BF16 ? emu::MMA_BF16 : emu::MMA_F16, BN_, d, a, b);
    }
};

#endif
