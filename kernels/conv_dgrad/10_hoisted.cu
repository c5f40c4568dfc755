// CUDA twin of 10_hoisted.cl: the same algorithm, layouts and JIT parameters, for NVIDIA's
// profiler (ncu counts its shared-memory bank conflicts). Only the spelling differs:
// __shared__ for __local, threadIdx/blockIdx for the work-item functions, __syncthreads
// for barrier. Launch: grid (dim 0 / LS, dim 1) blocks of LS threads (the OpenCL NDRange
// divided by the work-group). What it computes and why: 10_hoisted.cl.

#include "course.cuh"

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
#define DYF(b) ((float*)dyt[b])
#define WF(b) ((float*)wt[b])

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

extern "C" __global__ void __launch_bounds__(LS) conv_dgrad(const float* __restrict__ dy,  // gradient w.r.t. the layer output
                const float* __restrict__ y,   // layer output after activation
                const float* __restrict__ w,   // weights, IOHW
                           float* __restrict__ dx,        // gradient w.r.t. the layer input
                           const int N, const int C, const int H, const int W,
                           const int K, const int OH, const int OW, const int PAD) {
    __shared__ float4 dyt[2][KC * PH * PWQ];
    __shared__ float4 wt[2][ROWS * WROW / 4];
    float gdy[NDY], gw[NW];

    const int lid = threadIdx.x;
    const int tiles_x = (W + TX - 1) / TX, tiles_y = (H + TY - 1) / TY;
    const int g = blockIdx.x;
    const int tx = g % tiles_x, ty = (g / tiles_x) % tiles_y, n = g / (tiles_x * tiles_y);
    const int cb0 = blockIdx.y * CB;
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
    __syncthreads();
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
                        const float4 wv = *(float4*)(WF(b) + WADDR(R, ci * CPW + 4 * j4));
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
        __syncthreads();
    }
    if (h >= H) return;
#pragma unroll
    for (int j = 0; j < CPW; j++)
#pragma unroll
        for (int p = 0; p < XPW; p++)
            if (c0 + j < C && x0 + p < W) dx[((n * C + c0 + j) * H + h) * W + x0 + p] = acc[j][p];
}
