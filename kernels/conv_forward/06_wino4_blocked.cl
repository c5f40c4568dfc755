// Stage 06: Winograd F(4x4,3x3), its 36 products through the course GEMM (chapter 12a).
//
// What changed since stage 05: the tiles, and where the products come from. Each 6x6 input tile
// gives a 4x4 output tile (winograd_tiles_f43.h): 36 multiplications per 16 outputs (2.25 per
// output, against F(2x2)'s 4), at the price of a larger rounding error (chapter 12a measures
// it). The transforms are shared, written once for any tile size (winograd_transforms.h). The
// products M[xi] = U[xi] . V[xi] are not a Winograd GEMM of their own: they are the course GEMM's
// tile loop (gemm_core.h, chapter 11) with A = U[xi], B = V[xi], one batch entry xi per
// get_group_id(2). U is stored (36, COP, CIP) so that both operands come in as float4 loads.
//
// ROTATED = 1 (the input gradient, conv_dgrad stage 12 winograd4) reads each filter rotated by
// 180 degrees with its channels swapped, as in stage 05.
// NDRange of wino_gemm: (PP/TN * TN/WN, COP/TM * TM/WM, 36), work-group (TN/WN, TM/WM, 1).
// JIT parameters: WINO_CHANNEL_MAJOR (V and M's layout, winograd_transforms.h); gemm_core.h's
// TM, TN, TK, WM, WN, GEMM_LDS4, GEMM_PREFETCH (COP is a multiple
// of TM, PP of TN, CIP of TK: helpers/launch/winograd.py pads them; TK and TN multiples of 4), WG
// (the transforms' work-group, host side); WINO_VEC_OUT (from the problem: OW % 4 == 0).

#include "winograd_tiles_f43.h"
#include "winograd_transforms.h"

// The products: A = U[xi] (COP x CIP), B = V[xi] (CIP x PP), both padded to whole blocks, so
// every fetch is inside and 4-aligned (CIP and PP are multiples of 4).
#define GEMM_ARGS __global const float* restrict U, __global const float* restrict V, const int CIP, const int PP
#define GEMM_VEC_A 1
#define GEMM_VEC_B 1
#define GEMM_A4(m, k) vload4(0, U + (m) * CIP + (k))
#define GEMM_B4(k, n) vload4(0, V + (k) * WINO_ROW_STRIDE + (n))   // V points at product xi
#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void wino_gemm(__global const float* restrict U,    // (36, COP, CIP)
               __global const float* restrict V,    // (36, CIP, PP); channel-major (CIP, 36, PP)
               __global float* restrict M,          // (36, COP, PP); channel-major (COP, 36, PP)
               const int CIP, const int COP, const int PP) {
    GEMM_TILES(As, Bs);
    const int xi = get_group_id(2), m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(U + xi * COP * CIP, V + WINO_BASE(xi, CIP), CIP, PP, m0, n0, CIP, As, Bs, acc);
    for (int i = 0; i < WM; i++) {
        __global float* row = M + WINO_IDX(xi, m0 + GEMM_ROW(i), COP, n0);
#if GEMM_LDS4      // a work-item's columns come in runs of 4: one 16-byte store per run
        for (int j = 0; j < WN; j += 4)
            vstore4((float4)(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]), 0, row + GEMM_COL(j));
#else
        for (int j = 0; j < WN; j++) row[GEMM_COL(j)] = acc[i][j];
#endif
    }
}
