// conv_wgrad stage 06: stage 03's implicit GEMM, dw^T (K x C*R*S) = dy'^T . cols^T, with both
// operands copied along the reduction, the way they lie in memory.
//
// In the weight gradient both operands are contiguous along the reduction q = (n, oh, ow): a row
// of A is dy'[n][k][.][.], and a column of B (one tap (c, r, s)) walks x along ow, STRIDE floats
// apart. Stage 03 copies B along the taps (GEMM_B_COL): a warp's 32 loads hit 32 taps of one
// position, up to a dozen channel planes apart, and every element decodes its position q into
// (n, oh, ow) with three divisions. Here gemm_core.h's GEMM_B_KMAJOR copies B as it copies A,
// neighbouring work-items along q:
//   - a warp's loads of one column are consecutive positions, consecutive floats of x (STRIDE
//     apart across a row of the output);
//   - with WG % TK == 0 all of a work-item's B elements of a step lie in one row of the tile,
//     position q = q0 + k0 + tid % TK: decoded once per step (GEMM_STEP), its x offset and its
//     input row and column kept in three registers;
//   - its columns (taps) are the same every step: decoded once, before the loop, into an offset
//     into x and the tap's row and column shifts, per slot p (GEMM_STEP_STATE), so an element of
//     B costs two bounds tests, an add and a load.
// Registers hold WM x WN results (8 x 8 by default on a tuned GPU, float4 reads of the tiles with
// GEMM_LDS4, the next step fetched during this one's arithmetic with GEMM_PREFETCH).
//
// The reduction is split as in stage 03: dim 2 of the NDRange is the slice of SLICE positions.
// Each work-group stores its tile's sums into the workspace in the GEMM's own order,
// partials[slice][k][tap] (neighbouring work-items: neighbouring taps, whole sectors), and the
// second kernel wgrad_sum_taps adds each weight's slices in slice order (deterministic) and
// writes it once, in IOHW.
// Layouts: x (N,C,H,W); dy, y (N,K,OH,OW); dw IOHW (C,K,KH,KW); partials (SPLITS, K, C*KH*KW).
// NDRange: wgrad_igemm_blocked (ceil(C*KH*KW/TN) * TN/WN, ceil(K/TM) * TM/WM, SPLITS), work-group
//          (TN/WN, TM/WM, 1); wgrad_sum_taps (K*C*KH*KW padded to 64). SPLITS = ceil(N*OH*OW / SLICE).
// JIT parameters: KH, KW, STRIDE, ACT; TM, TN, TK, WM, WN, GEMM_VEC_A, GEMM_LDS4, GEMM_PREFETCH
// (gemm_core.h); SLICE (positions per slice, a multiple of TK).
// helpers/launch/wgrad.py checks TK divides the work-group and SLICE.

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif
#ifndef SLICE
#define SLICE 4096
#endif

#define GEMM_B_KMAJOR 1
#include "course.h"

#include "wgrad_igemm.h"   // grad_in4: four consecutive values of dy' (when OH*OW % 4 == 0)

#define NO_TAP (-(1 << 30))  // a slot past the last tap: its row shift fails every bounds test

// A work-item's B slots: slot p holds column n0 + (tid + p*WG)/TK of every step (gemm_core.h).
#define B_SLOTS CEIL_DIV(TK * TN, GEMM_WG)

// Each slot's tap (c, r, s), decoded once: where it lies in x from the position's own offset
// (x_off), and its row and column shifts r - PAD, s - PAD for the bounds tests.
#define GEMM_STEP_STATE                                                                         \
    int x_off[B_SLOTS], tap_r[B_SLOTS], tap_s[B_SLOTS];                                         \
    _Pragma("unroll") for (int p = 0; p < B_SLOTS; p++) {                                       \
        const int i = tid + p * GEMM_WG, col = n0 + i / TK;                                     \
        const int c = col / (KH * KW), r = (col / KW) % KH, s = col % KW;                       \
        const bool in = i < TK * TN && col < TAPS;                                              \
        x_off[p] = in ? c * H * W + (r - PAD) * W + (s - PAD) : 0;                              \
        tap_r[p] = in ? r - PAD : NO_TAP;                                                       \
        tap_s[p] = s - PAD;                                                                     \
    }                                                                                           \
    int x_q = 0, h_q = 0, w_q = 0, dy_q = 0;                                                    \
    bool q_in = false, a_in = false;

// A's elements of a work-item lie in one position of the step too: q0 + k0 + tid % TK (the same
// as B's), or with float4 loads the 4 from q0 + k0 + 4*(tid % (TK/4)).
#if GEMM_VEC_A
#define A_POS (4 * (tid % (TK / 4)))
#else
#define A_POS (tid % TK)
#endif

// This work-item's positions of step k0, decoded once: B's q0 + k0 + tid % TK into (n, oh, ow),
// kept as the input row and column of tap (PAD, PAD) and its offset in x; A's as its offset in dy.
#define GEMM_STEP(k0) do {                                                                      \
        const int q_ = q0 + (k0) + tid % TK, n_ = q_ / OHW, p_ = q_ - n_ * OHW, oh_ = p_ / OW;  \
        q_in = q_ < q1;                                                                         \
        h_q = oh_ * STRIDE;                                                                     \
        w_q = (p_ - oh_ * OW) * STRIDE;                                                         \
        x_q = n_ * CHW + h_q * W + w_q;                                                         \
        const int qa_ = q0 + (k0) + A_POS, na_ = qa_ / OHW;                                     \
        a_in = qa_ < q1;                                                                        \
        dy_q = na_ * K * OHW + qa_ - na_ * OHW;       /* dy'[n][0][oh][ow] */                   \
    } while (0)

// A[k][q] = dy'[n][k][oh][ow] at this work-item's position of the step (wgrad_igemm.h's fetches,
// with the position decoded once per step instead of once per element).
#undef GEMM_A
#undef GEMM_A4
#define GEMM_A(k, q) (((k) < K && a_in) ? GRAD_IN(dy, y, dy_q + (k) * OHW) : 0.0f)
#define GEMM_A4(k, q) (((k) < K && a_in) ? grad_in4(dy, y, dy_q + (k) * OHW) : (float4)(0.0f))

// B[q][tap] of slot p: x at the input position the tap reads, 0 in the padding or past the ends.
#define GEMM_BK(p, q, col) ((q_in && (uint)(h_q + tap_r[p]) < (uint)H && (uint)(w_q + tap_s[p]) < (uint)W) \
                            ? x[x_q + x_off[p]] : 0.0f)

#define GEMM_ARGS __global const float* restrict x, __global const float* restrict dy, \
                  __global const float* restrict y, const int K, const int q0, const int q1, const int OHW, \
                  const int OW, const int H, const int W, const int CHW, const int TAPS, const int PAD

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void wgrad_igemm_blocked(__global const float* restrict x, __global const float* restrict dy,
                         __global const float* restrict y, __global float* restrict partials,
                         const int N, const int C, const int H, const int W,
                         const int K, const int OH, const int OW, const int PAD) {
    WGRAD_GROUP();     // tiles, block (m0, n0), slice [q0, q1)
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(x, dy, y, K, q0, q1, OHW, OW, H, W, C * H * W, TAPS, PAD, m0, n0, q1 - q0, As, Bs, acc);
    // this slice's sums in the GEMM's order: row k, neighbouring taps side by side
    __global float* out = partials + get_group_id(2) * (K * TAPS);
    for (int i = 0; i < WM; i++) {
        const int k = m0 + GEMM_ROW(i);
        if (k >= K) continue;
        for (int j = 0; j < WN; j++) {
            const int tap = n0 + GEMM_COL(j);
            if (tap < TAPS) out[k * TAPS + tap] = acc[i][j];
        }
    }
}

// Each weight's SPLITS slice sums, added in slice order (the same result on every run), read in
// the workspace's order (neighbouring work-items: neighbouring words) and written once in IOHW.
__kernel void wgrad_sum_taps(__global const float* restrict partials, __global float* restrict dw,
                    const int C, const int K, const int SPLITS) {
    const int i = get_global_id(0), TAPS = C * KH * KW, weights = K * TAPS;
    if (i >= weights) return;
    float grad = 0.0f;
    for (int j = 0; j < SPLITS; j++) grad += partials[j * weights + i];
    const int k = i / TAPS, tap = i % TAPS;       // tap = (c, r, s)
    dw[(tap / (KH * KW) * K + k) * (KH * KW) + tap % (KH * KW)] = grad;
}
