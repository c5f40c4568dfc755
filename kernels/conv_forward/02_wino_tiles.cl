// Stage 02: Winograd F(2x2,3x3), whole tiles in registers.
//
// What changed since stage 01: a work-item of wino_input loads its 4x4 input tile into registers
// once and produces all 16 values of V for it (winograd_tiles.h: B^T d B with additions only);
// wino_output reads the 16 values of M of one tile and writes its whole 2x2 output; wino_filter
// transforms one whole 3x3 filter. Why: in stage 01 the 16 work-items of one tile each read the
// same 16 inputs, and the 4 work-items of one output tile each read the same 16 values of M.
// The matrix product wino_gemm is unchanged: it is what stage 03 attacks.
//
// Layouts as in stage 01: U (16, COP, CIP), V (16, PP, CIP), M (16, COP, PP).
// NDRange: transforms: dim 0 = tile p or output channel co (padded to WG), dim 1 = channel;
// wino_gemm: one dimension, one work-item per element of M, padded to WG.
// JIT parameters: WG (work-group size, host side).

#include "course.h"
#include "winograd_tiles.h"

__kernel void wino_filter(__global const float* restrict w,   // IOHW (CI, CO, 3, 3)
                          __global float* restrict U,         // (16, COP, CIP)
                          const int CI, const int CO, const int CIP, const int COP) {
    const int co = get_global_id(0), ci = get_global_id(1);
    if (co >= COP) return;
    float g[9], u[16];
    for (int rs = 0; rs < 9; rs++)
        g[rs] = (ci < CI && co < CO) ? w[(ci * CO + co) * 9 + rs] : 0.0f;
    wino_filter_tile(g, u);
    for (int xi = 0; xi < 16; xi++)
        U[(xi * COP + co) * CIP + ci] = u[xi];
}

__kernel void wino_input(__global const float* restrict x,    // (N, CI, IH, IW)
                         __global const float* restrict xy,   // unused by the forward pass
                         __global float* restrict V,          // (16, PP, CIP)
                         const int N, const int CI, const int IH, const int IW, const int TH,
                         const int TW, const int PADT, const int CIP, const int PP) {
    const int p = get_global_id(0), ci = get_global_id(1);
    if (p >= PP) return;
    float d[16], v[16];
    const int n = p / (TH * TW), th = (p / TW) % TH, tw = p % TW;
    const int h0 = 2 * th - PADT, w0 = 2 * tw - PADT;
    const bool live = ci < CI && p < N * TH * TW;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            const int h = h0 + i, x_ = w0 + j;
            d[i * 4 + j] = (live && h >= 0 && h < IH && x_ >= 0 && x_ < IW)
                           ? GRAD_IN(x, xy, ((n * CI + ci) * IH + h) * IW + x_) : 0.0f;
        }
    wino_input_tile(d, v);
    for (int xi = 0; xi < 16; xi++)
        V[(xi * PP + p) * CIP + ci] = v[xi];
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
    const int p = get_global_id(0), co = get_global_id(1);
    if (p >= N * TH * TW || co >= CO) return;
    float m[16], t[4];
    for (int xi = 0; xi < 16; xi++)
        m[xi] = M[(xi * COP + co) * PP + p];
    wino_output_tile(m, t);
    const int n = p / (TH * TW), th = (p / TW) % TH, tw = p % TW;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            const int oh = 2 * th + i, ow = 2 * tw + j;
            if (oh < OH && ow < OW)                 // a partial tile at the bottom or right edge
                y[((n * CO + co) * OH + oh) * OW + ow] = t[i * 2 + j];
        }
}
