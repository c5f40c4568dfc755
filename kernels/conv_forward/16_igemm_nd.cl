// Stage 16_igemm_nd: the forward convolution of any shape as implicit GEMMs on the course's tile
// loop, one per group, all in one launch, with the bias and activation in the epilogue.
//
// What changed since stage 16 any_shape: there, one work-item per output element walked its
// group's channels and taps alone, reading x and w from global memory once per product. Per
// group g the convolution is chapter 11's im2col product without the column workspace:
//     y_g (K/G x N*OV) = w_g (K/G x C/G*taps) . cols (C/G*taps x N*OV)
// so it runs on gemm_core.h's tiles (a TM x TN block of y per work-group, WM x WN per work-item in
// registers, each gathered value of x used TM times from local memory), with common/igemm_nd.h's
// index arithmetic:
//   - groups batched in one launch: dim 2 of the NDRange is the group; its GEMM reads its own
//     channel slices of x and w (input channels g*C/G .., output channels g*K/G ..);
//   - a column of B is an output position (n, oa, od, oh, ow), decoded once per work-item
//     (GEMM_B_COL) into its input origin o*STRIDE - PAD per axis; a row a pair (c', tap), whose
//     shift tap*DIL per axis is the dilation: an element is a bounds test per axis and one load,
//     for ranks 1-4.
//
// Layouts: x (N,C,A,D,H,W); w (C,K/G,KA,KD,KH,KW); bias (K); y (N,K,OA,OD,OH,OW), all row-major.
// NDRange: (ceil(N*OV/TN) * TN/WN, ceil((K/G)/TM) * TM/WM, G), work-group (TN/WN, TM/WM).
// JIT parameters: igemm_nd.h's, BIAS, ACT; TM, TN, TK, WM, WN, GEMM_LDS4, GEMM_PREFETCH
// (gemm_core.h: the work-group a multiple of TN, since each work-item fetches B in one column).
// helpers/launch/igemm_nd.py fits the tile to the group's channels.

#ifndef BIAS
#define BIAS 0
#endif

#include "igemm_nd.h"

// A[k'][j'] = w[g*C/G + c'][k'][tap] and B[j'][column] = x at the input position the tap reads
// for this work-item's output position (0 in the padding), j' = c' * TAPS + tap.
#define GEMM_ARGS __global const float* restrict x, __global const float* restrict w,            \
                  const int KG, const int KRED, const int V, const int4 iext, const int w_group,   \
                  const bool col_ok, const int x_col, const int4 origin
#define GEMM_A(m, kk) (((m) < KG && (kk) < KRED)                                                 \
                       ? w[w_group + ((kk) / TAPS * KG + (m)) * TAPS + (kk) % TAPS] : 0.0f)
#define GEMM_B(kk, n) forward_gather(x, kk, KRED, V, iext, col_ok, x_col, origin)

inline float forward_gather(__global const float* restrict x, const int kk, const int KRED,
                            const int V, const int4 iext, const bool col_ok, const int x_col,
                            const int4 origin) {
    const int4 at = origin + nd_shift(kk % TAPS);
    if (!col_ok || kk >= KRED || !nd_inside(at, iext)) return 0.0f;
    return x[x_col + kk / TAPS * V + nd_flat(at, iext)];
}

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void conv_forward(__global const float* restrict x,     // input (N,C,A,D,H,W)
                  __global const float* restrict w,     // weights (C,K/G,KA,KD,KH,KW)
                  __global const float* restrict bias,  // (K), read only with BIAS
                  __global float* restrict y,           // output (N,K,OA,OD,OH,OW)
                  ND_ARGS) {
    GEMM_TILES(As, Bs);
    const int g = get_group_id(2), CG = C / G, KG = K / G;
    const int4 iext = (int4)(A, D, H, W), oext = (int4)(OA, OD, OH, OW);
    const int V = A * D * H * W, OV = OA * OD * OH * OW, NCOL = N * OV, KRED = CG * TAPS;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    // the column of B this work-item fetches, decoded once: image n, output position o
    const int col = n0 + GEMM_B_COL, n = col / OV;
    const int4 origin = nd_origin(nd_unflat(col - n * OV, oext), (int4)(PA, PD, PH, PW));
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(x, w, KG, KRED, V, iext, g * CG * KG * TAPS, col < NCOL, (n * C + g * CG) * V, origin,
                    m0, n0, KRED, As, Bs, acc);
    for (int j = 0; j < WN; j++) {
        const int c = n0 + GEMM_COL(j);
        if (c >= NCOL) continue;
        const int img = c / OV;
        __global float* out = y + (img * K + g * KG) * OV + (c - img * OV);
        for (int i = 0; i < WM; i++) {
            const int m = m0 + GEMM_ROW(i);
            if (m >= KG) continue;
            float v = acc[i][j];
#if BIAS
            v += bias[g * KG + m];
#endif
            out[m * OV] = act_forward(v);
        }
    }
}
