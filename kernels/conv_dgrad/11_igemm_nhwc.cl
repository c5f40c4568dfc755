// Stage 11 (implicit GEMM, NHWC): the analytic implicit GEMM on channel-last tensors.
//
// What changed since 11_igemm_analytic: the layout. dy' (with the activation's derivative folded
// in) is converted to NHWC and the weights to (R,S,K,C) by two small kernels, the product runs
// with the roles turned round,
//     dx^T[(n,h,w)][c] = sum over (r,s,k) of dy'[n][h+PAD-r][w+PAD-s][k] * w[r][s][k][c],
// where the reduction runs over (r, s, k) with k innermost: neighbouring work-items fetch
// neighbouring channels of one position, contiguous in NHWC, and neighbouring c of the weights.
// A last kernel converts dx back to NCHW. The conversions are timed with the stage; chapter 11
// times them one by one. Workspaces: dy' and dx in NHWC, the weights in (R,S,K,C).
// NDRange: the GEMM over (N*H*W) x C; conversions one work-item per element.
// JIT parameters: KH, KW, STRIDE, ACT, WG; TM, TN, TK, WM, WN, GEMM_VEC_B (gemm_core.h).

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

// dyt[n][oh][ow][k] = dy'[n][k][oh][ow]; dim 0 = (n, oh, ow), dim 1 = k
__kernel void dy_to_nhwc(__global const float* restrict dy, __global const float* restrict y,
                         __global float* restrict dyt, const int N, const int K, const int OH, const int OW) {
    const int pos = get_global_id(0), k = get_global_id(1);
    if (pos >= N * OH * OW) return;
    const int n = pos / (OH * OW), p = pos % (OH * OW);
    dyt[pos * K + k] = GRAD_IN(dy, y, (n * K + k) * OH * OW + p);
}

// wt[r][s][k][c] = w[c][k][r][s]; dim 0 = c, dim 1 = (r, s, k)
__kernel void weights_to_rskc(__global const float* restrict w, __global float* restrict wt,
                              const int C, const int K) {
    const int c = get_global_id(0), rsk = get_global_id(1);
    if (c >= C) return;
    const int rs = rsk / K, k = rsk % K;
    wt[rsk * C + c] = w[(c * K + k) * (KH * KW) + rs];
}

// dx[n][c][h][w] = dxt[n][h][w][c]; dim 0 = (n, h, w), dim 1 = c
__kernel void dx_from_nhwc(__global const float* restrict dxt, __global float* restrict dx,
                           const int N, const int C, const int H, const int W) {
    const int pos = get_global_id(0), c = get_global_id(1);
    if (pos >= N * H * W) return;
    const int n = pos / (H * W), p = pos % (H * W);
    dx[(n * C + c) * H * W + p] = dxt[pos * C + c];
}

// A[(n,h,w)][(r,s,k)]: dy' in NHWC at (oh, ow) = ((h+PAD-r)/STRIDE, (w+PAD-s)/STRIDE), or 0
inline float gather_nhwc(__global const float* restrict dyt, const int pos, const int kk,
                         const int NP, const int K, const int H, const int W,
                         const int OH, const int OW, const int PAD) {
    if (pos >= NP || kk >= KH * KW * K) return 0.0f;
    const int n = pos / (H * W), h = (pos / W) % H, x = pos % W;
    const int r = kk / (KW * K), s = (kk / K) % KW, k = kk % K;
    const int oh_s = h + PAD - r, ow_s = x + PAD - s;
    if (oh_s < 0 || ow_s < 0 || oh_s % STRIDE || ow_s % STRIDE) return 0.0f;
    const int oh = oh_s / STRIDE, ow = ow_s / STRIDE;
    if (oh >= OH || ow >= OW) return 0.0f;
    return dyt[((n * OH + oh) * OW + ow) * K + k];
}

#define GEMM_ARGS __global const float* restrict dyt, __global const float* restrict wt, \
                  const int NP, const int C, const int K, const int H, const int W, \
                  const int OH, const int OW, const int PAD
#define GEMM_A(m, kk) gather_nhwc(dyt, m, kk, NP, K, H, W, OH, OW, PAD)
#define GEMM_B(kk, c) (((kk) < KH * KW * K && (c) < C) ? wt[(kk) * C + (c)] : 0.0f)
#define GEMM_B4(kk, c) (((kk) < KH * KW * K && (c) < C) ? vload4(0, wt + (kk) * C + (c)) : (float4)(0.0f))

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void dgrad_nhwc(__global const float* restrict dyt, __global const float* restrict wt,
                __global float* restrict dxt, const int N, const int C, const int H, const int W,
                const int K, const int OH, const int OW, const int PAD) {
    GEMM_TILES(As, Bs);
    const int NP = N * H * W;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(dyt, wt, NP, C, K, H, W, OH, OW, PAD, m0, n0, KH * KW * K, As, Bs, acc);
    for (int i = 0; i < WM; i++) {
        const int pos = m0 + GEMM_ROW(i);
        for (int j = 0; j < WN; j++) {
            const int c = n0 + GEMM_COL(j);
            if (pos < NP && c < C) dxt[pos * C + c] = acc[i][j];
        }
    }
}
