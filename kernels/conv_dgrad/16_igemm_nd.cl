// Stage 16_igemm_nd: the input gradient of a convolution of any shape as implicit GEMMs on the
// course's tile loop, one per group and phase, all in one launch.
//
// What changed since stage 16 any_shape: there, each work-item asked every output channel of its
// group and every tap whether it reached its input element, reading dy and w from global memory
// once per product, and nothing was shared between work-items. A grouped, dilated or 3-D layer is
// still a matrix product per group, chapter 11's: dx_g (C/G x N*V) = w_g (C/G x K/G*taps) . dy'
// columns, so it runs on gemm_core.h's tiles (a TM x TN block of dx per work-group, WM x WN per
// work-item in registers, each gathered value of dy' used TM times from local memory), with the
// index arithmetic of common/igemm_nd.h:
//   - groups batched in one launch: dim 2 of the NDRange is the group (and the phase), and each
//     group's GEMM reads its own slices of w and dy' (channels g*C/G .., g*K/G ..);
//   - dilation, strides and padding per axis, and ranks 1-4, in the gather: a column of B is an
//     input position (n, a, d, h, w), decoded once per work-item (GEMM_B_COL), a row a pair
//     (output channel, tap);
//   - strides by phases (igemm_nd.h): the input positions of one residue mod the stride, per axis,
//     form one GEMM over only the taps that reach them (chapter 11's igemm_phases for any stride,
//     dilation and rank), so a 3x3x3 layer at stride 2 multiplies 27 of 64 padded taps instead of
//     27 of 216. Both operands are gathered by the phase's taps: row m of A is w[c][k'][r0 + j*TS].
// Where a phase has no tap (a dilation sharing a factor with the stride), its reduction is empty
// and its input positions get 0.
//
// Layouts: dy, y (N,K,OA,OD,OH,OW); w (C,K/G,KA,KD,KH,KW); dx (N,C,A,D,H,W), all row-major.
// NDRange: (ceil(N*Vp/TN) * TN/WN, ceil((C/G)/TM) * TM/WM, G * PHASES), work-group (TN/WN, TM/WM),
// Vp the largest phase's input positions; a work-group past its own phase's positions returns.
// JIT parameters: igemm_nd.h's (RANK, the taps, strides, paddings, dilations and the phase
// constants), ACT; TM, TN, TK, WM, WN, GEMM_LDS4, GEMM_PREFETCH (gemm_core.h: the work-group a
// multiple of TN, since each work-item fetches B in one column). helpers/launch/igemm_nd.py fits
// the tile to the group's channels (a ResNeXt group of 4 channels gets TM = 4 or 8, not 64).

#include "igemm_nd.h"

// A[m][j'] and B[j'][column] of the phase's GEMM, j' = k' * PHASE_TAPS + j (k' the group's
// output channel, j the phase's tap): 0 past the matrices and where the phase lacks tap j.
#define GEMM_ARGS __global const float* restrict dy, __global const float* restrict y,           \
                  __global const float* restrict w, const int CG, const int KG, const int KRED,    \
                  const int OV, const int4 oext, const nd_phase ph, const int w_group,             \
                  const bool col_ok, const int dy_col, const int4 out_col
#define GEMM_A(m, kk) dgrad_weight(w, m, kk, CG, KG, KRED, w_group, &ph)
#define GEMM_B(kk, n) dgrad_gather(dy, y, kk, KRED, OV, oext, &ph, col_ok, dy_col, out_col)

// w[c][k'][tap] for the group's m-th input channel c, tap r0 + j*TS of the phase
inline float dgrad_weight(__global const float* restrict w, const int m, const int kk, const int CG,
                          const int KG, const int KRED, const int w_group, const nd_phase* ph) {
    const int kl = kk / PHASE_TAPS;
    const int4 j = nd_phase_tap(kk % PHASE_TAPS);
    if (m >= CG || kk >= KRED || !nd_has_tap(j, ph->taps)) return 0.0f;
    return w[w_group + (m * KG + kl) * TAPS + nd_phase_weight_tap(j, ph)];
}

// dy' at the output position the phase's tap j reads for this work-item's input position, in
// output channel k' of the group; 0 outside dy
inline float dgrad_gather(__global const float* restrict dy, __global const float* restrict y,
                          const int kk, const int KRED, const int OV, const int4 oext,
                          const nd_phase* ph, const bool col_ok, const int dy_col, const int4 out_col) {
    const int kl = kk / PHASE_TAPS;
    const int4 j = nd_phase_tap(kk % PHASE_TAPS);
    const int4 o = nd_phase_read(out_col, j);
    if (!col_ok || kk >= KRED || !nd_has_tap(j, ph->taps) || !nd_inside(o, oext)) return 0.0f;
    return GRAD_IN(dy, y, dy_col + kl * OV + nd_flat(o, oext));
}

#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void conv_dgrad(__global const float* restrict dy,  // gradient w.r.t. the layer output
                __global const float* restrict y,   // layer output after activation
                __global const float* restrict w,   // weights (C,K/G,KA,KD,KH,KW)
                __global float* restrict dx,        // gradient w.r.t. the layer input
                ND_ARGS) {
    GEMM_TILES(As, Bs);
    const int g = get_group_id(2) / PHASES, CG = C / G, KG = K / G;
    const int4 iext = (int4)(A, D, H, W), oext = (int4)(OA, OD, OH, OW);
    const nd_phase ph = nd_phase_of(get_group_id(2) % PHASES, iext, (int4)(PA, PD, PH, PW));
    const int V = A * D * H * W, OV = OA * OD * OH * OW;
    const int PV = ph.count.x * ph.count.y * ph.count.z * ph.count.w, NCOL = N * PV;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    if (n0 >= NCOL) return;              // the whole work-group: past its phase's positions
    // no tap reaches the phase on some axis: its input positions get 0 (an empty reduction)
    const bool reached = ph.taps.x > 0 && ph.taps.y > 0 && ph.taps.z > 0 && ph.taps.w > 0;
    const int KRED = KG * PHASE_TAPS;
    // the column of B this work-item fetches, decoded once: image n, position out0 + i in the phase
    const int col = n0 + GEMM_B_COL, n = col / PV;
    const int4 out_col = ph.out0 + nd_unflat(col - n * PV, ph.count);
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(dy, y, w, CG, KG, KRED, OV, oext, ph, g * CG * KG * TAPS, col < NCOL,
                    (n * K + g * KG) * OV, out_col, m0, n0, reached ? KRED : 0, As, Bs, acc);
    for (int j = 0; j < WN; j++) {
        const int c = n0 + GEMM_COL(j);
        if (c >= NCOL) continue;
        const int img = c / PV;
        const int4 pos = ph.first + nd_unflat(c - img * PV, ph.count) * STRIDE4;
        __global float* out = dx + (img * C + g * CG) * V + nd_flat(pos, iext);
        for (int i = 0; i < WM; i++) {
            const int m = m0 + GEMM_ROW(i);
            if (m < CG) out[m * V] = acc[i][j];
        }
    }
}
