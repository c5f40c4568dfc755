// Stage 11 (implicit GEMM): the forward convolution as one matrix product, no column workspace.
//
//     y[k][(n,oh,ow)] = sum over (c,r,s) of  w'[k][(c,r,s)]  *  x[n][c][oh*STRIDE - PAD + r][ow*STRIDE - PAD + s]
//        K x N*OH*OW                         K x C*R*S (A)      C*R*S x N*OH*OW (B), gathered from x
//
// What changed since 11_im2col: B is never written out. Each element is gathered from x as the
// tile is loaded (0 where the tap falls in the padding), so the C*R*S x N*OH*OW workspace and
// the kernel that filled it are gone; x is read from memory instead of a copy KH*KW times its size.
// A is the weight tensor turned to (K, C, R, S) by a small first kernel (weights_to_kcrs, timed
// with the stage): the GEMM copies A along the reduction, and in the course's (C, K, R, S) layout
// neighbouring reduction indices lie K*R*S floats apart; turned, they are neighbours, and the
// copy is float4 loads when C*R*S % 4 == 0 (GEMM_VEC_A).
// SPLITS > 1 (split-K, set by the launch where the product has fewer work-groups than the device's
// SPLIT_TARGET: a deep 1x1 layer on a small plane): grid dimension 1 holds SPLITS runs of the
// reduction, run j sums its terms into slice j of a workspace the shape of y, and split_sum adds
// the slices in order (chapter 11's phase split does the same for the input gradient).
// A 1x1 layer at stride 1 with no padding (POINTWISE = 1) is a product with nothing to gather:
// B's row c is x[n][c] as it lies, a plain matrix per image, read in float4s when H*W % 4 == 0
// (GEMM_VEC_B: 4 neighbouring columns then lie in one image, contiguous).
// A work-item fetches B in one column every step (gemm_core.h's GEMM_B_COL, or its float4 column
// with GEMM_VEC_B), so that column's image and position are decoded once, outside the loop.
// Layouts: x (N,C,H,W); w IOHW (C,K,KH,KW); w_kcrs (K,C,KH,KW) workspace; y (N,K,OH,OW).
// NDRange: weights_to_kcrs one work-item per weight; forward_igemm
// (ceil(N*OH*OW/TN) * TN/WN, SPLITS * ceil(K/TM) * TM/WM), work-group (TN/WN, TM/WM).
// JIT parameters: KH, KW, STRIDE, POINTWISE, SPLITS, WG; TM, TN, TK, WM, WN, GEMM_VEC_A, GEMM_VEC_B
// (gemm_core.h).

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif
#ifndef POINTWISE
#define POINTWISE 0
#endif
#ifndef SPLITS
#define SPLITS 1
#endif

#include "course.h"
#include "split_sum.h"

// w_kcrs[k][c][rs] = w[c][k][rs]: one work-item per weight, writes in order
__kernel void weights_to_kcrs(__global const float* restrict w, __global float* restrict w_kcrs,
                              const int C, const int K) {
    const int i = get_global_id(0), CRS = C * KH * KW;
    if (i >= K * CRS) return;
    const int k = i / CRS, c = (i % CRS) / (KH * KW), rs = i % (KH * KW);
    w_kcrs[i] = w[(c * K + k) * (KH * KW) + rs];
}

// The tile loop counts kk from 0 over this run of the reduction; its terms start at k_begin.
#if POINTWISE
// B[c][column] = x[n][c][p]: the column's image offset n*C*HW + p decoded once (base)
#define GEMM_ARGS __global const float* restrict x, __global const float* restrict wt, const int K, \
                  const int CRS, const int k_begin, const int HW, const int col_ok, const int base, \
                  const int vec_ok, const int vec_base
#define GEMM_B(kk, n) ((col_ok && (kk) + k_begin < CRS) ? x[base + ((kk) + k_begin) * HW] : 0.0f)
#define GEMM_B4(kk, n) ((vec_ok && (kk) + k_begin < CRS) ? vload4(0, x + vec_base + ((kk) + k_begin) * HW) \
                                                         : (float4)(0.0f))
#else
// B[(c,r,s)][column]: x at (oh*STRIDE - PAD + r, ow*STRIDE - PAD + s), or 0 in the padding
inline float gather_x(__global const float* restrict x, const int kk, const int CRS, const int H,
                      const int W, const int col_ok, const int base, const int h0, const int w0) {
    const int c = kk / (KH * KW), r = (kk / KW) % KH, s = kk % KW;
    const int h = h0 + r, xw = w0 + s;
    if (!col_ok || kk >= CRS || h < 0 || h >= H || xw < 0 || xw >= W) return 0.0f;
    return x[base + (c * H + h) * W + xw];
}

#define GEMM_ARGS __global const float* restrict x, __global const float* restrict wt, const int K, \
                  const int CRS, const int k_begin, const int H, const int W, const int col_ok, \
                  const int base, const int h0, const int w0
#define GEMM_B(kk, n) gather_x(x, (kk) + k_begin, CRS, H, W, col_ok, base, h0, w0)
#endif
#define GEMM_A(k, kk) (((k) < K && (kk) + k_begin < CRS) ? wt[(k) * CRS + (kk) + k_begin] : 0.0f)
#define GEMM_A4(k, kk) (((k) < K && (kk) + k_begin < CRS) ? vload4(0, wt + (k) * CRS + (kk) + k_begin) \
                                                          : (float4)(0.0f))

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void forward_igemm(__global const float* restrict x, __global const float* restrict w_kcrs,
                   __global float* restrict y, const int N, const int C, const int H, const int W,
                   const int K, const int OH, const int OW, const int PAD) {
    GEMM_TILES(As, Bs);
    const int CRS = C * KH * KW, OHW = OH * OW, NP = N * OHW;
#if SPLITS > 1
    const int mblocks = CEIL_DIV(K, TM), split = get_group_id(1) / mblocks;   // dim 1: (run, block)
    const int m0 = get_group_id(1) % mblocks * TM, n0 = get_group_id(0) * TN;
    const int run = CEIL_DIV(CEIL_DIV(CRS, TK), SPLITS) * TK;          // terms per run, whole steps
    const int k_begin = min(CRS, split * run), k_len = min(CRS - k_begin, run);
#else
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    const int k_begin = 0, k_len = CRS;
#endif
    // the column of B this work-item fetches every step: decoded once
    const int col = n0 + GEMM_B_COL;
    const int img = col / OHW, p = col % OHW;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
#if POINTWISE
    // with float4 loads, the work-item's 4 columns from n0 + 4*(tid % (TN/4)): one image (HW % 4 == 0)
    const int vcol = n0 + 4 * (GEMM_TID % (TN / 4));
    gemm_accumulate(x, w_kcrs, K, CRS, k_begin, OHW, col < NP, img * C * OHW + p, vcol < NP,
                    (vcol / OHW) * C * OHW + vcol % OHW, m0, n0, k_len, As, Bs, acc);
#else
    const int oh = p / OW, ow = p % OW;
    gemm_accumulate(x, w_kcrs, K, CRS, k_begin, H, W, col < NP, img * C * H * W, oh * STRIDE - PAD,
                    ow * STRIDE - PAD, m0, n0, k_len, As, Bs, acc);
#endif
#if SPLITS > 1
    y += get_group_id(1) / CEIL_DIV(K, TM) * N * K * OHW;      // this run's slice of the workspace
#endif
    for (int j = 0; j < WN; j++) {
        const int n = n0 + GEMM_COL(j);
        if (n >= NP) continue;
        const int out = (n / OHW) * K * OHW + n % OHW;      // y[img][0][oh][ow]
        for (int i = 0; i < WM; i++) {
            const int k = m0 + GEMM_ROW(i);
            if (k < K) y[out + k * OHW] = acc[i][j];
        }
    }
}
