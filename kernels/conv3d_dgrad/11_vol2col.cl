// conv3d_dgrad stage 11 (explicit GEMM + col2vol): conv_dgrad's gemm_col2im in three dimensions.
//
//     cols[(c,t,r,s)][(n,od,oh,ow)] = sum over k of  w[c][k][t][r][s] * dy[n][k][od][oh][ow]
//     dx[n][c][z][y][x] = sum over the (t, r, s) that reach (z, y, x) of cols[(c,t,r,s)][(n,od,oh,ow)]
//
// Only the index arithmetic grows: a row of cols is a 3-D tap, a column a 3-D output position,
// and col2vol checks one more axis. The workspace is C*T*R*S*N*OD*OH*OW floats (27x |dy| for a
// 3x3x3 filter with C = K).
// Layouts: dy (N,K,OD,OH,OW); w (C,K,T,R,S); dx (N,C,D,H,W). JIT parameters: KT, KH, KW, STRIDE,
// WG; TM..WN (gemm_core.h).

#ifndef KT
#define KT 3
#endif
#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif
#define TAPS (KT * KH * KW)

#include "course.h"

#define GEMM_ARGS __global const float* restrict dy, __global const float* restrict w, \
                  const int ROWS, const int K, const int col_ok, const int col_base, const int ODHW
#define GEMM_A(m, k) (((m) < ROWS && (k) < K) ? w[((m) / TAPS * K + (k)) * TAPS + (m) % TAPS] : 0.0f)
#define GEMM_B(k, n) (((k) < K && col_ok) ? dy[col_base + (k) * ODHW] : 0.0f)

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void dgrad_cols(__global const float* restrict dy, __global const float* restrict w,
                __global float* restrict cols, const int N, const int C, const int K,
                const int OD, const int OH, const int OW) {
    GEMM_TILES(As, Bs);
    const int ROWS = C * TAPS, ODHW = OD * OH * OW, NP = N * ODHW;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    const int col = n0 + GEMM_B_COL;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(dy, w, ROWS, K, col < NP, (col / ODHW) * K * ODHW + col % ODHW, ODHW,
                    m0, n0, K, As, Bs, acc);
    for (int i = 0; i < WM; i++) {
        const int m = m0 + GEMM_ROW(i);
        for (int j = 0; j < WN; j++) {
            const int n = n0 + GEMM_COL(j);
            if (m < ROWS && n < NP) cols[m * NP + n] = acc[i][j];
        }
    }
}

// One work-item per dx element: dim 0 = (z, y, x), dim 1 = c, dim 2 = n.
__kernel void col2vol(__global const float* restrict cols, __global float* restrict dx,
                      const int N, const int C, const int D, const int H, const int W,
                      const int OD, const int OH, const int OW, const int PAD) {
    const int zyx = get_global_id(0), c = get_global_id(1), n = get_global_id(2);
    if (zyx >= D * H * W) return;
    const int z = zyx / (H * W), yy = (zyx / W) % H, x = zyx % W, NP = N * OD * OH * OW;
    float grad = 0.0f;
    for (int t = 0; t < KT; t++) {
        const int od_s = z + PAD - t;
        if (od_s < 0 || od_s % STRIDE || od_s / STRIDE >= OD) continue;
        for (int r = 0; r < KH; r++) {
            const int oh_s = yy + PAD - r;
            if (oh_s < 0 || oh_s % STRIDE || oh_s / STRIDE >= OH) continue;
            for (int s = 0; s < KW; s++) {
                const int ow_s = x + PAD - s;
                if (ow_s < 0 || ow_s % STRIDE || ow_s / STRIDE >= OW) continue;
                const int pos = ((n * OD + od_s / STRIDE) * OH + oh_s / STRIDE) * OW + ow_s / STRIDE;
                grad += cols[(((c * KT + t) * KH + r) * KW + s) * NP + pos];
            }
        }
    }
    dx[(n * C + c) * D * H * W + zyx] = grad;
}
