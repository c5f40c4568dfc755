// The kernel of chapter 10's stages (conv_dgrad/10_transposed, 10_padded, 10_swizzle, 10_hoisted
// and their CUDA twins), one text for both languages (course.h's macros spell what they spell
// differently): 09_prefetch's double-buffered chunk loop with the weight slab stored transposed,
// [depth*tap][channel], and read 16 bytes at a time. It reads the sizes of dgrad_slab.h, the
// stage's layouts (DY_AT, WROW, WADDR) and its copy: COPY_ONCE (before the chunk loop), FETCH(k0)
// (chunk k0 from global memory into registers) and STORE(b) (the registers into half b of local
// memory), from dgrad_slab_copy.h or 10_hoisted's own.
// JIT parameters: those of dgrad_slab.h; ACT (course.h).
#ifndef DGRAD_SLAB_KERNEL_H
#define DGRAD_SLAB_KERNEL_H

KERNEL_LS(LS)
void conv_dgrad(GLOBAL const float* RESTRICT dy,  // gradient w.r.t. the layer output
                GLOBAL const float* RESTRICT y,   // layer output after activation
                GLOBAL const float* RESTRICT w,   // weights, IOHW
                GLOBAL float* RESTRICT dx,        // gradient w.r.t. the layer input
                const int N, const int C, const int H, const int W,
                const int K, const int OH, const int OW, const int PAD) {
    LOCAL_MEM float4 dyt[2][KC * PH * PWQ];
    LOCAL_MEM float4 wt[2][ROWS * WROW / 4];
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
    COPY_ONCE

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
                        const float4 wv = *(LOCAL_PTR float4*)(WF(b) + WADDR(R, ci * CPW + 4 * j4));
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
