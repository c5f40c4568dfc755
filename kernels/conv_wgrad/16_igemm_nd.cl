// conv_wgrad stage 16_igemm_nd: the weight gradient of a convolution of any shape as implicit
// GEMMs on the course's tile loop, one per group and slice of the sum, all in one launch, the
// slices added in a fixed order.
//
// What changed since stage 16 any_shape: there, one work-item per weight walked the whole sum
// over (n, output position) alone, reading x and dy' from global memory once per product. Per
// group g the weight gradient is stage 06's matrix product:
//     dw_g^T (K/G x C/G*taps) = dy'_g (K/G x N*OV) . cols (N*OV x C/G*taps)
// with the reduction over the output positions q = (n, oa, od, oh, ow), so it runs as stage 06
// does: both operands copied along the reduction (GEMM_B_KMAJOR), a work-item's position of a
// step decoded once per step (GEMM_STEP) and its columns' taps once (GEMM_STEP_STATE), the
// reduction cut into slices of SLICE positions whose partial sums a second kernel (wgrad_sum)
// adds in slice order: the same bits on every run. What is new is common/igemm_nd.h's index
// arithmetic:
//   - groups batched in one launch: dim 2 of the NDRange is (group, slice); each group's GEMM
//     reads its own channel slices of x and dy' and writes its own weights;
//   - a column of B is (c', tap) with the tap's shift tap*DIL per axis (dilation), a step's
//     position its input origin o*STRIDE - PAD per axis (strides and padding per axis), for
//     ranks 1-4: an element of B is a bounds test per axis and one load.
//
// Layouts: x (N,C,A,D,H,W); dy, y (N,K,OA,OD,OH,OW); dw (C,K/G,KA,KD,KH,KW); partials (SPLITS,
// C*K/G*taps), each slice's sums in dw's order.
// NDRange: igemm_nd_wgrad (ceil(C/G*taps/TN) * TN/WN, ceil((K/G)/TM) * TM/WM, G * SPLITS),
// work-group (TN/WN, TM/WM); wgrad_sum (C*K/G*taps padded to its work-group).
// JIT parameters: igemm_nd.h's, ACT; TM, TN, TK, WM, WN, GEMM_VEC_A (float4 loads of dy' where
// OV % 4 == 0), GEMM_LDS4, GEMM_PREFETCH (gemm_core.h); SLICE (positions per slice, a multiple of
// TK); the slice count SPLITS = ceil(N*OV / SLICE) is an int argument. helpers/launch/igemm_nd.py
// checks that TK divides the work-group, and fits the tile to the group's channels.

#ifndef SLICE
#define SLICE 1024
#endif

#define GEMM_B_KMAJOR 1
#include "igemm_nd.h"
#include "wgrad_igemm.h"   // grad_in4: four consecutive values of dy'
#undef GEMM_A
#undef GEMM_A4

#define NO_TAP (-(1 << 30))  // a slot past the last column: its shift fails every bounds test

// A work-item's B slots: slot p holds column n0 + (tid + p*WG)/TK of every step (gemm_core.h).
#define B_SLOTS CEIL_DIV(TK * TN, GEMM_WG)

// Each slot's column (c', tap), decoded once: its offset in x from the position's own (x_off),
// and the tap's shift tap*DIL per axis for the bounds tests.
#define GEMM_STEP_STATE                                                                         \
    int x_off[B_SLOTS];                                                                         \
    int4 shift[B_SLOTS];                                                                        \
    _Pragma("unroll") for (int p = 0; p < B_SLOTS; p++) {                                       \
        const int i = tid + p * GEMM_WG, col = n0 + i / TK;                                     \
        const bool in = i < TK * TN && col < NCOL;                                              \
        shift[p] = in ? nd_shift(col % TAPS) : (int4)(NO_TAP);                                  \
        x_off[p] = in ? col / TAPS * V + nd_flat(shift[p], iext) : 0;                           \
    }                                                                                           \
    int x_q = 0, dy_q = 0;                                                                      \
    int4 origin = (int4)(0);                                                                    \
    bool q_in = false, a_in = false;

// A's elements of a work-item lie in one position of the step too, as in stage 06: q0 + k0 + tid %
// TK (the same as B's), or with float4 loads the 4 from q0 + k0 + 4*(tid % (TK/4)).
#define A_POS (GEMM_VEC_A ? 4 * (tid % (TK / 4)) : tid % TK)

// This work-item's positions of step k0, decoded once: B's as the input origin of its output
// position and that origin's offset in x (in the group's first channel); A's as its offset in dy.
#define GEMM_STEP(k0) do {                                                                      \
        const int q_ = q0 + (k0) + tid % TK, n_ = q_ / OV;                                      \
        q_in = q_ < q1;                                                                         \
        origin = nd_origin(nd_unflat(q_ - n_ * OV, oext), pad);                                 \
        x_q = x_group + n_ * C * V + nd_flat(origin, iext);                                     \
        const int qa_ = q0 + (k0) + A_POS, na_ = qa_ / OV;                                      \
        a_in = qa_ < q1;                                                                        \
        dy_q = dy_group + na_ * K * OV + qa_ - na_ * OV;     /* dy'[n][g*K/G][o] */             \
    } while (0)

// A[k'][q] = dy'[n][g*K/G + k'][o] at this work-item's position of the step.
#define GEMM_A(k, q) (((k) < KG && a_in) ? GRAD_IN(dy, y, dy_q + (k) * OV) : 0.0f)
#define GEMM_A4(k, q) (((k) < KG && a_in) ? grad_in4(dy, y, dy_q + (k) * OV) : (float4)(0.0f))

// B[q][(c', tap)] of slot p: x at the input position the tap reads, 0 in the padding.
#define GEMM_BK(p, q, col) ((q_in && nd_inside(origin + shift[p], iext)) ? x[x_q + x_off[p]] : 0.0f)

#define GEMM_ARGS __global const float* restrict x, __global const float* restrict dy,           \
                  __global const float* restrict y, const int C, const int K, const int KG,        \
                  const int NCOL, const int V, const int OV, const int4 iext, const int4 oext,     \
                  const int4 pad, const int x_group, const int dy_group, const int q0, const int q1

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void igemm_nd_wgrad(__global const float* restrict x,   // the layer's input
                    __global const float* restrict dy,  // gradient w.r.t. the layer output
                    __global const float* restrict y,   // layer output after activation
                    __global float* restrict partials,  // (SPLITS, C*K/G*taps)
                    ND_ARGS, const int SPLITS) {
    GEMM_TILES(As, Bs);
    const int g = get_group_id(2) / SPLITS, slice = get_group_id(2) % SPLITS;
    const int CG = C / G, KG = K / G, NCOL = CG * TAPS;
    const int4 iext = (int4)(A, D, H, W), oext = (int4)(OA, OD, OH, OW);
    const int V = A * D * H * W, OV = OA * OD * OH * OW;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    const int q0 = slice * SLICE, q1 = min(q0 + SLICE, N * OV);
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(x, dy, y, C, K, KG, NCOL, V, OV, iext, oext, (int4)(PA, PD, PH, PW), g * CG * V, g * KG * OV, q0, q1,
                    m0, n0, q1 - q0, As, Bs, acc);
    // this slice's sums in dw's order: dw[g*C/G + c'][k'][tap] (columns (c', tap), rows k')
    __global float* out = partials + slice * (C * KG * TAPS) + g * CG * KG * TAPS;
    for (int j = 0; j < WN; j++) {
        const int col = n0 + GEMM_COL(j);
        if (col >= NCOL) continue;
        const int at = col / TAPS * KG * TAPS + col % TAPS;
        for (int i = 0; i < WM; i++) {
            const int k = m0 + GEMM_ROW(i);
            if (k < KG) out[at + k * TAPS] = acc[i][j];
        }
    }
}

// wgrad_sum: each weight's SPLITS slice sums, added in slice order. It adds C*K*KH*KW values; the
// launcher passes C*KA*KD as its C and K/G as its K, so that they are all C*K/G*taps weights.
#include "wgrad_sum.h"
