// Stage 11 (implicit GEMM, analytic): the input gradient as one matrix product, no workspace.
//
//     dx[c][(n,h,w)] = sum over (k,r,s) of  w[c][(k,r,s)]  *  dy'[n][k][(h+PAD-r)/STRIDE][(w+PAD-s)/STRIDE]
//          C x NHW                           C x KRS (A)        KRS x NHW (B), gathered from dy
//
// A is the weight tensor as it lies (IOHW: row c, column (k, r, s)). B is never built: each
// element is gathered from dy when the tile is loaded, with its indices computed from (k, r, s)
// and (n, h, w) by division ("analytic"); zero where the tap misses dy or, with a stride, where
// (h+PAD-r) is not a multiple of STRIDE: those zeros are multiplied like any other element.
// The tile loop is the course GEMM's (kernels/common/gemm_core.h); a work-item fetches B in one
// column every step, so (n, h, w) is decoded once, outside the loop.
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W).
// NDRange: (ceil(N*H*W/TN) * TN/WN, ceil(C/TM) * TM/WM), work-group (TN/WN, TM/WM).
// JIT parameters: KH, KW, STRIDE, ACT; TM, TN, TK, WM, WN (gemm_core.h).

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif

#include "course.h"

// B[(k,r,s)][column]: dy' at (oh, ow) = ((hp - r) / STRIDE, (wp - s) / STRIDE), or 0.
inline float gather_dy(__global const float* restrict dy, __global const float* restrict y,
                       const int kk, const int KTOT, const int K, const int OH, const int OW,
                       const int col_ok, const int col_base, const int hp, const int wp) {
    const int k = kk / (KH * KW), r = (kk / KW) % KH, s = kk % KW;
    const int oh_s = hp - r, ow_s = wp - s;
    if (!col_ok || kk >= KTOT || oh_s < 0 || ow_s < 0 || oh_s % STRIDE || ow_s % STRIDE) return 0.0f;
    const int oh = oh_s / STRIDE, ow = ow_s / STRIDE;
    if (oh >= OH || ow >= OW) return 0.0f;
    const int o = col_base + (k * OH + oh) * OW + ow;
    return GRAD_IN(dy, y, o);
}

#define GEMM_ARGS __global const float* restrict dy, __global const float* restrict y, \
                  __global const float* restrict w, const int C, const int KTOT, \
                  const int K, const int OH, const int OW, \
                  const int col_ok, const int col_base, const int hp, const int wp
#define GEMM_A(m, kk) (((m) < C && (kk) < KTOT) ? w[(m) * KTOT + (kk)] : 0.0f)
#define GEMM_B(kk, n) gather_dy(dy, y, kk, KTOT, K, OH, OW, col_ok, col_base, hp, wp)

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void conv_dgrad(__global const float* restrict dy, __global const float* restrict y,
                __global const float* restrict w, __global float* restrict dx,
                const int N, const int C, const int H, const int W,
                const int K, const int OH, const int OW, const int PAD) {
    GEMM_TILES(As, Bs);
    const int NP = N * H * W, KTOT = K * KH * KW, HW = H * W;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    // the column of B this work-item fetches: decoded once
    const int col = n0 + GEMM_B_COL;
    const int img = col / HW, h = (col % HW) / W, x = col % W;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(dy, y, w, C, KTOT, K, OH, OW, col < NP, img * K * OH * OW, h + PAD, x + PAD,
                    m0, n0, KTOT, As, Bs, acc);
    for (int j = 0; j < WN; j++) {
        const int n = n0 + GEMM_COL(j);
        if (n >= NP) continue;
        const int out = (n / HW) * C * HW + n % HW;      // dx[img][0][h][x]
        for (int i = 0; i < WM; i++) {
            const int c = m0 + GEMM_ROW(i);
            if (c < C) dx[out + c * HW] = acc[i][j];
        }
    }
}
