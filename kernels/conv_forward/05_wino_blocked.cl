// Stage 05: Winograd F(2x2,3x3), register-blocked matrix products with vector loads.
//
// What changed since stage 04: wino_gemm. A work-group of (TM/REG) x (TN/REG) work-items
// computes a TM x TN block of M[xi] (output channels x tiles, 64 x 64 by default); each work-item
// keeps a REG x REG block of it in registers (4 x 4: 16 accumulators). Per step of TK input
// channels the group copies a TK x TM block of U and a TK x TN block of V into local memory with
// float4 loads; then, per channel, each work-item reads REG values of U and REG values of V as
// float4s (two 128-bit local loads for REG = 4) and does REG*REG multiply-adds with them.
// Why: in stage 04 each multiply-add needed two local-memory loads; here 16 share two float4
// loads (64 share four with REG = 8), so far fewer local-memory accesses per multiply-add.
// The blocks pass through registers: with PREFETCH = 1 the next step's global loads are issued
// before this step's products, so their latency overlaps the arithmetic.
// U is now stored (16, CIP, COP) (wino_filter writes it transposed) so that its blocks, like V's,
// are rows of consecutive output channels: one float4 holds 4 of them.
// A work-item's REG columns are REG/4 float4s spaced (TN/REG)*4 floats apart (not REG consecutive
// floats), so the float4 loads of neighbouring work-items are consecutive: no bank conflicts.
//
// ROTATED = 1 (the input gradient, conv_dgrad stage 12) reads each filter rotated by 180 degrees
// with its input and output channels swapped, and wino_input applies the activation's derivative
// to what it reads (GRAD_IN): the input gradient is then this same forward convolution of dy.
//
// Layouts: U (16, CIP, COP), V (16, CIP, PP), M (16, COP, PP).
// NDRange of wino_gemm: (PP/REG, COP/REG, 16), work-group (TN/REG, TM/REG, 1).
// JIT parameters: TM, TN (block of M per work-group; COP is a multiple of TM, PP of TN), REG (a
// multiple of 4 dividing TM and TN), TK (channels per step; CIP is a multiple of it), PREFETCH
// (0 or 1), WG (the
// transforms' work-group, host side). helpers/stages.py pads the scratch matrices to fit.

#ifndef ROTATED
#define ROTATED 0   // 1: the input gradient's filter (see above)
#endif
// Where the transforms (winograd_ladder.h) read tap rs of filter (ci, co) and store product xi:
// U (16, CIP, COP), V (16, CIP, PP).
#if ROTATED
#define W_AT(ci, co, rs) (((co) * CI + (ci)) * 9 + 8 - (rs))    // w[co][ci][2-r][2-s]
#else
#define W_AT(ci, co, rs) (((ci) * CO + (co)) * 9 + (rs))
#endif
#define U_AT(xi, co, ci) (((xi) * CIP + (ci)) * COP + (co))   // consecutive co: consecutive addresses
#define V_AT(xi, p, ci) (((xi) * CIP + (ci)) * PP + (p))   // consecutive p: consecutive addresses
#include "winograd_ladder.h"       // wino_filter, wino_input, wino_output

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
void wino_gemm(__global const float* restrict U,    // (16, CIP, COP)
               __global const float* restrict V,    // (16, CIP, PP)
               __global float* restrict M,          // (16, COP, PP)
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

