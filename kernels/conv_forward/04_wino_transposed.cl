// Stage 04: Winograd F(2x2,3x3), V transposed against local-memory bank conflicts.
//
// What changed since stage 03: V is stored (16, CIP, PP) instead of (16, PP, CIP): wino_input
// writes V[xi][ci][p], and wino_gemm keeps its block as Vs[c][p - p0]. In the inner loop
// consecutive work-items (tx) now read Vs[c][tx], consecutive words, one bank each, instead of
// Vs[tx][c], TS words apart, where the 16 work-items of a row fell into 2 of the 32 banks (the
// chapter draws and counts it). Why: conflicting accesses to one bank are served one after the
// other, so stage 03's inner loop waited up to 8 times longer on local memory than it needed.
// Loads from global memory stay coalesced: consecutive tx still read consecutive addresses.
//
// Layouts: U (16, COP, CIP), V (16, CIP, PP), M (16, COP, PP).
// NDRange of wino_gemm: (PP, COP, 16), work-group (TS, TS, 1).
// JIT parameters: TS (block side; CIP, COP, PP are multiples of it: helpers/stages.py pads them),
// WG (work-group size of the transforms, host side).

// Where the transforms (winograd_ladder.h) read tap rs of filter (ci, co) and store product xi:
// U (16, COP, CIP), V (16, CIP, PP).
#define W_AT(ci, co, rs) (((ci) * CO + (co)) * 9 + (rs))
#define U_AT(xi, co, ci) (((xi) * COP + (co)) * CIP + (ci))
#define V_AT(xi, p, ci) (((xi) * CIP + (ci)) * PP + (p))   // consecutive p: consecutive addresses
#include "winograd_ladder.h"       // wino_filter, wino_input, wino_output

#ifndef TS
#define TS 16    // block side; TS*TS work-items per group
#endif

__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void wino_gemm(__global const float* restrict U,    // (16, COP, CIP)
               __global const float* restrict V,    // (16, CIP, PP)
               __global float* restrict M,          // (16, COP, PP)
               const int CIP, const int COP, const int PP) {
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int p = get_global_id(0), co = get_global_id(1), xi = get_global_id(2);
    const int p0 = p - tx, co0 = co - ty;
    __local float Us[TS][TS];   // Us[co - co0][c]
    __local float Vs[TS][TS];   // Vs[c][p - p0]
    float m = 0.0f;
    for (int c0 = 0; c0 < CIP; c0 += TS) {
        Us[ty][tx] = U[(xi * COP + co0 + ty) * CIP + c0 + tx];   // consecutive tx: consecutive c
        Vs[ty][tx] = V[(xi * CIP + c0 + ty) * PP + p0 + tx];   // consecutive tx: consecutive p
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int c = 0; c < TS; c++)
            m += Us[ty][c] * Vs[c][tx];                           // Vs[c][tx]: consecutive words
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    M[(xi * COP + co) * PP + p] = m;
}

