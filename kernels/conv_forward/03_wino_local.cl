// Stage 03: Winograd F(2x2,3x3), the 16 matrix products tiled through local memory.
//
// What changed since stage 02: wino_gemm. A work-group of TS x TS work-items computes a TS x TS
// block of one M[xi] (output channels co x tiles p). It walks over the input channels TS at a
// time: the group copies a TS x TS block of U and one of V into local memory, synchronises, and
// every work-item takes its TS products from there. Why: in stage 02 every element of U was
// read from global memory by all PP work-items of its row, every element of V by all COP of its
// column; now each is read once per work-group. U, V and M are padded (with zeros, by the
// transforms) to multiples of TS, so the product needs no bounds checks.
// The catch: work-items next to each other (consecutive tx) read Vs[tx][c], TS floats apart:
// the same local-memory bank (stage 04).
//
// Layouts as in stage 02: U (16, COP, CIP), V (16, PP, CIP), M (16, COP, PP).
// NDRange of wino_gemm: (PP, COP, 16), work-group (TS, TS, 1).
// JIT parameters: TS (block side; CIP, COP, PP are multiples of it: helpers/stages.py pads them),
// WG (work-group size of the transforms, host side).

#include "course.h"
#include "winograd_tiles.h"

__kernel void wino_filter(__global const float* restrict w,   // IOHW (CI, CO, 3, 3)
                          __global float* restrict U,         // (16, COP, CIP)
                          const int CI, const int CO, const int CIP, const int COP) {
    const int co = get_global_id(0), ci = get_global_id(1);
    if (co >= COP) return;
    float g[9], u[16];
    for (int rs = 0; rs < 9; rs++)
        g[rs] = (ci < CI && co < CO) ? w[(ci * CO + co) * 9 + rs] : 0.0f;
    wino_filter_tile(g, u);
    for (int xi = 0; xi < 16; xi++)
        U[(xi * COP + co) * CIP + ci] = u[xi];
}

__kernel void wino_input(__global const float* restrict x,    // (N, CI, IH, IW)
                         __global const float* restrict xy,   // unused by the forward pass
                         __global float* restrict V,          // (16, PP, CIP)
                         const int N, const int CI, const int IH, const int IW, const int TH,
                         const int TW, const int PADT, const int CIP, const int PP) {
    const int p = get_global_id(0), ci = get_global_id(1);
    if (p >= PP) return;
    float d[16], v[16];
    const int n = p / (TH * TW), th = (p / TW) % TH, tw = p % TW;
    const int h0 = 2 * th - PADT, w0 = 2 * tw - PADT;
    const bool live = ci < CI && p < N * TH * TW;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            const int h = h0 + i, x_ = w0 + j;
            d[i * 4 + j] = (live && h >= 0 && h < IH && x_ >= 0 && x_ < IW)
                           ? GRAD_IN(x, xy, ((n * CI + ci) * IH + h) * IW + x_) : 0.0f;
        }
    wino_input_tile(d, v);
    for (int xi = 0; xi < 16; xi++)
        V[(xi * PP + p) * CIP + ci] = v[xi];
}

#ifndef TS
#define TS 16    // block side; TS*TS work-items per group
#endif

__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void wino_gemm(__global const float* restrict U,    // (16, COP, CIP)
               __global const float* restrict V,    // (16, PP, CIP)
               __global float* restrict M,          // (16, COP, PP)
               const int CIP, const int COP, const int PP) {
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int p = get_global_id(0), co = get_global_id(1), xi = get_global_id(2);
    const int p0 = p - tx, co0 = co - ty;
    __local float Us[TS][TS];   // Us[co - co0][c]
    __local float Vs[TS][TS];   // Vs[p - p0][c]
    float m = 0.0f;
    for (int c0 = 0; c0 < CIP; c0 += TS) {
        Us[ty][tx] = U[(xi * COP + co0 + ty) * CIP + c0 + tx];   // consecutive tx: consecutive c
        Vs[ty][tx] = V[(xi * PP + p0 + ty) * CIP + c0 + tx];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int c = 0; c < TS; c++)
            m += Us[ty][c] * Vs[tx][c];                           // Vs[tx][c]: TS floats apart
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    M[(xi * COP + co) * PP + p] = m;
}

__kernel void wino_output(__global const float* restrict M,  // (16, COP, PP)
                          __global float* restrict y,        // (N, CO, OH, OW)
                          const int N, const int CO, const int OH, const int OW, const int TH,
                          const int TW, const int COP, const int PP) {
    const int p = get_global_id(0), co = get_global_id(1);
    if (p >= N * TH * TW || co >= CO) return;
    float m[16], t[4];
    for (int xi = 0; xi < 16; xi++)
        m[xi] = M[(xi * COP + co) * PP + p];
    wino_output_tile(m, t);
    const int n = p / (TH * TW), th = (p / TW) % TH, tw = p % TW;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            const int oh = 2 * th + i, ow = 2 * tw + j;
            if (oh < OH && ow < OW)                 // a partial tile at the bottom or right edge
                y[((n * CO + co) * OH + oh) * OW + ow] = t[i * 2 + j];
        }
}
