// Stage 10: the padded slab, the copy's index arithmetic done once.
//
// What changed since 10_padded: where each work-item's copy elements come from and go to. Per
// chunk 10_padded decomposed every element's index again (depth, row and column of the dy patch;
// channel and row of the weight slab: divisions by constants), tested it against the tensor's
// bounds and built its global and local addresses, though an element differs from one chunk to
// the next only by the chunk's first output channel k0. Here each element's offset at k0 = 0,
// its local address and a limit on k0 are computed once, before the chunk loop; a chunk adds
// k0 * OH * OW (dy) or k0 * KH * KW (w) to the offset and compares k0 with the limit (K - the
// element's depth, or 0 for an element outside the tensor: never read).
//
// Why: Nsight Compute on 10_padded's CUDA twin (chapter 10; results/local/ncu_limits_*) finds the
// issue slots busy 71 % of the cycles and 23 % of the issued instructions not multiply-adds: per
// warp and chunk 346 of them beside 1,152 multiply-adds, of which only 72 read local memory. At
// the same tile this stage issues 292. It keeps 3 integers per copied element live across the
// loop; ncu reports 127 registers per work-item against 10_padded's 128 at that tile.
//
// Memory safety: as 10_transposed; an element's offset may lie outside dy or w, but then its
// limit is 0 and it is never read (k0 >= 0).
//
// Measured: notebooks/10_bank_conflicts.ipynb (this device, and the GPU runs recorded in results/).
//
// Layouts: as 10_padded.
// NDRange and JIT parameters: as 10_transposed.

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
#define PWQ ((PW + 3) / 4)           // float4s per stored row of the patch
#define TXG (TX / XPW)               // work-items along a tile row
#define CG (CB / CPW)                // work-items along the channels
#define NUQ ((XPW + KW + 2) / 4)     // float4s one row of a work-item's window spans
#define LS (TXG * TY * CG)           // work-items per group
#define ROWS (KC * TAPS)             // rows of the weight slab: (depth, tap)
// Element i of a chunk's dy copy is (depth, row, column) of the patch walked in rows of DYW
// floats; it is stored at float DY_AT(i) of a half, whose rows hold 4*PWQ floats.
#define DYW PW                       // the patch's own rows of PW floats
#define DY_AT(i) (((i) / (PH * PW) * PH + (i) / PW % PH) * 4 * PWQ + (i) % PW)
#define NDY ((KC * PH * DYW + LS - 1) / LS)     // dy floats each work-item copies per chunk
#define NW ((CB * ROWS + LS - 1) / LS)          // weights each work-item copies per chunk

// Where weight (row R = depth*TAPS + tap, channel cc) lives in a half of the slab, in floats.
#define WROW (CB + 4)                // 4 floats of padding per row: rows start 4 banks apart
#define WADDR(R, cc) ((R) * WROW + (cc))
// The copy's order: element i of a chunk's weights is channel i / ROWS, row i % ROWS (w's order).
#define W_CC(i) ((i) / ROWS)
#define W_R(i) ((i) % ROWS)

// The halves seen as floats (for the copy's scalar stores and the weights' addresses).
#define DYF(b) ((__local float*)dyt[b])
#define WF(b) ((__local float*)wt[b])

// Per chunk: an element is read if k0 is below its limit (set once, below), at its offset + k0
// channels; it is stored at its local address.
#define FETCH(k0) do {                                                                  \
        _Pragma("unroll") for (int q = 0; q < NDY; q++)                                 \
            gdy[q] = (k0) < dlim[q] ? GRAD_IN(dy, y, doff[q] + (k0) * OH * OW) : 0.0f;  \
        _Pragma("unroll") for (int q = 0; q < NW; q++)                                  \
            gw[q] = (k0) < wlim[q] ? w[woff[q] + (k0) * TAPS] : 0.0f;                   \
    } while (0)
#define STORE(b) do {                                                                   \
        _Pragma("unroll") for (int q = 0; q < NDY; q++)                                 \
            if (lid + q * LS < KC * PH * DYW) DYF(b)[dat[q]] = gdy[q];                  \
        _Pragma("unroll") for (int q = 0; q < NW; q++)                                  \
            if (lid + q * LS < CB * ROWS) WF(b)[wat[q]] = gw[q];                        \
    } while (0)

__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))
void conv_dgrad(__global const float* restrict dy,  // gradient w.r.t. the layer output
                __global const float* restrict y,   // layer output after activation
                __global const float* restrict w,   // weights, IOHW
                __global float* restrict dx,        // gradient w.r.t. the layer input
                const int N, const int C, const int H, const int W,
                const int K, const int OH, const int OW, const int PAD) {
    __local float4 dyt[2][KC * PH * PWQ];
    __local float4 wt[2][ROWS * WROW / 4];
    float gdy[NDY], gw[NW];

    const int lid = get_local_id(0);
    const int tiles_x = (W + TX - 1) / TX, tiles_y = (H + TY - 1) / TY;
    const int g = get_group_id(0);
    const int tx = g % tiles_x, ty = (g / tiles_x) % tiles_y, n = g / (tiles_x * tiles_y);
    const int cb0 = get_group_id(1) * CB;
    const int xi = lid % TXG, yi = (lid / TXG) % TY, ci = lid / (TXG * TY);
    const int h = ty * TY + yi, x0 = tx * TX + xi * XPW, c0 = cb0 + ci * CPW;
    const int oh0 = ty * TY + PAD - (KH - 1);           // dy row of patch row 0
    const int ow0 = tx * TX + PAD - (KW - 1);           // dy column of patch column 0

    // Each copied element once: its offset at k0 = 0, its limit on k0, its local address.
    int doff[NDY], dlim[NDY], dat[NDY], woff[NW], wlim[NW], wat[NW];
#pragma unroll
    for (int q = 0; q < NDY; q++) {
        const int i = lid + q * LS;
        const int kk = i / (PH * DYW), py = i / DYW % PH, px = i % DYW, oh = oh0 + py, ow = ow0 + px;
        const bool inside = i < KC * PH * DYW && oh >= 0 && oh < OH && ow >= 0 && ow < OW;
        doff[q] = ((n * K + kk) * OH + oh) * OW + ow;
        dlim[q] = inside ? K - kk : 0;
        dat[q] = DY_AT(i);
    }
#pragma unroll
    for (int q = 0; q < NW; q++) {
        const int i = lid + q * LS, cc = W_CC(i), R = W_R(i);
        const bool inside = i < CB * ROWS && cb0 + cc < C;
        woff[q] = (cb0 + cc) * K * TAPS + R;
        wlim[q] = inside ? K - R / TAPS : 0;
        wat[q] = WADDR(R, cc);
    }

    float acc[CPW][XPW];
#pragma unroll
    for (int j = 0; j < CPW; j++)
#pragma unroll
        for (int p = 0; p < XPW; p++) acc[j][p] = 0.0f;
    FETCH(0);
    STORE(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    int b = 0;
    for (int k0 = 0; k0 < K; k0 += KC, b ^= 1) {
        const bool more = k0 + KC < K;
        if (more) FETCH(k0 + KC);                       // in flight during the arithmetic below
        for (int kk = 0; kk < KC; kk++) {
#pragma unroll
            for (int r = 0; r < KH; r++) {
                union { float4 v[NUQ]; float s[4 * NUQ]; } d;   // patch row yi+KH-1-r, from column xi*XPW
#pragma unroll
                for (int u = 0; u < NUQ; u++) d.v[u] = dyt[b][(kk * PH + yi + KH - 1 - r) * PWQ + xi * (XPW / 4) + u];
#pragma unroll
                for (int s = 0; s < KW; s++) {
                    const int R = kk * TAPS + r * KW + s;
#pragma unroll
                    for (int j4 = 0; j4 < CPW / 4; j4++) {
                        const float4 wv = *(__local float4*)(WF(b) + WADDR(R, ci * CPW + 4 * j4));
                        const float wj[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
                        for (int jj = 0; jj < 4; jj++)
#pragma unroll
                            for (int p = 0; p < XPW; p++) acc[4 * j4 + jj][p] += d.s[p + KW - 1 - s] * wj[jj];
                    }
                }
            }
        }
        if (more) STORE(b ^ 1);                         // the half last read before the previous barrier
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (h >= H) return;
#pragma unroll
    for (int j = 0; j < CPW; j++)
#pragma unroll
        for (int p = 0; p < XPW; p++)
            if (c0 + j < C && x0 + p < W) dx[((n * C + c0 + j) * H + h) * W + x0 + p] = acc[j][p];
}
