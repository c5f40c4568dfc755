// Stage 09: register blocking.
//
// What changed since 09_local_tile: a work-item computes XPW neighbouring x positions of one row
// times CPW input channels (CPW x XPW sums in registers) instead of one position of one channel.
// The group's tile is unchanged (TY x TX positions x CB channels), so it needs XPW x CPW times
// fewer work-items: LS = (TX/XPW) x TY x (CB/CPW). In the inner loop a work-item reads one row
// of XPW + KW - 1 dy values from local memory into registers and uses each up to KW x CPW times,
// and reads each of its CPW weights once per tap and uses it XPW times.
//
// Why: in 09_local_tile every multiply-add needs two local-memory reads (one dy value, one
// weight). Local memory is fast but not free: it has a bandwidth per compute unit below the FMA
// rate, and each read is an instruction. With the block, a (chunk depth, row) step reads
// XPW + KW - 1 + KW x CPW floats for KW x CPW x XPW multiply-adds (XPW = CPW = 4, 3x3: 18 reads
// for 48 FMAs instead of 96 reads).
//
// Memory safety: as 09_local_tile (the copy checks every global index; positions and channels
// past the tensor compute on zeros and are not stored).
//
// Measured: notebooks/09_local_memory.ipynb (this device, and the GPU runs recorded in results/).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// Local: dyt[KC][PH][PW], wt[CB][KC][KH*KW] (w's own order: the copy is contiguous per channel).
// NDRange: dim 0 = tile (n, tile row, tile column) x LS work-items, dim 1 = block of CB channels.
// JIT parameters: KH, KW, ACT (from the problem); STRIDE must be 1 (the host falls back to stage
// 08 otherwise); TX, TY, CB, KC as 09_local_tile; XPW (divides TX), CPW (divides CB)
// (host: helpers/launch/local.py checks them and the limits).

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

__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))
void conv_dgrad(__global const float* restrict dy,  // gradient w.r.t. the layer output
                __global const float* restrict y,   // layer output after activation
                __global const float* restrict w,   // weights, IOHW
                __global float* restrict dx,        // gradient w.r.t. the layer input
                const int N, const int C, const int H, const int W,
                const int K, const int OH, const int OW, const int PAD) {
    __local float dyt[KC][PH][PW];
    __local float wt[CB][KC][TAPS];

    const int lid = get_local_id(0);
    const int tiles_x = (W + TX - 1) / TX, tiles_y = (H + TY - 1) / TY;
    const int g = get_group_id(0);
    const int tx = g % tiles_x, ty = (g / tiles_x) % tiles_y, n = g / (tiles_x * tiles_y);
    const int cb0 = get_group_id(1) * CB;
    const int xi = lid % TXG, yi = (lid / TXG) % TY, ci = lid / (TXG * TY);
    const int h = ty * TY + yi, x0 = tx * TX + xi * XPW, c0 = cb0 + ci * CPW;
    const int oh0 = ty * TY + PAD - (KH - 1);           // dy row of patch row 0
    const int ow0 = tx * TX + PAD - (KW - 1);           // dy column of patch column 0

    float acc[CPW][XPW];
#pragma unroll
    for (int j = 0; j < CPW; j++)
#pragma unroll
        for (int p = 0; p < XPW; p++) acc[j][p] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += KC) {
        // The copy: consecutive work-items take consecutive patch columns (coalesced rows of dy)
        // and consecutive weights of one channel (KC*TAPS contiguous floats of w).
        for (int i = lid; i < KC * PH * PW; i += LS) {
            const int kk = i / (PH * PW), py = i / PW % PH, px = i % PW;
            const int k = k0 + kk, oh = oh0 + py, ow = ow0 + px;
            const bool ok = k < K && oh >= 0 && oh < OH && ow >= 0 && ow < OW;
            dyt[kk][py][px] = ok ? GRAD_IN(dy, y, ((n * K + k) * OH + oh) * OW + ow) : 0.0f;
        }
        for (int i = lid; i < CB * KC * TAPS; i += LS) {
            const int cc = i / (KC * TAPS), kk = i / TAPS % KC, t = i % TAPS;
            const bool ok = cb0 + cc < C && k0 + kk < K;
            wt[cc][kk][t] = ok ? w[((cb0 + cc) * K + k0 + kk) * TAPS + t] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        // Position x0+p, tap (r, s) reads patch row yi + KH-1-r, column xi*XPW + p + KW-1-s = d[p + KW-1-s].
        for (int kk = 0; kk < KC; kk++) {
#pragma unroll
            for (int r = 0; r < KH; r++) {
                float d[NU];
#pragma unroll
                for (int u = 0; u < NU; u++) d[u] = dyt[kk][yi + KH - 1 - r][xi * XPW + u];
#pragma unroll
                for (int s = 0; s < KW; s++)
#pragma unroll
                    for (int j = 0; j < CPW; j++) {
                        const float wv = wt[ci * CPW + j][kk][r * KW + s];
#pragma unroll
                        for (int p = 0; p < XPW; p++) acc[j][p] += d[p + KW - 1 - s] * wv;
                    }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);                   // before the next chunk overwrites the tile
    }
    if (h >= H) return;
#pragma unroll
    for (int j = 0; j < CPW; j++)
#pragma unroll
        for (int p = 0; p < XPW; p++)
            if (c0 + j < C && x0 + p < W) dx[((n * C + c0 + j) * H + h) * W + x0 + p] = acc[j][p];
}
