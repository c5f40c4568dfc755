// kernels/common/tc.cuh's Hopper instructions on the CPU (sm_90a builds for the emulator, cuda.h):
//   - wgmma.mma_async reads both operands from shared memory through their descriptors, K-major
//     with the 128-byte swizzle (the one layout the kernels use; others stop the launch), and adds
//     into the accumulators of the warpgroup's 128 threads, laid out as helpers/engine/fragments.py's
//     model says (instructions.cpp). It is asynchronous as on the GPU: an operation reads shared
//     memory and writes the accumulators only when wgmma.wait_group requires it done, so a kernel
//     that refills a slot too early, or reads its sums before waiting, computes something else;
//   - mbarriers, the Tensor Memory Accelerator's box copies and store, bulk copies and the named
//     barrier 1 (hopper.cpp): a copy lands when a thread waits on its barrier (or when issued).
#ifndef COURSE_EMULATED_HOPPER_H
#define COURSE_EMULATED_HOPPER_H

// dynamic shared memory: a kernel's `extern __shared__ T name[];` points here (emulated.py)
__shared__ __align__(1024) unsigned char emu_dynamic_shared[227 * 1024];

__device__ __forceinline__ void wgmma_fence() {}            // register order: nothing to order here
__device__ __forceinline__ void wgmma_commit() { emu::wgmma_commit(); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { emu::wgmma_wait(N); }
__device__ __forceinline__ void fence_async_shared() {}     // copies have landed where they are waited for
__device__ __forceinline__ void pin(float*, int) {}

template <int BN_, bool TF32_OPS> struct Wgmma {
    static __device__ __forceinline__ void run(float* d, unsigned long long a, unsigned long long b) {
        emu::wgmma(TF32_OPS ? emu::MMA_TF32 : BF16 ? emu::MMA_BF16 : emu::MMA_F16, BN_, d, a, b);
    }
};

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned arrivals) { emu::mbar_init(bar, arrivals); }
__device__ __forceinline__ void mbar_expect_bytes(unsigned bar, unsigned bytes) { emu::mbar_expect_bytes(bar, bytes); }
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) { emu::mbar_wait(bar, parity); }
__device__ __forceinline__ void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    emu::bulk_copy(dst, src, bytes, bar);
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) { emu::mbar_arrive(bar); }
__device__ __forceinline__ void mbar_init_fence() {}        // the barriers are the emulator's own
__device__ __forceinline__ void tensor_copy_3d(unsigned dst, const void* map, int c0, int c1, int c2, unsigned bar) {
    const int coord[3] = {c0, c1, c2};
    emu::tensor_copy(dst, map, coord, 3, bar);
}
__device__ __forceinline__ void tensor_copy_4d(unsigned dst, const void* map, int c0, int c1, int c2, int c3,
                                               unsigned bar) {
    const int coord[4] = {c0, c1, c2, c3};
    emu::tensor_copy(dst, map, coord, 4, bar);
}
__device__ __forceinline__ void tensor_store_4d(const void* map, unsigned src, int c0, int c1, int c2, int c3) {
    const int coord[4] = {c0, c1, c2, c3};
    emu::tensor_store(map, src, coord, 4);
}
__device__ __forceinline__ void tensor_store_wait() {}      // the store read shared memory when issued
__device__ __forceinline__ void bar_sync_first(int n) { emu::named_barrier(1, n); }

#endif
