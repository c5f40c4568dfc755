// conv_wgrad stage 03: the weight gradient as an implicit GEMM (chapter 11's tile loop), its
// deep reduction split across work-groups (stage 02's idea).
//
// Written as a matrix product, the weight gradient is
//
//     dw[(c,r,s)][k] = sum over q = (n,oh,ow) of  cols[(c,r,s)][q]  *  dy'[q][k]
//        C*R*S x K                                 C*R*S x N*OH*OW     N*OH*OW x K
//
// where cols is the im2col matrix of the forward pass (kernels/conv_forward/11_im2col.cl):
// cols[(c,r,s)][(n,oh,ow)] = x[n][c][oh*STRIDE + r - PAD][ow*STRIDE + s - PAD], 0 in the padding.
// The reduction runs over every output position of the batch, so the product is short and wide
// in its outputs (C*R*S x K, 576 x 64 for a 64-channel 3x3 layer) and very deep (N*OH*OW,
// 200,704 at batch 64 on 56x56): the opposite of the input gradient's shape.
//
// This kernel computes the transpose, dw^T = dy'^T . cols^T, on the course GEMM's tiles
// (kernels/common/gemm_core.h), so that each operand lands where it is cheapest:
//     GEMM M = K          rows: output channels; A[k][q] = dy'[n][k][oh][ow], the activation's
//                         derivative fused into the read. Consecutive q are consecutive in dy:
//                         float4 loads when OH*OW % 4 == 0 (GEMM_VEC_A, the fast path).
//     GEMM N = C*R*S      columns: the taps (c, r, s). B[q][(c,r,s)] = cols, never built: each
//                         element is gathered from x as the tile is loaded (implicit GEMM). A
//                         work-item fetches B in one column every step (GEMM_B_COL), so (c, r, s)
//                         is decoded once, outside the reduction loop; q is decoded per element.
//     reduction N*OH*OW   the positions, TK at a time through local memory.
// Each TM x TN block of dw^T is one work-group's; every x and dy' value staged in local memory
// is used TN resp. TM times, where stages 01-02 read one x and one dy value per multiply-add.
//
// The product is small and very deep: for that layer M x N is 64 x 576, nine 64 x 64 tiles,
// nine work-groups for a GPU that runs over a thousand at once, each walking 200,704 positions.
// So the reduction is split as in stage 02: dim 2 of the NDRange is the slice of SLICE
// positions, each work-group runs the tile loop over its slice only (the operand fetches add the
// slice's start q0 and stop at its end), writes its tile's sums into the workspace
// partials[slice][weight], and wgrad_sum (kernels/common/wgrad_sum.h) adds the slices in order.
// Layouts: x (N,C,H,W); dy, y (N,K,OH,OW); dw IOHW (C,K,KH,KW); partials (SPLITS, C*K*KH*KW).
// NDRange: wgrad_igemm (ceil(C*KH*KW/TN) * TN/WN, ceil(K/TM) * TM/WM, SPLITS), work-group
//          (TN/WN, TM/WM, 1); wgrad_sum as in stage 02. SPLITS = ceil(N*OH*OW / SLICE).
// JIT parameters: KH, KW, STRIDE, ACT; TM, TN, TK, WM, WN, GEMM_VEC_A (gemm_core.h); SLICE
// (positions per slice, a multiple of TK: helpers/launch/wgrad.py checks it).

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

#include "course.h"

#include "wgrad_igemm.h"   // operand A (dy', float4 loads when OH*OW % 4 == 0) and the tile store

// B[q][(c,r,s)]: x at the input position tap (r, s) of output position q reads, or 0. The
// column's part is decoded once per work-item: x_col = the start of channel c's plane shifted
// by the tap, (hr, ws) = the tap's offsets r - PAD and s - PAD.
inline float gather_x(__global const float* restrict x, const int q, const int col_ok,
                      const int x_col, const int hr, const int ws, const int CHW,
                      const int H, const int W, const int OHW, const int OW, const int q1) {
    if (!col_ok || q >= q1) return 0.0f;
    const int n = q / OHW, oh = (q % OHW) / OW, ow = q % OW;
    const int h = oh * STRIDE + hr, xw = ow * STRIDE + ws;
    if (h < 0 || h >= H || xw < 0 || xw >= W) return 0.0f;
    return x[n * CHW + x_col + h * W + xw];
}

#define GEMM_ARGS __global const float* restrict x, __global const float* restrict dy, \
                  __global const float* restrict y, const int K, const int q0, const int q1, const int OHW, \
                  const int OW, const int H, const int W, const int CHW, \
                  const int col_ok, const int x_col, const int hr, const int ws
#define GEMM_B(q, col) gather_x(x, q0 + (q), col_ok, x_col, hr, ws, CHW, H, W, OHW, OW, q1)

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void wgrad_igemm(__global const float* restrict x, __global const float* restrict dy,
                 __global const float* restrict y, __global float* restrict partials,
                 const int N, const int C, const int H, const int W,
                 const int K, const int OH, const int OW, const int PAD) {
    WGRAD_GROUP();     // tiles, block (m0, n0), slice [q0, q1)
    // the column of B this work-item fetches, every step: tap (c, r, s), decoded once
    const int col = n0 + GEMM_B_COL;
    const int c = col / (KH * KW), r = (col / KW) % KH, s = col % KW;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(x, dy, y, K, q0, q1, OHW, OW, H, W, C * H * W, col < TAPS, c * H * W, r - PAD, s - PAD,
                    m0, n0, q1 - q0, As, Bs, acc);
    WGRAD_STORE_TILE(partials, acc, m0, n0, K, TAPS);     // this slice's sums, IOHW
}

#include "wgrad_sum.h"      // wgrad_sum: each weight's SPLITS slice sums, in slice order
