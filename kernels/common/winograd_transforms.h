// The transform kernels of a Winograd stage whose batched products run through the course GEMM
// (conv_forward stage 06, conv_dgrad stage 12 winograd4), for any tile size: include a tile
// header first (winograd_tiles.h or winograd_tiles_f43.h), which sets WINO_M (output tile side)
// and WINO_A = WINO_M + 2 (input tile side) and the whole-tile transforms.
// They are stage 05's transforms with the tile sizes as names, and U stored (T, COP, CIP), k
// (= ci) innermost, as the GEMM reads its A operand with float4 loads along k.
// The filter and the input transforms do not depend on each other: wino_transforms does both in
// one launch (the host's switch JOINT_TRANSFORMS = 1, helpers/launch/winograd.py), so that the
// filter's work-groups run beside the input's instead of in a launch of their own;
// JOINT_TRANSFORMS = 0 launches wino_filter, then wino_input. Each work-item's work is the same
// function either way (wino_filter_one, wino_input_one).
// ROTATED = 1 (the input gradient) reads each filter rotated by 180 degrees with its input and
// output channels swapped, and wino_input applies the activation's derivative (GRAD_IN).
//
// Layouts (T = WINO_A * WINO_A products): U (T, COP, CIP); V and M product-major,
// (T, CIP, PP) and (T, COP, PP), each product's matrix whole and the T matrices one after the
// other, or with WINO_CHANNEL_MAJOR = 1 (the host's switch, default 1) channel-major, (CIP, T, PP)
// and (COP, T, PP): a channel's T rows of tiles side by side. The same values either way; the
// product xi then reads V's rows, and writes M's, T * PP floats apart instead of PP (its
// operand's base xi * PP instead of xi * CIP * PP). CIP, COP, PP are CI, CO and the number of
// tiles P padded up to the GEMM's blocks, the padding written as zeros.
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

#ifndef WINO_CHANNEL_MAJOR
#define WINO_CHANNEL_MAJOR 0   // 1: V stored (CIP, T, PP) and M (COP, T, PP) (see above)
#endif
// WINO_IDX: the index of (product xi, channel c, tile p) in V (C = CIP) or M (C = COP);
// WINO_ROW_STRIDE: how far apart product xi's rows (one per channel) lie; WINO_BASE: where its
// matrix starts. PP is the calling kernel's argument (tiles per row). WINO_IDX is kept in this
// form: written as WINO_BASE + c * WINO_ROW_STRIDE + p (the same addresses), it gave a different
// PTX for the product from NVIDIA's OpenCL compiler, 1-2 % slower on res128@28 (H200, an
// interleaved A/B of the two texts, not recorded).
#if WINO_CHANNEL_MAJOR
#define WINO_IDX(xi, c, C, p) (((c) * WINO_T + (xi)) * PP + (p))
#define WINO_ROW_STRIDE (WINO_T * PP)
#else
#define WINO_IDX(xi, c, C, p) (((xi) * (C) + (c)) * PP + (p))
#define WINO_ROW_STRIDE PP
#endif
#define WINO_BASE(xi, C) WINO_IDX(xi, 0, C, 0)

// One filter: the 3x3 filter (ci, co) -> its T products in U; zeros in the padding.
inline void wino_filter_one(__global const float* restrict w, __global float* restrict U, const int CI,
                            const int CO, const int CIP, const int COP, const int ci, const int co) {
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

// NDRange (CIP rounded up to WG, COP): consecutive ci write consecutive addresses of U.
__kernel void wino_filter(__global const float* restrict w,   // IOHW (CI, CO, 3, 3); ROTATED: (CO, CI, 3, 3)
                          __global float* restrict U,         // (T, COP, CIP)
                          const int CI, const int CO, const int CIP, const int COP) {
    const int ci = get_global_id(0), co = get_global_id(1);
    if (ci < CIP) wino_filter_one(w, U, CI, CO, CIP, COP, ci, co);
}

// One input tile: tile p of channel ci (its WINO_A x WINO_A window of x, zeros outside) -> its
// T products in V; zeros in the padding.
inline void wino_input_one(__global const float* restrict x, __global const float* restrict xy,
                           __global float* restrict V, const int N, const int CI, const int IH,
                           const int IW, const int TH, const int TW, const int PADT, const int CIP,
                           const int PP, const int p, const int ci) {
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
        V[WINO_IDX(xi, ci, CIP, p)] = v[xi];           // consecutive p: consecutive addresses
}

// NDRange (PP rounded up to WG, CIP): one work-item per tile and input channel.
__kernel void wino_input(__global const float* restrict x,    // (N, CI, IH, IW)
                         __global const float* restrict xy,   // ROTATED with an activation: its output
                         __global float* restrict V,          // (T, CIP, PP)
                         const int N, const int CI, const int IH, const int IW, const int TH,
                         const int TW, const int PADT, const int CIP, const int PP) {
    const int p = get_global_id(0), ci = get_global_id(1);
    if (p < PP) wino_input_one(x, xy, V, N, CI, IH, IW, TH, TW, PADT, CIP, PP, p, ci);
}

// Both transforms in one launch (JOINT_TRANSFORMS = 1). NDRange ((GF + GI) * WG) in work-groups
// of WG: the first GF = COP * ceil(CIP / WG) groups transform filters (a row of CIP per output
// channel, as wino_filter's), the other GI = CIP * ceil(PP / WG) input tiles (a row of PP per
// input channel, as wino_input's). A work-group's branch is uniform: no work-item waits for the
// other kind, and there is no barrier.
__kernel void wino_transforms(__global const float* restrict w, __global float* restrict U,
                              __global const float* restrict x, __global const float* restrict xy,
                              __global float* restrict V, const int CI, const int CO, const int CIP,
                              const int COP, const int N, const int IH, const int IW, const int TH,
                              const int TW, const int PADT, const int PP, const int GF) {
    const int g = get_group_id(0), wg = get_local_size(0), lid = get_local_id(0);
    if (g < GF) {
        const int per = (CIP + wg - 1) / wg, ci = (g % per) * wg + lid;
        if (ci < CIP) wino_filter_one(w, U, CI, CO, CIP, COP, ci, g / per);
    } else {
        const int per = (PP + wg - 1) / wg, p = ((g - GF) % per) * wg + lid;
        if (p < PP) wino_input_one(x, xy, V, N, CI, IH, IW, TH, TW, PADT, CIP, PP, p, (g - GF) / per);
    }
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
        m[xi] = M[WINO_IDX(xi, co, COP, p)];
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
