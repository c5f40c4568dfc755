// Stage 01: Winograd F(2x2,3x3), naive: every element of every step is its own work-item.
//
// What changed since the direct kernel (00): the convolution is split into four kernels.
//   wino_filter  U[xi][co][ci] = (G g G^T)[a][b]         (xi = a*4 + b, g: the 3x3 filter of ci -> co)
//   wino_input   V[xi][p][ci]  = (B^T d B)[a][b]         (d: the 4x4 input tile p of channel ci)
//   wino_gemm    M[xi][co][p]  = sum_ci U[xi][co][ci] * V[xi][p][ci]   (16 matrix products)
//   wino_output  y[2x2 tile p of channel co] = A^T M[..][co][p] A
// Why: the 16 products of M cost 16 multiply-adds per channel for 4 outputs, 4 per output,
// instead of 9 for the direct kernel: 2.25x fewer. The transforms are cheap by comparison.
// Here each work-item computes one element of U, V, M or y from the tables of
// winograd_f23.h, so a 4x4 input tile is read from global memory 16 times (stage 02 fixes it).
//
// Tiles: the output is cut into TH x TW tiles of 2x2 (TH = ceil(OH/2)); tile p = (n*TH + th)*TW + tw
// reads the 4x4 input window starting at (2*th - PADT, 2*tw - PADT), zero outside the input;
// output elements beyond OH, OW of a partial tile are computed and dropped.
// Scratch sizes: CIP >= CI, COP >= CO, PP >= P = N*TH*TW (padding, written as zeros, lets later
// stages run their matrix products without bounds checks; here CIP = CI, COP = CO, PP = P).
// NDRange of every kernel: one dimension, one work-item per element, padded to WG.
// JIT parameters: WG (work-group size, host side).

#include "course.h"
#include "winograd_f23.h"

__kernel void wino_filter(__global const float* restrict w,   // IOHW (CI, CO, 3, 3)
                          __global float* restrict U,         // (16, COP, CIP)
                          const int CI, const int CO, const int CIP, const int COP) {
    const int idx = get_global_id(0);
    if (idx >= 16 * COP * CIP) return;
    const int ci = idx % CIP, co = (idx / CIP) % COP, xi = idx / (CIP * COP);
    const int a = xi / 4, b = xi % 4;
    float u = 0.0f;
    if (ci < CI && co < CO) {
        for (int r = 0; r < 3; r++)
            for (int s = 0; s < 3; s++)
                u += WINO_G[a * 3 + r] * w[((ci * CO + co) * 3 + r) * 3 + s] * WINO_G[b * 3 + s];
    }
    U[idx] = u;
}

__kernel void wino_input(__global const float* restrict x,    // (N, CI, IH, IW)
                         __global const float* restrict xy,   // unused by the forward pass
                         __global float* restrict V,          // (16, PP, CIP)
                         const int N, const int CI, const int IH, const int IW, const int TH,
                         const int TW, const int PADT, const int CIP, const int PP) {
    const int idx = get_global_id(0);
    if (idx >= 16 * PP * CIP) return;
    const int ci = idx % CIP, p = (idx / CIP) % PP, xi = idx / (CIP * PP);
    const int a = xi / 4, b = xi % 4;
    float v = 0.0f;
    if (ci < CI && p < N * TH * TW) {
        const int n = p / (TH * TW), th = (p / TW) % TH, tw = p % TW;
        const int h0 = 2 * th - PADT, w0 = 2 * tw - PADT;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                const int h = h0 + i, x_ = w0 + j;
                const float d = (h >= 0 && h < IH && x_ >= 0 && x_ < IW)
                                ? GRAD_IN(x, xy, ((n * CI + ci) * IH + h) * IW + x_) : 0.0f;
                v += WINO_BT[a * 4 + i] * d * WINO_BT[b * 4 + j];
            }
    }
    V[idx] = v;
}

__kernel void wino_gemm(__global const float* restrict U,    // (16, COP, CIP)
                        __global const float* restrict V,    // (16, PP, CIP)
                        __global float* restrict M,          // (16, COP, PP)
                        const int CIP, const int COP, const int PP) {
    const int idx = get_global_id(0);
    if (idx >= 16 * COP * PP) return;
    const int p = idx % PP, co = (idx / PP) % COP, xi = idx / (PP * COP);
    float m = 0.0f;
    for (int ci = 0; ci < CIP; ci++)
        m += U[(xi * COP + co) * CIP + ci] * V[(xi * PP + p) * CIP + ci];
    M[idx] = m;
}

__kernel void wino_output(__global const float* restrict M,  // (16, COP, PP)
                          __global float* restrict y,        // (N, CO, OH, OW)
                          const int N, const int CO, const int OH, const int OW, const int TH,
                          const int TW, const int COP, const int PP) {
    const int idx = get_global_id(0);
    if (idx >= N * CO * OH * OW) return;
    const int ow = idx % OW, oh = (idx / OW) % OH, co = (idx / (OW * OH)) % CO, n = idx / (OW * OH * CO);
    const int p = (n * TH + oh / 2) * TW + ow / 2;
    const int i = oh % 2, j = ow % 2;
    float acc = 0.0f;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            acc += WINO_AT[i * 4 + a] * M[((a * 4 + b) * COP + co) * PP + p] * WINO_AT[j * 4 + b];
    y[idx] = acc;
}
