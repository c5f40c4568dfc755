// conv_wgrad stage 05: stage 03's implicit GEMM for strided layers, x split into its phases first.
//
// What changed since 03_igemm: with STRIDE s, tap (r, s') of output position (oh, ow) reads x at
// row oh*s + r - PAD and column ow*s + s' - PAD, so a column of operand B (one tap, q = (n, oh, ow)
// running) walks x s floats apart: a step's TK positions of one row span s*TK floats of x, of which
// the tap uses every s-th, and every element needs four bounds tests for the padding.
// Rows h with the same h mod s form a phase: h = i*s + a. Tap r reads phase a = (r - PAD) mod s at
// row i = oh + floor((r - PAD) / s): a stride-1 window of the phase, shifted by the tap. So:
//
//   wgrad_phase_split   writes xp, x cut into its phases, each (N, C, HP, WP) with the windows'
//                       halo stored as zeros (the padding): one pass over x, writes coalesced
//   wgrad_igemm_phases  stage 03's GEMM with B gathered from xp: tap (r, s') reads plane
//                       (r mod s, s' mod s) at (oh + RO(r), ow + RO(s')), consecutive positions at
//                       consecutive addresses, no bounds tests (the halo holds the padding's zeros)
//   wgrad_sum           the slices' sums added in order, as in stages 02-03
//
// Only the phases some tap reads are stored: r mod s for r < KH, min(KH, s) row phases (a 1x1
// stride-2 layer stores one plane, a quarter of x). Plane u = r mod s holds x rows
// (i + RO0 - PAD) * s + (u + (s-1)*PAD) mod s for its rows i < HP, where PHASE_OFF(r) =
// floor((r - PAD) / s) + PAD, written (r + (s-1)*PAD) / s so that it divides non-negative numbers,
// RO0 = PHASE_OFF(0) and tap r's window starts at row RO(r) = PHASE_OFF(r) - RO0; HP = OH +
// RO(KH-1), WP = OW + RO(KW-1) (helpers/launch/wgrad.py: phase_planes computes the same).
// The cost is the workspace, about x's size at stride 2 (and a pass over x, read once, written
// once); the GEMM's reads of x become stride 1 along the reduction and lose their bounds tests.
// Stride 1 has one phase: 03_igemm runs it (the registry's fallback).
// Layouts: x (N,C,H,W); xp (PR*PC, N, C, HP, WP); dy, y (N,K,OH,OW); dw IOHW (C,K,KH,KW);
//          partials (SPLITS, C*K*KH*KW).
// NDRange: wgrad_phase_split (|xp| padded to WG); wgrad_igemm_phases as stage 03's wgrad_igemm;
//          wgrad_sum as in stage 02.
// JIT parameters: KH, KW, STRIDE, ACT; TM, TN, TK, WM, WN, GEMM_VEC_A (gemm_core.h); SLICE
// (positions per slice, a multiple of TK); WG (the split's work-group).

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 2
#endif

#ifndef SLICE
#define SLICE 4096
#endif

#include "course.h"

#define PHASE_OFF(r) (((r) + (STRIDE - 1) * PAD) / STRIDE)   // floor((r - PAD) / STRIDE) + PAD
#define RO(r) (PHASE_OFF(r) - PHASE_OFF(0))                  // tap r's first row in its plane
#define PR (KH < STRIDE ? KH : STRIDE)                       // row phases read by some tap
#define PC (KW < STRIDE ? KW : STRIDE)

// One work-item per element of xp: x at that phase row and column, or 0 in the padding.
__kernel void wgrad_phase_split(__global const float* restrict x, __global float* restrict xp,
                                const int N, const int C, const int H, const int W,
                                const int HP, const int WP, const int PAD) {
    const int e = get_global_id(0), plane = HP * WP, planes = N * C * plane;
    if (e >= PR * PC * planes) return;
    const int uv = e / planes, nc = (e % planes) / plane, i = (e % plane) / WP, j = e % WP;
    const int u = uv / PC, v = uv % PC;
    const int h = (i + PHASE_OFF(0) - PAD) * STRIDE + (u + (STRIDE - 1) * PAD) % STRIDE;
    const int w = (j + PHASE_OFF(0) - PAD) * STRIDE + (v + (STRIDE - 1) * PAD) % STRIDE;
    xp[e] = (h >= 0 && h < H && w >= 0 && w < W) ? x[(nc * H + h) * W + w] : 0.0f;
}

#include "wgrad_igemm.h"   // operand A (dy', float4 loads when OH*OW % 4 == 0) and the tile store

// B[q][(c,r,s)]: the tap's plane at its window's (oh, ow). The column's part is decoded once per
// work-item: x_col = the plane of phase (r mod STRIDE, s mod STRIDE), channel c, shifted by the
// tap's window (RO(r), RO(s)); an element adds the image n and the position (oh, ow).
inline float gather_phase(__global const float* restrict xp, const int q, const int col_ok,
                          const int x_col, const int CPL, const int WP,
                          const int OHW, const int OW, const int q1) {
    if (!col_ok || q >= q1) return 0.0f;
    const int n = q / OHW, oh = (q % OHW) / OW, ow = q % OW;
    return xp[n * CPL + x_col + oh * WP + ow];
}

#define GEMM_ARGS __global const float* restrict xp, __global const float* restrict dy, \
                  __global const float* restrict y, const int K, const int q0, const int q1, const int OHW, \
                  const int OW, const int CPL, const int WP, const int col_ok, const int x_col
#define GEMM_B(q, col) gather_phase(xp, q0 + (q), col_ok, x_col, CPL, WP, OHW, OW, q1)

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void wgrad_igemm_phases(__global const float* restrict xp, __global const float* restrict dy,
                        __global const float* restrict y, __global float* restrict partials,
                        const int N, const int C, const int K, const int OH, const int OW,
                        const int HP, const int WP, const int PAD) {
    GEMM_TILES(As, Bs);
    const int OHW = OH * OW, NP = N * OHW, TAPS = C * KH * KW, CPL = C * HP * WP;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    const int q0 = get_group_id(2) * SLICE, q1 = min(q0 + SLICE, NP);     // this group's slice
    // the column of B this work-item fetches, every step: tap (c, r, s), decoded once
    const int col = n0 + GEMM_B_COL;
    const int c = col / (KH * KW), r = (col / KW) % KH, s = col % KW;
    const int x_col = ((r % STRIDE) * PC + s % STRIDE) * N * CPL + c * HP * WP + RO(r) * WP + RO(s);
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(xp, dy, y, K, q0, q1, OHW, OW, CPL, WP, col < TAPS, x_col, m0, n0, q1 - q0, As, Bs, acc);
    WGRAD_STORE_TILE(partials, acc, m0, n0, K, TAPS);     // this slice's sums, IOHW
}

#include "wgrad_sum.h"      // wgrad_sum: each weight's SPLITS slice sums, in slice order
