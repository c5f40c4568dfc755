// Stage 09: a tile in local memory.
//
// What changed since stage 08: work-items stop fetching their own copies of dy and w from global
// memory. A work-group owns a tile of the input gradient, TY x TX positions of one image times CB
// input channels, one work-item per (position, channel). It walks the output channels in chunks
// of KC. For each chunk the whole group first copies, cooperatively and coalesced, the piece of
// dy its tile needs (KC x PH x PW: the TY x TX window grown by the kernel's halo, the activation
// derivative applied on the way, zeros outside the tensor) and the KC x KH x KW weights of its CB
// channels into local memory; a barrier; then every work-item sums its position from local
// memory, with no bounds checks in the inner loop (the zeros stand in for missing outputs); a
// barrier before the next chunk overwrites the tile.
//
// Why: in stage 08 every work-item reads each dy value it needs from global memory (caches
// catch some of it); neighbouring work-items need the same values. Here each dy value of the
// patch is read from global memory once per work-group and then KH x KW x CB times from local
// memory, each weight once per work-group and then TY x TX times. Local memory is on the
// compute unit: low latency, high bandwidth, shared by the group.
//
// Memory safety: the copy reads dy only at (k < K, 0 <= oh < OH, 0 <= ow < OW) and w only at
// (c < C, k < K); everything else is stored as 0. Positions outside H x W and channels >= C
// compute on zeros and are not stored.
//
// Measured: notebooks/09_local_memory.ipynb (this device, and the GPU runs recorded in results/).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// Local: dyt[KC][PH][PW], wt[CB][KC][KH*KW] (w's own order: the copy is contiguous per channel).
// NDRange: dim 0 = tile (n, tile row, tile column) x LS work-items, dim 1 = block of CB channels.
// JIT parameters: KH, KW, ACT (from the problem); STRIDE must be 1 (the host falls back to stage
// 08 otherwise); TX, TY (tile), CB (channels per group), KC (chunk of output channels);
// LS = TX*TY*CB work-items per group (host: helpers/launch/local.py checks the limits).

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
#define LS (TX * TY * CB)            // work-items per group

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
    const int xi = lid % TX, yi = (lid / TX) % TY, ci = lid / (TX * TY);
    const int h = ty * TY + yi, x = tx * TX + xi, c = cb0 + ci;
    const int oh0 = ty * TY + PAD - (KH - 1);           // dy row of patch row 0
    const int ow0 = tx * TX + PAD - (KW - 1);           // dy column of patch column 0

    float acc = 0.0f;
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
        // dx[h][x] += dy[h + PAD - r][x + PAD - s] * w[r][s]: patch row yi + KH-1-r, column xi + KW-1-s.
        for (int kk = 0; kk < KC; kk++)
#pragma unroll
            for (int r = 0; r < KH; r++)
#pragma unroll
                for (int s = 0; s < KW; s++)
                    acc += dyt[kk][yi + KH - 1 - r][xi + KW - 1 - s] * wt[ci][kk][r * KW + s];
        barrier(CLK_LOCAL_MEM_FENCE);                   // before the next chunk overwrites the tile
    }
    if (h < H && x < W && c < C)
        dx[((n * C + c) * H + h) * W + x] = acc;
}
