// Stage 02: Winograd F(2x2,3x3), whole tiles in registers.
//
// What changed since stage 01: a work-item of wino_input loads its 4x4 input tile into registers
// once and produces all 16 values of V for it (winograd_tiles.h: B^T d B with additions only);
// wino_output reads the 16 values of M of one tile and writes its whole 2x2 output; wino_filter
// transforms one whole 3x3 filter. Why: in stage 01 the 16 work-items of one tile each read the
// same 16 inputs, and the 4 work-items of one output tile each read the same 16 values of M.
// The matrix product wino_gemm is unchanged: it is what stage 03 attacks.
//
// Layouts as in stage 01: U (16, COP, CIP), V (16, PP, CIP), M (16, COP, PP).
// NDRange: transforms: dim 0 = tile p or output channel co (padded to WG), dim 1 = channel;
// wino_gemm: one dimension, one work-item per element of M, padded to WG.
// JIT parameters: WG (work-group size, host side).

// Where the transforms (winograd_ladder.h) read tap rs of filter (ci, co) and store product xi:
// U (16, COP, CIP), V (16, PP, CIP).
#define W_AT(ci, co, rs) (((ci) * CO + (co)) * 9 + (rs))
#define U_AT(xi, co, ci) (((xi) * COP + (co)) * CIP + (ci))
#define V_AT(xi, p, ci) (((xi) * PP + (p)) * CIP + (ci))
#include "winograd_ladder.h"       // wino_filter, wino_input, wino_output

__kernel void wino_gemm(__global const float* restrict U,    // (16, COP, CIP)
                        __global const float* restrict V,    // (16, PP, CIP)
                        __global float* restrict M,          // (16, COP, PP)
                        const int CIP, const int COP, const int PP) {
    const int idx = get_global_id(0);
    if (idx >= 16 * COP * PP) return;
    const int p = idx % PP, co = (idx / PP) % COP, xi = idx / (PP * COP);
    float m = 0.0f;
    for (int ci = 0; ci < CIP; ci++)
        m += U[(xi * COP + co) * CIP + ci] * V[(xi * PP + p) * CIP + ci];
    M[idx] = m;
}

