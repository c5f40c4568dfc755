// Stage 11 (implicit GEMM, delta tables): the phase split with its index math precomputed.
//
// What changed since 11_igemm_phases: every operand fetch there decodes its reduction index kk
// into (k, j, l) with a division and two remainders by run-time values (the phase's tap count
// and width), then multiplies them back into offsets. Here a first kernel writes, per phase and
// kk, one int4 (dy offset relative to the column, j, l, weight offset relative to row c), the
// "delta table" (CUTLASS's precomputed iterator offsets); the GEMM's fetches read it and add:
// no division left in the loop. The table is a workspace of STRIDE^2 * K * MAX_TAPS int4.
// Layouts, NDRange and JIT parameters: as 11_igemm_phases (the table kernel: (K * MAX_TAPS, s^2)).

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif

#include "dgrad_phases.h"

// Per phase p and reduction index kk < K * taps(p): (dy offset, j, l, weight offset) of
// (k, r, s) = (kk / taps, ph + STRIDE*j, pw + STRIDE*l), where t = kk % taps = j * sp + l.
__kernel void igemm_deltas(__global int4* restrict table, const int K, const int OH, const int OW,
                           const int H, const int W, const int PAD) {
    const int kk = get_global_id(0), phase = get_global_id(1);
    const phase_t q = make_phase(phase, H, W, PAD);
    if (kk >= K * q.taps) return;
    const int k = kk / q.taps, t = kk % q.taps, j = t / q.sp, l = t % q.sp;
    table[phase * K * MAX_TAPS + kk] =
        (int4)(k * OH * OW - j * OW - l, j, l, (k * KH + q.ph + STRIDE * j) * KW + q.pw + STRIDE * l);
}

// A[c][kk] and B[kk][column]: one table read, additions and the bounds checks.
#define GEMM_ARGS __global const float* restrict dy, __global const float* restrict y, \
                  __global const float* restrict w, __global const int4* restrict tab, \
                  const int C, const int KTOT, const int KRS, const int OH, const int OW, \
                  const int col_ok, const int col_ptr, const int hq, const int wq
#define GEMM_A(m, kk) (((m) < C && (kk) < KTOT) ? w[(m) * KRS + tab[kk].w] : 0.0f)
#define GEMM_B(kk, n) (((kk) < KTOT && col_ok) ? table_dy(dy, y, tab[kk], OH, OW, col_ptr, hq, wq) : 0.0f)

inline float table_dy(__global const float* restrict dy, __global const float* restrict y, const int4 t,
                      const int OH, const int OW, const int col_ptr, const int hq, const int wq) {
    const int oh = hq - t.y, ow = wq - t.z;
    if (oh < 0 || ow < 0 || oh >= OH || ow >= OW) return 0.0f;
    return GRAD_IN(dy, y, col_ptr + t.x);
}
#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void conv_dgrad(__global const float* restrict dy, __global const float* restrict y,
                __global const float* restrict w, __global float* restrict dx,
                const int N, const int C, const int H, const int W,
                const int K, const int OH, const int OW, const int PAD,
                __global const int4* restrict table) {
    GEMM_TILES(As, Bs);
    const phase_t q = make_phase(get_group_id(2), H, W, PAD);
    const int PHW = q.hp * q.wp, NP = N * PHW, KTOT = K * q.taps;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    if (n0 >= NP) return;                // the whole work-group: past this phase's positions
    // the column of B this work-item fetches: decoded once
    const int col = n0 + GEMM_B_COL;
    const int img = col / max(PHW, 1), i = (col % max(PHW, 1)) / q.wp, j = col % q.wp;
    float acc[WM][WN];
    for (int a = 0; a < WM; a++)
        for (int b = 0; b < WN; b++) acc[a][b] = 0.0f;
    const int hq = q.bh + i, wq = q.bw + j;
    gemm_accumulate(dy, y, w, table + get_group_id(2) * K * MAX_TAPS, C, KTOT, K * KH * KW, OH, OW,
                    col < NP, img * K * OH * OW + hq * OW + wq, hq, wq, m0, n0, KTOT, As, Bs, acc);
    PHASE_STORE(dx, acc, q, m0, n0, NP, PHW, C, H * W, W);
}
