// Stage 11 (explicit GEMM + col2im): the input gradient as a plain GEMM into a workspace.
//
//     cols[(c,r,s)][(n,oh,ow)] = sum over k of  w[c][k][r][s] * dy'[n][k][oh][ow]     (dgrad_cols)
//     dx[n][c][h][w] = sum over the (r, s) that reach (h, w) of cols[(c,r,s)][(n,oh,ow)]  (col2im)
//
// The GEMM is the transpose of the forward pass's im2col product: M = C*KH*KW rows, N*OH*OW
// columns, reduction over K only, so it wastes nothing on strides or borders; col2im then adds
// each input's KH*KW (fewer at borders and strides) contributions back. The price is the
// workspace cols: C*KH*KW*N*OH*OW floats, KH*KW times the size of dy's positions times C
// (helpers/launch/gemm.py: cols_scratch). Both steps read their tensors coalesced.
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W); cols (C*KH*KW, N*OH*OW).
// NDRange: dgrad_cols as the course GEMM over (C*KH*KW) x (N*OH*OW); col2im one work-item per
// dx element (H*W padded to WG, C, N). JIT parameters: KH, KW, STRIDE, ACT, WG; TM..WN (gemm_core.h).

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

#define GEMM_ARGS __global const float* restrict dy, __global const float* restrict y, \
                  __global const float* restrict w, const int ROWS, const int K, \
                  const int col_ok, const int col_base, const int OHW
// A[(c,r,s)][k] = w[c][k][r][s];  B[k][(n,oh,ow)] = dy'[n][k][oh][ow] (column decoded once)
#define GEMM_A(m, k) (((m) < ROWS && (k) < K) ? \
        w[((m) / (KH * KW) * K + (k)) * (KH * KW) + (m) % (KH * KW)] : 0.0f)
#define GEMM_B(k, n) (((k) < K && col_ok) ? GRAD_IN(dy, y, col_base + (k) * OHW) : 0.0f)

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void dgrad_cols(__global const float* restrict dy, __global const float* restrict y,
                __global const float* restrict w, __global float* restrict cols,
                const int N, const int C, const int K, const int OH, const int OW) {
    GEMM_TILES(As, Bs);
    const int ROWS = C * KH * KW, OHW = OH * OW, NP = N * OHW;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    const int col = n0 + GEMM_B_COL;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(dy, y, w, ROWS, K, col < NP, (col / OHW) * K * OHW + col % OHW, OHW,
                    m0, n0, K, As, Bs, acc);
    for (int i = 0; i < WM; i++) {
        const int m = m0 + GEMM_ROW(i);
        for (int j = 0; j < WN; j++) {
            const int n = n0 + GEMM_COL(j);
            if (m < ROWS && n < NP) cols[m * NP + n] = acc[i][j];
        }
    }
}

// One work-item per dx element adds the columns of the taps that reached it in the forward pass.
__kernel void col2im(__global const float* restrict cols, __global float* restrict dx,
                     const int N, const int C, const int H, const int W,
                     const int OH, const int OW, const int PAD) {
    const int hw = get_global_id(0), c = get_global_id(1), n = get_global_id(2);
    if (hw >= H * W) return;
    const int h = hw / W, x = hw % W, NP = N * OH * OW;
    float grad = 0.0f;
    for (int r = 0; r < KH; r++) {
        const int oh_s = h + PAD - r;
        if (oh_s < 0 || oh_s % STRIDE || oh_s / STRIDE >= OH) continue;
        for (int s = 0; s < KW; s++) {
            const int ow_s = x + PAD - s;
            if (ow_s < 0 || ow_s % STRIDE || ow_s / STRIDE >= OW) continue;
            grad += cols[((c * KH + r) * KW + s) * NP + (n * OH + oh_s / STRIDE) * OW + ow_s / STRIDE];
        }
    }
    dx[((n * C + c) * H + h) * W + x] = grad;
}
