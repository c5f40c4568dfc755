// The kernel of conv_dgrad/09_prefetch and its CUDA twin, one text for both languages (course.h's
// macros spell what they spell differently): 09_register_block's tile with the copy of chunk i+1
// in flight during the arithmetic of chunk i, through registers (FETCH, STORE) and two halves of
// local memory. What it changes, why, and its layouts: 09_prefetch.cl's header; chapter 9 shows
// its diff with this code inlined.
// JIT parameters: KH, KW (default 3), TX, TY, XPW, CPW, CB, KC (constraints: 09_local_tile.cl,
// 09_register_block.cl), ACT (course.h).
#ifndef DGRAD_PREFETCH_H
#define DGRAD_PREFETCH_H

#include "course.h"

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#define TAPS (KH * KW)
#define PH (TY + KH - 1)             // rows of dy the tile needs
#define PW (TX + KW - 1)             // columns of dy the tile needs
#define TXG (TX / XPW)              // work-items along a tile row
#define CG (CB / CPW)               // work-items along the channels
#define NU (XPW + KW - 1)           // dy columns one row of a work-item's window spans
#define LS (TXG * TY * CG)           // work-items per group
#define NDY ((KC * PH * PW + LS - 1) / LS)      // dy floats each work-item copies per chunk
#define NW ((CB * KC * TAPS + LS - 1) / LS)     // weights each work-item copies per chunk

// A work-item's share of chunk k0's copy: global -> registers (FETCH), registers -> half b (STORE).
// Copy element i = lid + q*LS, in the order of 09_local_tile's loops (coalesced).
#define FETCH(k0) do {                                                                  \
        _Pragma("unroll") for (int q = 0; q < NDY; q++) {                               \
            const int i = lid + q * LS;                                                 \
            const int kk = i / (PH * PW), py = i / PW % PH, px = i % PW;                \
            const int k = (k0) + kk, oh = oh0 + py, ow = ow0 + px;                      \
            const bool ok = i < KC * PH * PW && k < K && oh >= 0 && oh < OH && ow >= 0 && ow < OW; \
            gdy[q] = ok ? GRAD_IN(dy, y, ((n * K + k) * OH + oh) * OW + ow) : 0.0f;     \
        }                                                                               \
        _Pragma("unroll") for (int q = 0; q < NW; q++) {                                \
            const int i = lid + q * LS;                                                 \
            const int cc = i / (KC * TAPS), kk = i / TAPS % KC, t = i % TAPS;           \
            const bool ok = i < CB * KC * TAPS && cb0 + cc < C && (k0) + kk < K;        \
            gw[q] = ok ? w[((cb0 + cc) * K + (k0) + kk) * TAPS + t] : 0.0f;             \
        }                                                                               \
    } while (0)
#define STORE(b) do {                                                                   \
        _Pragma("unroll") for (int q = 0; q < NDY; q++) {                               \
            const int i = lid + q * LS;                                                 \
            if (i < KC * PH * PW) dyt[b][i / (PH * PW)][i / PW % PH][i % PW] = gdy[q];  \
        }                                                                               \
        _Pragma("unroll") for (int q = 0; q < NW; q++) {                                \
            const int i = lid + q * LS;                                                 \
            if (i < CB * KC * TAPS) wt[b][i / (KC * TAPS)][i / TAPS % KC][i % TAPS] = gw[q]; \
        }                                                                               \
    } while (0)

KERNEL_LS(LS)
void conv_dgrad(GLOBAL const float* RESTRICT dy,  // gradient w.r.t. the layer output
                GLOBAL const float* RESTRICT y,   // layer output after activation
                GLOBAL const float* RESTRICT w,   // weights, IOHW
                GLOBAL float* RESTRICT dx,        // gradient w.r.t. the layer input
                const int N, const int C, const int H, const int W,
                const int K, const int OH, const int OW, const int PAD) {
    LOCAL_MEM float dyt[2][KC][PH][PW];
    LOCAL_MEM float wt[2][CB][KC][TAPS];
    float gdy[NDY], gw[NW];

    const int lid = LOCAL_ID(0);
    const int tiles_x = (W + TX - 1) / TX, tiles_y = (H + TY - 1) / TY;
    const int g = GROUP_ID(0);
    const int tx = g % tiles_x, ty = (g / tiles_x) % tiles_y, n = g / (tiles_x * tiles_y);
    const int cb0 = GROUP_ID(1) * CB;
    const int xi = lid % TXG, yi = (lid / TXG) % TY, ci = lid / (TXG * TY);
    const int h = ty * TY + yi, x0 = tx * TX + xi * XPW, c0 = cb0 + ci * CPW;
    const int oh0 = ty * TY + PAD - (KH - 1);           // dy row of patch row 0
    const int ow0 = tx * TX + PAD - (KW - 1);           // dy column of patch column 0

    float acc[CPW][XPW];
#pragma unroll
    for (int j = 0; j < CPW; j++)
#pragma unroll
        for (int p = 0; p < XPW; p++) acc[j][p] = 0.0f;
    FETCH(0);
    STORE(0);
    BARRIER();
    int b = 0;
    for (int k0 = 0; k0 < K; k0 += KC, b ^= 1) {
        const bool more = k0 + KC < K;
        if (more) FETCH(k0 + KC);                       // in flight during the arithmetic below
        // Position x0+p, tap (r, s) reads patch row yi + KH-1-r, column xi*XPW + p + KW-1-s = d[p + KW-1-s].
        for (int kk = 0; kk < KC; kk++) {
#pragma unroll
            for (int r = 0; r < KH; r++) {
                float d[NU];
#pragma unroll
                for (int u = 0; u < NU; u++) d[u] = dyt[b][kk][yi + KH - 1 - r][xi * XPW + u];
#pragma unroll
                for (int s = 0; s < KW; s++)
#pragma unroll
                    for (int j = 0; j < CPW; j++) {
                        const float wv = wt[b][ci * CPW + j][kk][r * KW + s];
#pragma unroll
                        for (int p = 0; p < XPW; p++) acc[j][p] += d[p + KW - 1 - s] * wv;
                    }
            }
        }
        if (more) STORE(b ^ 1);                         // the half last read before the previous barrier
        BARRIER();
    }
    if (h >= H) return;
#pragma unroll
    for (int j = 0; j < CPW; j++)
#pragma unroll
        for (int p = 0; p < XPW; p++)
            if (c0 + j < C && x0 + p < W) dx[((n * C + c0 + j) * H + h) * W + x0 + p] = acc[j][p];
}

#endif
