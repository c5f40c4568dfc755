// What the implicit-GEMM weight-gradient stages (conv_wgrad 03 and 05) share: operand A, dy' as
// it lies in NCHW, and the store of a work-group's tile into the slice workspace. Both compute
// dw^T = dy'^T . cols^T on gemm_core.h's tiles, the reduction over q = (n, oh, ow) cut into slices
// [q0, q1); they differ only in where operand B, the column of x each tap reads, is gathered from.
// Include after course.h and before gemm_core.h; GEMM_ARGS names dy, y, K, q0, q1 and OHW.
#ifndef WGRAD_IGEMM_H
#define WGRAD_IGEMM_H

// The tile loop counts q from 0 within the slice: the fetches add the slice's start q0 and
// return 0 past its end q1 (not past N*OH*OW: the next slice's positions belong to it).
// A[k][q] = dy'[n][k][oh][ow] with q = (n, oh, ow); 0 outside the matrix.
#define DY_INDEX(k, q) (((q) / OHW * K + (k)) * OHW + (q) % OHW)
#define GEMM_A(k, q) (((k) < K && q0 + (q) < q1) ? GRAD_IN(dy, y, DY_INDEX(k, q0 + (q))) : 0.0f)

// With OH*OW % 4 == 0 and q0 + q a multiple of 4 (TK and SLICE are), q .. q+3 lie in one image:
// four consecutive floats of dy, all inside the slice or all outside it.
inline float4 grad_in4(__global const float* restrict dy, __global const float* restrict y, const int o) {
#if ACT == ACT_NONE
    return vload4(0, dy + o);
#else
    const float4 d = vload4(0, dy + o), out = vload4(0, y + o);
    return d * (float4)(act_derivative(out.x), act_derivative(out.y), act_derivative(out.z),
                        act_derivative(out.w));
#endif
}
#define GEMM_A4(k, q) (((k) < K && q0 + (q) < q1) ? grad_in4(dy, y, DY_INDEX(k, q0 + (q))) : (float4)(0.0f))

// What a work-group of the GEMM kernels (arguments N, C, K, OH, OW) declares first: its tiles As
// and Bs (gemm_core.h), its block of dw^T from row m0 and column n0, and its slice [q0, q1) of
// the N*OH*OW = NP positions (dim 2 of the NDRange; SLICE each); TAPS = C*KH*KW columns.
#define WGRAD_GROUP()                                                                           \
    GEMM_TILES(As, Bs);                                                                         \
    const int OHW = OH * OW, NP = N * OHW, TAPS = C * KH * KW;                                  \
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;                            \
    const int q0 = get_group_id(2) * SLICE, q1 = min(q0 + SLICE, NP)

// A work-group's TM x TN block of dw^T, rows k from m0 and columns (taps) from n0, stored as this
// slice's sums in IOHW order: partials[slice][c][k][r][s], the layout wgrad_sum adds.
#define WGRAD_STORE_TILE(partials, acc, m0, n0, K, TAPS) do {                                  \
        __global float* out_ = (partials) + get_group_id(2) * ((TAPS) * (K));                  \
        for (int j_ = 0; j_ < WN; j_++) {                                                      \
            const int tap_ = (n0) + GEMM_COL(j_);     /* (c, r, s) */                          \
            if (tap_ >= (TAPS)) continue;                                                      \
            const int at_ = (tap_ / (KH * KW)) * (K) * KH * KW + tap_ % (KH * KW); /* [c][0][r][s] */ \
            for (int i_ = 0; i_ < WM; i_++) {                                                  \
                const int k_ = (m0) + GEMM_ROW(i_);                                            \
                if (k_ < (K)) out_[at_ + k_ * KH * KW] = (acc)[i_][j_];                        \
            }                                                                                  \
        }                                                                                      \
    } while (0)

#endif
