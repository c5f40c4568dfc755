// The blocked GEMM core: C[m0 .. m0+TM) x [n0 .. n0+TN) += A . B over a reduction of k_total,
// written once and included by the course GEMM (kernels/gemm/03_register_blocked.cl) and the
// GEMM-based convolution stages of chapter 11, which differ only in how an operand element is
// fetched: a plain matrix, or a gather from a tensor (implicit GEMM).
//
// A work-group of (TN/WN) x (TM/WM) work-items stages a TM x TK tile of A and a TK x TN tile of B
// in local memory per step; each work-item keeps a WM x WN block of C in registers (its rows
// tm + i*(TM/WM), columns tn + j*(TN/WN): neighbouring work-items read neighbouring local words
// and write neighbouring columns of C).
//
// Before including, define how operands are fetched (0 outside the matrices):
//     GEMM_ARGS       the parameter list gemm_accumulate takes (tensors, sizes)
//     GEMM_A(m, k)    element (m, k) of A; GEMM_B(k, n) element (k, n) of B
//     GEMM_VEC_A = 1  and GEMM_A4(m, k): A[m][k .. k+3] as a float4 (the 4 all in or all out)
//     GEMM_VEC_B = 1  and GEMM_B4(k, n): B[k][n .. n+3] as a float4 (the 4 all in or all out)
// Each work-item fetches B in the same column every step (GEMM_B_COL, when WG % TN == 0): an
// implicit GEMM decodes that column once, outside the reduction loop.
#ifndef GEMM_CORE_H
#define GEMM_CORE_H

#include "course.h"

// JIT parameters; constraints (checked in helpers/ops/gemm.py: tile_requires before building):
// TM % WM == 0, TN % WN == 0; TK % 4 == 0 and TN % 4 == 0 with vector loads; for GEMM_B_COL to
// hold, the work-group WG = (TM/WM)*(TN/WN) a multiple of TN.
#ifndef TM
#define TM 64
#endif
#ifndef TN
#define TN 64
#endif
#ifndef TK
#define TK 16
#endif
#ifndef WM
#define WM 4
#endif
#ifndef WN
#define WN 4
#endif
#ifndef GEMM_VEC_A
#define GEMM_VEC_A 0
#endif
#ifndef GEMM_VEC_B
#define GEMM_VEC_B 0
#endif

#define GEMM_RM (TM / WM)             // work-items along m
#define GEMM_RN (TN / WN)             // work-items along n
#define GEMM_WG (GEMM_RM * GEMM_RN)
#define GEMM_LDA (TM + 1)             // A tile stored k-major, one word of padding per row:
                                      // work-items storing along k hit different banks
#define GEMM_TID ((int)(get_local_id(1) * GEMM_RN + get_local_id(0)))
#define GEMM_B_COL (GEMM_TID % TN)    // the column of B this work-item fetches, every step

inline void gemm_accumulate(GEMM_ARGS, const int m0, const int n0, const int k_total,
                            __local float* As, __local float* Bs, float acc[WM][WN]) {
    const int tn = get_local_id(0), tm = get_local_id(1), tid = GEMM_TID;
    for (int k0 = 0; k0 < k_total; k0 += TK) {
#if GEMM_VEC_A
        for (int i = tid; i < TM * TK / 4; i += GEMM_WG) {     // 4 consecutive k of one row
            const int mm = i / (TK / 4), kk = 4 * (i % (TK / 4));
            const float4 v = GEMM_A4(m0 + mm, k0 + kk);
            As[kk * GEMM_LDA + mm] = v.x;
            As[(kk + 1) * GEMM_LDA + mm] = v.y;
            As[(kk + 2) * GEMM_LDA + mm] = v.z;
            As[(kk + 3) * GEMM_LDA + mm] = v.w;
        }
#else
        for (int i = tid; i < TM * TK; i += GEMM_WG) {         // neighbours along k: coalesced
            const int mm = i / TK, kk = i % TK;
            As[kk * GEMM_LDA + mm] = GEMM_A(m0 + mm, k0 + kk);
        }
#endif
#if GEMM_VEC_B
        for (int i = tid; i < TK * TN / 4; i += GEMM_WG) {
            const int kk = i / (TN / 4), nn = 4 * (i % (TN / 4));
            vstore4(GEMM_B4(k0 + kk, n0 + nn), 0, Bs + kk * TN + nn);
        }
#else
        for (int i = tid; i < TK * TN; i += GEMM_WG) {         // neighbours along n: coalesced
            const int kk = i / TN, nn = i % TN;
            Bs[kk * TN + nn] = GEMM_B(k0 + kk, n0 + nn);
        }
#endif
        barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll 4
        for (int kk = 0; kk < TK; kk++) {
            float a[WM], b[WN];
#pragma unroll
            for (int i = 0; i < WM; i++) a[i] = As[kk * GEMM_LDA + tm + i * GEMM_RM];
#pragma unroll
            for (int j = 0; j < WN; j++) b[j] = Bs[kk * TN + tn + j * GEMM_RN];
#pragma unroll
            for (int i = 0; i < WM; i++)
#pragma unroll
                for (int j = 0; j < WN; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

#endif
