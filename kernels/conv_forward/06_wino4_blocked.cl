// Stage 06: Winograd F(4x4,3x3), the register-blocked products of stage 05 (chapter 12a).
//
// What changed since stage 05: the tiles. Each input tile is 6x6 and gives a 4x4 output tile
// (winograd_tiles_f43.h, transforms generated from the Toom-Cook derivation with the points
// 0, 1, -1, 1/2, -2), so there are 36 matrix products instead of 16, each over a quarter as many
// tiles: 36 multiplications per 16 outputs (2.25 per output) against F(2x2)'s 16 per 4 (4 per
// output), at the price of a larger rounding error (chapter 12a measures it). wino_gemm is
// stage 05's, unchanged: the NDRange's third dimension is now 36.
//
// ROTATED = 1 (the input gradient, conv_dgrad stage 12 winograd4) reads each filter rotated by
// 180 degrees with its channels swapped, as in stage 05.
//
// Layouts: U (36, CIP, COP), V (36, CIP, PP), M (36, COP, PP).
// NDRange of wino_gemm: (PP/REG, COP/REG, 36), work-group (TN/REG, TM/REG, 1).
// JIT parameters: as stage 05: TM, TN (COP is a multiple of TM, PP of TN), REG (a multiple of 4
// dividing TM and TN), TK (CIP is a multiple of it), PREFETCH (0 or 1), WG (the transforms'
// work-group, host side). helpers/stages.py pads the scratch matrices to fit.

#include "course.h"
#include "winograd_tiles_f43.h"

#ifndef ROTATED
#define ROTATED 0   // 1: the input gradient's filter (see above)
#endif

__kernel void wino_filter(__global const float* restrict w,   // IOHW (CI, CO, 3, 3); ROTATED: (CO, CI, 3, 3)
                          __global float* restrict U,         // (36, CIP, COP)
                          const int CI, const int CO, const int CIP, const int COP) {
    const int co = get_global_id(0), ci = get_global_id(1);
    if (co >= COP) return;
    float g[9], u[36];
    for (int rs = 0; rs < 9; rs++)
#if ROTATED
        g[rs] = (ci < CI && co < CO) ? w[(co * CI + ci) * 9 + 8 - rs] : 0.0f;   // w[co][ci][2-r][2-s]
#else
        g[rs] = (ci < CI && co < CO) ? w[(ci * CO + co) * 9 + rs] : 0.0f;
#endif
    wino_filter_tile(g, u);
    for (int xi = 0; xi < 36; xi++)
        U[(xi * CIP + ci) * COP + co] = u[xi];         // consecutive co: consecutive addresses
}

__kernel void wino_input(__global const float* restrict x,    // (N, CI, IH, IW)
                         __global const float* restrict xy,   // ROTATED with an activation: its output
                         __global float* restrict V,          // (36, CIP, PP)
                         const int N, const int CI, const int IH, const int IW, const int TH,
                         const int TW, const int PADT, const int CIP, const int PP) {
    const int p = get_global_id(0), ci = get_global_id(1);
    if (p >= PP) return;
    float d[36], v[36];
    const int n = p / (TH * TW), th = (p / TW) % TH, tw = p % TW;
    const int h0 = 4 * th - PADT, w0 = 4 * tw - PADT;
    const bool live = ci < CI && p < N * TH * TW;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) {
            const int h = h0 + i, x_ = w0 + j;
            d[i * 6 + j] = (live && h >= 0 && h < IH && x_ >= 0 && x_ < IW)
                           ? GRAD_IN(x, xy, ((n * CI + ci) * IH + h) * IW + x_) : 0.0f;
        }
    wino_input_tile(d, v);
    for (int xi = 0; xi < 36; xi++)
        V[(xi * CIP + ci) * PP + p] = v[xi];           // consecutive p: consecutive addresses
}

#ifndef TM
#define TM 64    // block of M per work-group: TM output channels ...
#endif
#ifndef TN
#define TN 64    // ... x TN tiles
#endif
#ifndef REG
#define REG 4    // block of M per work-item: REG x REG; a multiple of 4 that divides TM and TN
#endif
#ifndef TK
#define TK 8     // input channels per local-memory step
#endif
#ifndef PREFETCH
#define PREFETCH 1  // 1: fetch the next step's blocks into registers while computing this one
#endif
#define NTX (TN / REG)    // work-items along the tiles (dimension 0)
#define NTY (TM / REG)    // work-items along the output channels (dimension 1)
#define NW (NTX * NTY)    // work-items per group
#define NV (REG / 4)      // float4s per side of a work-item's block
#define LU CEIL_DIV(TK * TM / 4, NW)   // float4s of U each work-item copies per step
#define LV CEIL_DIV(TK * TN / 4, NW)   // float4s of V each work-item copies per step

// One step's share of the U and V blocks of this work-item, from global memory into registers:
// the group's consecutive work-items read consecutive float4s (coalesced).
inline void fetch_blocks(float4 ru[LU], float4 rv[LV], __global const float4* U4, __global const float4* V4,
                         const int c0, const int tid, const int co0, const int p0, const int COP, const int PP) {
    for (int l = 0; l < LU; l++) {
        const int e = tid + l * NW;
        if (e < TK * TM / 4) ru[l] = U4[((c0 + e / (TM / 4)) * COP + co0) / 4 + e % (TM / 4)];
    }
    for (int l = 0; l < LV; l++) {
        const int e = tid + l * NW;
        if (e < TK * TN / 4) rv[l] = V4[((c0 + e / (TN / 4)) * PP + p0) / 4 + e % (TN / 4)];
    }
}

__kernel __attribute__((reqd_work_group_size(NTX, NTY, 1)))
void wino_gemm(__global const float* restrict U,    // (36, CIP, COP)
               __global const float* restrict V,    // (36, CIP, PP)
               __global float* restrict M,          // (36, COP, PP)
               const int CIP, const int COP, const int PP) {
    const int tx = get_local_id(0), ty = get_local_id(1), xi = get_group_id(2);
    const int tid = ty * NTX + tx;
    const int p0 = get_group_id(0) * TN, co0 = get_group_id(1) * TM;
    __local float4 Us[TK][TM / 4];     // Us[c][(co - co0) / 4]
    __local float4 Vs[TK][TN / 4];     // Vs[c][(p - p0) / 4]
    __global const float4* U4 = (__global const float4*)(U + xi * CIP * COP);
    __global const float4* V4 = (__global const float4*)(V + xi * CIP * PP);

    float acc[REG][REG];
    for (int i = 0; i < REG; i++)
        for (int j = 0; j < REG; j++)
            acc[i][j] = 0.0f;

    float4 ru[LU], rv[LV];
#if PREFETCH
    fetch_blocks(ru, rv, U4, V4, 0, tid, co0, p0, COP, PP);
#endif
    for (int c0 = 0; c0 < CIP; c0 += TK) {
#if !PREFETCH
        fetch_blocks(ru, rv, U4, V4, c0, tid, co0, p0, COP, PP);
#endif
        for (int l = 0; l < LU; l++) {                 // registers -> local memory
            const int e = tid + l * NW;
            if (e < TK * TM / 4) Us[e / (TM / 4)][e % (TM / 4)] = ru[l];
        }
        for (int l = 0; l < LV; l++) {
            const int e = tid + l * NW;
            if (e < TK * TN / 4) Vs[e / (TN / 4)][e % (TN / 4)] = rv[l];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#if PREFETCH
        if (c0 + TK < CIP)                             // the next step's loads are in flight ...
            fetch_blocks(ru, rv, U4, V4, c0 + TK, tid, co0, p0, COP, PP);
#endif
#pragma unroll
        for (int c = 0; c < TK; c++) {
            float a[REG], b[REG];
#pragma unroll
            for (int v = 0; v < NV; v++) {
                const float4 ua = Us[c][v * NTY + ty], vb = Vs[c][v * NTX + tx];   // 128-bit local loads
                a[4 * v] = ua.x; a[4 * v + 1] = ua.y; a[4 * v + 2] = ua.z; a[4 * v + 3] = ua.w;
                b[4 * v] = vb.x; b[4 * v + 1] = vb.y; b[4 * v + 2] = vb.z; b[4 * v + 3] = vb.w;
            }
#pragma unroll
            for (int i = 0; i < REG; i++)
#pragma unroll
                for (int j = 0; j < REG; j++)
                    acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);                  // ... while these products run
    }
    for (int i = 0; i < REG; i++) {
        const int co = co0 + ((i / 4) * NTY + ty) * 4 + i % 4;
        for (int v = 0; v < NV; v++) {
            const int p = p0 + (v * NTX + tx) * 4;
            vstore4((float4)(acc[i][4 * v], acc[i][4 * v + 1], acc[i][4 * v + 2], acc[i][4 * v + 3]),
                    0, M + (xi * COP + co) * PP + p);
        }
    }
}

__kernel void wino_output(__global const float* restrict M,  // (36, COP, PP)
                          __global float* restrict y,        // (N, CO, OH, OW)
                          const int N, const int CO, const int OH, const int OW, const int TH,
                          const int TW, const int COP, const int PP) {
    const int p = get_global_id(0), co = get_global_id(1);
    if (p >= N * TH * TW || co >= CO) return;
    float m[36], t[16];
    for (int xi = 0; xi < 36; xi++)
        m[xi] = M[(xi * COP + co) * PP + p];
    wino_output_tile(m, t);
    const int n = p / (TH * TW), th = (p / TW) % TH, tw = p % TW;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            const int oh = 4 * th + i, ow = 4 * tw + j;
            if (oh < OH && ow < OW)                 // a partial tile at the bottom or right edge
                y[((n * CO + co) * OH + oh) * OW + ow] = t[i * 4 + j];
        }
}
