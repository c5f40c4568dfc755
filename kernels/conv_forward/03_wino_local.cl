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

// Where the transforms (winograd_ladder.h) read tap rs of filter (ci, co) and store product xi:
// U (16, COP, CIP), V (16, PP, CIP).
#define W_AT(ci, co, rs) (((ci) * CO + (co)) * 9 + (rs))
#define U_AT(xi, co, ci) (((xi) * COP + (co)) * CIP + (ci))
#define V_AT(xi, p, ci) (((xi) * PP + (p)) * CIP + (ci))
#include "winograd_ladder.h"       // wino_filter, wino_input, wino_output

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

