// kernels/common/tc.cuh's PTX instructions on the CPU (included there instead of its inline
// assembly when the kernels are built for the emulator, cuda.h). Each follows the PTX ISA:
//   - cvt.rna.tf32.f32, cvt.rn.f16.f32, cvt.rn.bf16.f32, cvt.f32.f16: bit for bit (instructions.cpp);
//   - mma.sync and ldmatrix: warp-level, run once all 32 lanes have given their registers; which
//     element of A, B, C each lane's registers hold, and which lane gives which row address of
//     ldmatrix, are tables set from the one model of them (helpers/engine/fragments.py);
//   - cp.async: each copy lands only when cp.async.wait_group lets no fewer groups be pending, so
//     a kernel that reads a slot before waiting for it reads stale data, as on the GPU it may.
// BF16 is defined by then (tc.cuh).
#ifndef COURSE_EMULATED_PTX_H
#define COURSE_EMULATED_PTX_H

__device__ __forceinline__ unsigned tf32_bits(float x) { return emu::cvt_rna_tf32(x); }
#if BF16
__device__ __forceinline__ float to_f32(h16 v) { return __uint_as_float((unsigned)v << 16); }
__device__ __forceinline__ h16 to_h16(float x) { return emu::cvt_rn_bf16(x); }
#else
__device__ __forceinline__ float to_f32(h16 v) { return emu::f16_to_f32(v); }
__device__ __forceinline__ h16 to_h16(float x) { return emu::cvt_rn_f16(x); }
#endif

__device__ __forceinline__ void mma_tf32(float c[4], const unsigned a[4], const unsigned b[2]) {
    emu::mma(emu::MMA_TF32, c, a, b);
}
__device__ __forceinline__ void mma_16(float c[4], const unsigned a[4], const unsigned b[2]) {
    emu::mma(BF16 ? emu::MMA_BF16 : emu::MMA_F16, c, a, b);
}

__device__ __forceinline__ unsigned smem_addr(const void* p) { return emu::shared_address(p); }
__device__ __forceinline__ void ldmatrix_x4(unsigned r[4], unsigned addr) { emu::ldmatrix_x4(r, addr); }
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int bytes) { emu::cp_async16(dst, src, bytes); }
__device__ __forceinline__ void cp_async_commit() { emu::cp_async_commit(); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { emu::cp_async_wait(N); }

#endif
