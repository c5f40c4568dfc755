// The three transform kernels of a Winograd stage whose batched products run through the course
// GEMM (conv_forward stage 06, conv_dgrad stage 12 winograd4), for any tile size: include a tile
// header first (winograd_tiles.h or winograd_tiles_f43.h), which sets WINO_M (output tile side)
// and WINO_A = WINO_M + 2 (input tile side) and the whole-tile transforms.
// They are stage 05's transforms with the tile sizes as names, and U stored (T, COP, CIP), k
// (= ci) innermost, as the GEMM reads its A operand with float4 loads along k.
// ROTATED = 1 (the input gradient) reads each filter rotated by 180 degrees with its input and
// output channels swapped, and wino_input applies the activation's derivative (GRAD_IN).
//
// Layouts (T = WINO_A * WINO_A products): U (T, COP, CIP), V (T, CIP, PP), M (T, COP, PP);
// CIP, COP, PP are CI, CO and the number of tiles P padded up to the GEMM's blocks, the padding
// written as zeros.
#ifndef WINOGRAD_TRANSFORMS_H
#define WINOGRAD_TRANSFORMS_H

#include "course.h"

#define WINO_T (WINO_A * WINO_A)    // products per tile: 16 for F(2x2), 36 for F(4x4)

#ifndef ROTATED
#define ROTATED 0   // 1: the input gradient's filter (see above)
#endif
#ifndef WINO_VEC_OUT
#define WINO_VEC_OUT 0   // 1 (OW a multiple of WINO_M = 4; helpers/launch/winograd.py): a row of an
#endif                   // output tile stored as one float4
#if WINO_VEC_OUT && WINO_M != 4
#error "WINO_VEC_OUT stores a row of a 4x4 output tile as one float4"
#endif

// NDRange (CIP rounded up to WG, COP): consecutive ci write consecutive addresses of U.
__kernel void wino_filter(__global const float* restrict w,   // IOHW (CI, CO, 3, 3); ROTATED: (CO, CI, 3, 3)
                          __global float* restrict U,         // (T, COP, CIP)
                          const int CI, const int CO, const int CIP, const int COP) {
    const int ci = get_global_id(0), co = get_global_id(1);
    if (ci >= CIP) return;
    float g[9], u[WINO_T];
    for (int rs = 0; rs < 9; rs++)
#if ROTATED
        g[rs] = (ci < CI && co < CO) ? w[(co * CI + ci) * 9 + 8 - rs] : 0.0f;   // w[co][ci][2-r][2-s]
#else
        g[rs] = (ci < CI && co < CO) ? w[(ci * CO + co) * 9 + rs] : 0.0f;
#endif
    wino_filter_tile(g, u);
    for (int xi = 0; xi < WINO_T; xi++)
        U[(xi * COP + co) * CIP + ci] = u[xi];
}

// NDRange (PP rounded up to WG, CIP): one work-item per tile and input channel.
__kernel void wino_input(__global const float* restrict x,    // (N, CI, IH, IW)
                         __global const float* restrict xy,   // ROTATED with an activation: its output
                         __global float* restrict V,          // (T, CIP, PP)
                         const int N, const int CI, const int IH, const int IW, const int TH,
                         const int TW, const int PADT, const int CIP, const int PP) {
    const int p = get_global_id(0), ci = get_global_id(1);
    if (p >= PP) return;
    float d[WINO_T], v[WINO_T];
    const int n = p / (TH * TW), th = (p / TW) % TH, tw = p % TW;
    const int h0 = WINO_M * th - PADT, w0 = WINO_M * tw - PADT;
    const bool live = ci < CI && p < N * TH * TW;
    for (int i = 0; i < WINO_A; i++)
        for (int j = 0; j < WINO_A; j++) {
            const int h = h0 + i, x_ = w0 + j;
            d[i * WINO_A + j] = (live && h >= 0 && h < IH && x_ >= 0 && x_ < IW)
                                ? GRAD_IN(x, xy, ((n * CI + ci) * IH + h) * IW + x_) : 0.0f;
        }
    wino_input_tile(d, v);
    for (int xi = 0; xi < WINO_T; xi++)
        V[(xi * CIP + ci) * PP + p] = v[xi];           // consecutive p: consecutive addresses
}

// NDRange (P rounded up to WG, CO): one work-item per tile and output channel.
__kernel void wino_output(__global const float* restrict M,  // (T, COP, PP)
                          __global float* restrict y,        // (N, CO, OH, OW)
                          const int N, const int CO, const int OH, const int OW, const int TH,
                          const int TW, const int COP, const int PP) {
    const int p = get_global_id(0), co = get_global_id(1);
    if (p >= N * TH * TW || co >= CO) return;
    float m[WINO_T], t[WINO_M * WINO_M];
    for (int xi = 0; xi < WINO_T; xi++)
        m[xi] = M[(xi * COP + co) * PP + p];
    wino_output_tile(m, t);
    const int n = p / (TH * TW), th = (p / TW) % TH, tw = p % TW;
#if WINO_VEC_OUT
    // consecutive work-items hold horizontally adjacent tiles: one 16-byte store per row, a warp's
    // stores contiguous. Scalar, the same 16 bytes take four stores, each touching one float in
    // every four of the span the warp writes. Recorded with the float4 stores: 0.046 ms on
    // res64@56, H200 (conv_dgrad winograd4; results/conv_dgrad_resnet50_switches_tuned_nvidia-h200.json,
    // steps_ms; no scalar run of the same session is recorded).
    for (int i = 0; i < WINO_M; i++) {
        const int oh = WINO_M * th + i;
        if (oh < OH)                                // a partial tile at the bottom edge
            vstore4((float4)(t[4 * i], t[4 * i + 1], t[4 * i + 2], t[4 * i + 3]), 0,
                    y + ((n * CO + co) * OH + oh) * OW + WINO_M * tw);
    }
#else
    for (int i = 0; i < WINO_M; i++)
        for (int j = 0; j < WINO_M; j++) {
            const int oh = WINO_M * th + i, ow = WINO_M * tw + j;
            if (oh < OH && ow < OW)                 // a partial tile at the bottom or right edge
                y[((n * CO + co) * OH + oh) * OW + ow] = t[i * WINO_M + j];
        }
#endif
}

#endif
