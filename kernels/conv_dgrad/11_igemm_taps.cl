// Stage 11 (implicit GEMM, tap-major reduction): the phase split with its gathers decoded once
// per step instead of once per element.
//
// What changed since 11_igemm_phases: the order of the reduction. There, index kk of a phase's
// reduction is (output channel k, tap t) with the tap innermost, so every element a work-item
// fetches has its own tap: per element a division by the tap count, the tap's dy row and column,
// four bounds tests and the address. Here kk = t * K + k, the channel innermost. A step of TK
// consecutive indices (K % TK == 0, which the host requires) then lies inside one tap t: the tap,
// its dy row and column for this work-item's column of B, whether they lie inside dy and the
// step's first offsets are decoded once per step (GEMM_STEP, gemm_core.h), and an element of the
// step is its channel's offset from those: one multiply-add and a load. The sum is the same, in
// another order (the tests' tolerance covers the rounding).
// The weights are read in the same order: consecutive elements of A's copy are consecutive
// channels k, KH*KW floats apart in w (IOHW); w is small and read from the caches.
// PHASE_CONSTANT, SPLITS and STORE_LOCAL: as 11_igemm_phases.
// Layouts, NDRange and JIT parameters: as 11_igemm_phases; K % TK == 0.

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif
#ifndef PHASE_CONSTANT
#define PHASE_CONSTANT 1
#endif
#ifndef STORE_LOCAL
#define STORE_LOCAL 1
#endif
#ifndef SPLITS
#define SPLITS 1
#endif

#include "dgrad_phases.h"
#include "split_sum.h"

// The tile loop counts kk from 0 over this run; the run's terms start at k_begin. Step k0 holds
// indices k0 + k_begin + (0 .. TK-1) = tap t, channels kc .. kc+TK-1.
#define GEMM_ARGS __global const float* restrict dy, __global const float* restrict y, \
                  __global const float* restrict w, const phase_t q, const int C, const int KTOT, \
                  const int K, const int OH, const int OW, \
                  const int col_ok, const int col_base, const int hq, const int wq, const int k_begin
#define GEMM_STEP_STATE int k0_ = 0, dyo_ = 0, wo_ = 0; bool in_ = false;
#define GEMM_STEP(k0) do {                                                                   \
        const int kk_ = (k0) + k_begin, t_ = kk_ / K, kc_ = kk_ - t_ * K;                      \
        const int j_ = t_ / q.sp, l_ = t_ % q.sp, oh_ = hq - j_, ow_ = wq - l_;                \
        k0_ = (k0);                                                                           \
        in_ = col_ok && oh_ >= 0 && ow_ >= 0 && oh_ < OH && ow_ < OW;                          \
        dyo_ = col_base + (kc_ * OH + oh_) * OW + ow_;       /* dy' of channel kc_ */          \
        wo_ = kc_ * KH * KW + (q.ph + STRIDE * j_) * KW + q.pw + STRIDE * l_;  /* w[0][kc_][r][s] */ \
    } while (0)
// A[c][kk] = w[c][kc + (kk - k0)][r][s]; B[kk][column] = dy'[kc + (kk - k0)] at the step's (oh, ow).
#define GEMM_A(m, kk) ((m) < C ? w[(m) * K * KH * KW + wo_ + ((kk) - k0_) * KH * KW] : 0.0f)
#define GEMM_B(kk, n) (in_ ? GRAD_IN(dy, y, dyo_ + ((kk) - k0_) * OH * OW) : 0.0f)

#include "gemm_core.h"

// The GEMM of one phase (PHASE_CONSTANT: the kernel calls it with ``phase`` a constant). Whether
// the compiler really makes one copy per phase is its choice: NVIDIA's kept a single copy, the
// phase a run-time value again, when the call had one more argument (the run of a split). So the
// run comes from grid dimension 1 here, and tests/test_conv_gemm.py counts the copies in the PTX.
inline void phase_gemm(const int phase, __global const float* restrict dy, __global const float* restrict y,
                       __global const float* restrict w, __global float* restrict dx,
                       const int N, const int C, const int H, const int W,
                       const int K, const int OH, const int OW, const int PAD,
                       __local float* As, __local float* Bs, __local float* Cs) {
    const phase_t q = make_phase(phase, H, W, PAD);
    const int PHW = q.hp * q.wp, NP = N * PHW, KTOT = K * q.taps;
#if SPLITS > 1
    const int mblocks = CEIL_DIV(C, TM), split = get_group_id(1) / mblocks;   // dim 1: (run, block)
    const int m0 = get_group_id(1) % mblocks * TM, n0 = get_group_id(0) * TN;
#else
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
#endif
    if (n0 >= NP) return;                // the whole work-group: past this phase's positions
    // the column of B this work-item fetches: decoded once
    const int col = n0 + GEMM_B_COL;
    const int img = col / max(PHW, 1), i = (col % max(PHW, 1)) / q.wp, j = col % q.wp;
    float acc[WM][WN];
    for (int a = 0; a < WM; a++)
        for (int b = 0; b < WN; b++) acc[a][b] = 0.0f;
#if SPLITS > 1
    const int run = CEIL_DIV(CEIL_DIV(KTOT, TK), SPLITS) * TK;        // terms per run, whole steps
    const int k_begin = min(KTOT, split * run), k_len = min(KTOT - k_begin, run);
    dx += split * N * C * H * W;                                      // this run's slice
#else
    const int k_begin = 0, k_len = KTOT;
#endif
    gemm_accumulate(dy, y, w, q, C, KTOT, K, OH, OW, col < NP, img * K * OH * OW, q.bh + i, q.bw + j,
                    k_begin, m0, n0, k_len, As, Bs, acc);
#if STORE_LOCAL
    // dx[img][c][h0 + STRIDE*i][w0 + STRIDE*j] for this work-item's column, c = m0 + row
    const int out = img * C * H * W + (q.h0 + STRIDE * i) * W + q.w0 + STRIDE * j;
#define DX_ROW(row, v) if (col < NP && m0 + (row) < C) dx[out + (m0 + (row)) * H * W] = (v)
    GEMM_STORE_COLUMN(Cs, acc, DX_ROW);
#else
    for (int b = 0; b < WN; b++) {
        const int n = n0 + GEMM_COL(b);
        if (n >= NP) continue;
        const int pos = n % PHW;
        const int out = (n / PHW) * C * H * W + (q.h0 + STRIDE * (pos / q.wp)) * W + q.w0 + STRIDE * (pos % q.wp);
        for (int a = 0; a < WM; a++) {
            const int c = m0 + GEMM_ROW(a);
            if (c < C) dx[out + c * H * W] = acc[a][b];
        }
    }
#endif
}

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void conv_dgrad(__global const float* restrict dy, __global const float* restrict y,
                __global const float* restrict w, __global float* restrict dx,
                const int N, const int C, const int H, const int W,
                const int K, const int OH, const int OW, const int PAD) {
    GEMM_TILES(As, Bs);
#if STORE_LOCAL
    GEMM_C_TILE(Cs);
#else
    __local float* Cs = 0;          // no staging tile: the stores go straight from the registers
#endif
#if PHASE_CONSTANT
    // One copy of phase_gemm per phase, each with its phase a constant once the loop is unrolled.
    // The branch is the same for the whole work-group, so the barriers inside it are legal.
#pragma unroll
    for (int phase = 0; phase < STRIDE * STRIDE; phase++)
        if (get_group_id(2) == phase)
            phase_gemm(phase, dy, y, w, dx, N, C, H, W, K, OH, OW, PAD, As, Bs, Cs);
#else
    // One copy: every fetch divides by a tap count known only at run time.
    phase_gemm(get_group_id(2), dy, y, w, dx, N, C, H, W, K, OH, OW, PAD, As, Bs, Cs);
#endif
}
