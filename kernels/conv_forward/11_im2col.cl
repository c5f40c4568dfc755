// Stage 11 (im2col + GEMM): the forward convolution as a plain GEMM over a workspace.
//
//     cols[(c,r,s)][(n,oh,ow)] = x[n][c][oh*STRIDE + r - PAD][ow*STRIDE + s - PAD]   (im2col; 0 outside)
//     y[n][k][oh][ow] = sum over (c,r,s) of  w[c][k][r][s] * cols[(c,r,s)][(n,oh,ow)]   (forward_gemm)
//
// The classic lowering: every input value is copied once per tap that reads it (KH*KW times for
// stride 1), so the workspace is C*KH*KW*N*OH*OW floats, and then the course GEMM runs on a
// plain row-major B (float4 loads when N*OH*OW % 4 == 0). chapter 11's implicit GEMM gathers the
// same columns into local memory instead and needs no workspace.
// Layouts: x (N,C,H,W); w IOHW (C,K,KH,KW); y (N,K,OH,OW); cols (C*KH*KW, N*OH*OW).
// JIT parameters: KH, KW, STRIDE, WG; TM..WN, GEMM_VEC_B (gemm_core.h).

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

// dim 0: column (n, oh, ow), padded to WG; dim 1: row (c, r, s)
__kernel void im2col(__global const float* restrict x, __global float* restrict cols,
                     const int N, const int C, const int H, const int W,
                     const int OH, const int OW, const int PAD) {
    const int col = get_global_id(0), row = get_global_id(1);
    const int NP = N * OH * OW;
    if (col >= NP) return;
    const int n = col / (OH * OW), oh = (col / OW) % OH, ow = col % OW;
    const int c = row / (KH * KW), r = (row / KW) % KH, s = row % KW;
    const int h = oh * STRIDE + r - PAD, xw = ow * STRIDE + s - PAD;
    cols[row * NP + col] = (h >= 0 && h < H && xw >= 0 && xw < W) ? x[((n * C + c) * H + h) * W + xw] : 0.0f;
}

#define GEMM_ARGS __global const float* restrict cols, __global const float* restrict w, \
                  const int K, const int ROWS, const int NP
// A[k][(c,r,s)] = w[c][k][r][s];  B = cols, a plain ROWS x NP matrix
#define GEMM_A(k, m) (((k) < K && (m) < ROWS) ? \
        w[((m) / (KH * KW) * K + (k)) * (KH * KW) + (m) % (KH * KW)] : 0.0f)
#define GEMM_B(m, n) (((m) < ROWS && (n) < NP) ? cols[(m) * NP + (n)] : 0.0f)
#define GEMM_B4(m, n) (((m) < ROWS && (n) < NP) ? vload4(0, cols + (m) * NP + (n)) : (float4)(0.0f))

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void forward_gemm(__global const float* restrict cols, __global const float* restrict w,
                  __global float* restrict y, const int N, const int C, const int K,
                  const int OH, const int OW) {
    GEMM_TILES(As, Bs);
    const int ROWS = C * KH * KW, OHW = OH * OW, NP = N * OHW;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(cols, w, K, ROWS, NP, m0, n0, ROWS, As, Bs, acc);
    for (int j = 0; j < WN; j++) {
        const int n = n0 + GEMM_COL(j);
        if (n >= NP) continue;
        const int out = (n / OHW) * K * OHW + n % OHW;
        for (int i = 0; i < WM; i++) {
            const int k = m0 + GEMM_ROW(i);
            if (k < K) y[out + k * OHW] = acc[i][j];
        }
    }
}
