// The transform kernels of chapter 12's F(2x2,3x3) ladder, conv_forward 02_wino_tiles to
// 05_wino_blocked (and conv_dgrad 12_winograd, which is 05 with ROTATED = 1): wino_filter (U from
// w), wino_input (V from x) and wino_output (y from M), a whole tile per work-item (stage 02's
// lesson). The stages differ in their matrix products, wino_gemm, and in the layouts they read
// there, which a stage defines before including this: U_AT(xi, co, ci) and V_AT(xi, p, ci), the
// index of product xi of (output channel co, input channel ci) in U and of (tile p, input channel
// ci) in V; and W_AT(ci, co, rs), the index of tap rs (= r*3 + s) of filter (ci, co) in w, which
// stage 05 reads rotated with ROTATED = 1. M is (16, COP, PP) in every stage. wino_input applies
// the activation's derivative to what it reads (GRAD_IN): the forward pass leaves ACT at none.
// NDRange: dim 0 = output channel co (wino_filter) or tile p, padded to WG; dim 1 = channel.
// JIT parameters: ACT (course.h); WG is the host's.
#ifndef WINOGRAD_LADDER_H
#define WINOGRAD_LADDER_H

#include "course.h"
#include "winograd_tiles.h"

__kernel void wino_filter(__global const float* restrict w,   // IOHW (CI, CO, 3, 3), read at W_AT
                          __global float* restrict U,         // 16 products: U_AT
                          const int CI, const int CO, const int CIP, const int COP) {
    const int co = get_global_id(0), ci = get_global_id(1);
    if (co >= COP) return;
    float g[9], u[16];
    for (int rs = 0; rs < 9; rs++)
        g[rs] = (ci < CI && co < CO) ? w[W_AT(ci, co, rs)] : 0.0f;
    wino_filter_tile(g, u);
    for (int xi = 0; xi < 16; xi++)
        U[U_AT(xi, co, ci)] = u[xi];
}

__kernel void wino_input(__global const float* restrict x,    // (N, CI, IH, IW)
                         __global const float* restrict xy,   // with an activation (conv_dgrad 12): its output
                         __global float* restrict V,          // 16 products: V_AT
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
        V[V_AT(xi, p, ci)] = v[xi];
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

#endif
