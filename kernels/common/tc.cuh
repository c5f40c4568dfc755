// Device code of the tensor-core stages (kernels/conv_dgrad/13_*.cu, chapter 13): 16-bit storage
// types and conversions, the warp-level matrix instructions as PTX, and the gather of dy' (dy
// times the activation's derivative) into the implicit GEMM's A operand.
//
// The GEMM: dx[(n,h,w)][c] = sum over (k,r,s) of dy'[(n,h,w)][(k,r,s)] * w[c][(k,r,s)]
//           M = N*H*W positions, N = C channels, K = K*KH*KW reduction (chapter 11's product,
//           transposed so that positions are mma rows and channels are mma columns).
// PTX is written inline (asm) so no CUDA header is needed: NVRTC compiles these files as they are.
#ifndef TC_CUH
#define TC_CUH

#include "course.cuh"

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif
#ifndef BF16
#define BF16 0            // 16-bit stages: 0 = fp16 (IEEE half), 1 = bfloat16
#endif

typedef unsigned short h16;   // the bits of one fp16 or bf16 value, as the host stores them

// -- conversions --------------------------------------------------------------------------
// float -> tf32 (10-bit mantissa in a 32-bit word), rounding to nearest, ties away from zero;
// the host's reference rounds the same way (helpers/engine/tensor.py: to_tf32).
__device__ __forceinline__ unsigned tf32_bits(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

#if BF16
#define MMA_16 "bf16"
__device__ __forceinline__ float to_f32(h16 v) { return __uint_as_float((unsigned)v << 16); }
__device__ __forceinline__ h16 to_h16(float x) {
    h16 r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}
#else
#define MMA_16 "f16"
__device__ __forceinline__ float to_f32(h16 v) {
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(v));
    return r;
}
__device__ __forceinline__ h16 to_h16(float x) {
    h16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}
#endif

__device__ __forceinline__ float value(float v) { return v; }
__device__ __forceinline__ float value(h16 v) { return to_f32(v); }
__device__ __forceinline__ unsigned pack2(h16 lo, h16 hi) { return (unsigned)lo | ((unsigned)hi << 16); }

// -- warp-level matrix multiply-accumulate: d = a.b + d, fp32 accumulators ------------------
// m16n8k8 TF32. Lane l holds (g = l/4, t = l%4):  a0 A[g][t]  a1 A[g+8][t]  a2 A[g][t+4]
// a3 A[g+8][t+4];  b0 B[t][g]  b1 B[t+4][g];  c0,c1 C[g][2t, 2t+1]  c2,c3 C[g+8][2t, 2t+1].
__device__ __forceinline__ void mma_tf32(float c[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// m16n8k16 fp16 or bf16. Each register holds 2 values adjacent in k:  a0 A[g][2t..2t+1]
// a1 A[g+8][2t..]  a2 A[g][2t+8..]  a3 A[g+8][2t+8..];  b0 B[2t..2t+1][g]  b1 B[2t+8..][g];
// c as for TF32.
__device__ __forceinline__ void mma_16(float c[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_16 "." MMA_16 ".f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// -- the accumulators: a warp's 64 positions x 32 channels as 4 x 4 mma tiles of 16 x 8 -------
__device__ __forceinline__ void zero_acc(float acc[4][4][4]) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
}

__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ void put(h16* p, float v) { *p = to_h16(v); }   // rounded once, at the end
// how store_dx writes a value: stored (rounded to T), or added into a float32 dx by one split of
// the reduction among several (13_tc_nhwc.cu: SPLITK)
struct Store { template <typename T> __device__ __forceinline__ void operator()(T* p, float v) const { put(p, v); } };
struct Add { __device__ __forceinline__ void operator()(float* p, float v) const { atomicAdd(p, v); } };

// The warp's sums into dx (NCHW; m = (n, h, w)), from position m_warp and channel c_warp on:
// c0, c1 hold position g, channels 2t, 2t+1; c2, c3 position g + 8 (the fragment layout above).
// Positions past NP and channels past C are not written.
template <typename T, typename Op = Store>
__device__ __forceinline__ void store_dx(T* dx, const float acc[4][4][4], int m_warp, int c_warp, int g, int t,
                                         int NP, int C, int HW, Op write = Op()) {
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int m = m_warp + mt * 16 + g + (e >> 1) * 8;
                const int c = c_warp + nt * 8 + 2 * t + (e & 1);
                if (m < NP && c < C) write(&dx[m / HW * C * HW + c * HW + m % HW], acc[mt][nt][e]);
            }
}

// -- shared-memory addresses, ldmatrix, cp.async -------------------------------------------
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// Four 8x8 matrices of 16-bit values; lane l gives the address of row l%8 of matrix l/8 (16
// bytes) and receives, of each matrix, row l/4 columns 2(l%4), 2(l%4)+1: an mma fragment.
__device__ __forceinline__ void ldmatrix_x4(unsigned r[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// Two B fragments from one ldmatrix.x4: channels 0-7 (``lo``) and 8-15 (``hi``) of a group of 16,
// each over two 16-byte chunks of k; lane l gives the address of channel (l / 16) * 8 + l % 8,
// chunk (l / 8) % 2.
__device__ __forceinline__ void ldmatrix_b2(unsigned lo[2], unsigned hi[2], unsigned addr) {
    unsigned r[4];
    ldmatrix_x4(r, addr);
    lo[0] = r[0];
    lo[1] = r[1];
    hi[0] = r[2];
    hi[1] = r[3];
}

// 16 bytes global -> shared without passing through registers; bytes = 0 writes zeros.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N)); }

// -- the A operand: dy' gathered for one position -------------------------------------------
// A thread walks the reduction index kk = (k*KH + r)*KW + s of its position in order, so
// (k, r, s) advance by counting instead of dividing.
struct Tap {
    int k, r, s;
};

__device__ __forceinline__ Tap tap_at(int kk) {
    Tap q;
    q.k = kk / (KH * KW);
    q.r = kk / KW % KH;
    q.s = kk % KW;
    return q;
}

__device__ __forceinline__ void next_tap(Tap& q) {
    if (++q.s == KW) {
        q.s = 0;
        if (++q.r == KH) { q.r = 0; ++q.k; }
    }
}

// Offset of dy[n][k][oh][ow] for the position (hp, wp) = (h + PAD, w + PAD) and tap q, or -1
// where the tap misses dy (outside it, between the strides, past K, or a position past N*H*W).
__device__ __forceinline__ int tap_offset(const Tap& q, bool pos_ok, int dy_base, int hp, int wp,
                                          int K, int OH, int OW) {
    const int oh_s = hp - q.r, ow_s = wp - q.s;
    if (!pos_ok || q.k >= K || oh_s < 0 || ow_s < 0 || oh_s % STRIDE || ow_s % STRIDE) return -1;
    const int oh = oh_s / STRIDE, ow = ow_s / STRIDE;
    if (oh >= OH || ow >= OW) return -1;
    return dy_base + (q.k * OH + oh) * OW + ow;
}

// dy' at offset o (0 where o < 0): the activation's derivative fused into the read of dy.
template <typename T>
__device__ __forceinline__ float grad_at(const T* dy, const T* y, int o) {
    if (o < 0) return 0.0f;
#if ACT == ACT_NONE
    return value(dy[o]);
#else
    return value(dy[o]) * act_derivative(value(y[o]));
#endif
}

#endif
