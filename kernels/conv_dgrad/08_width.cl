// Stage 08: combining width.
//
// What changed since stage 07: a work-item computes XPW neighbouring x positions (x0 .. x0+XPW-1)
// of CPW input channels, CPW x XPW sums in registers. Each position has its own bounds checks;
// together they need only XPW + 2 columns of dy per row (stage 07: 3), so the column table grows
// to XPW + 2 entries, one per column, not per (position, tap). Inside the tensor (stride 1, all
// columns valid) a row is XPW + 2 consecutive floats, fetched with 4-wide loads and a scalar
// tail (LOAD_ROW). Every weight loaded is now used XPW times, every dy value up to CPW x 3 times.
//
// Why: in stage 07 each weight a work-item loads feeds one multiply-add; with XPW positions it
// feeds XPW. And the windows of neighbouring positions overlap: XPW positions need XPW + 2
// columns of dy per row, not 3 x XPW. More reuse per load, more registers: the sums alone are
// CPW x XPW floats, so XPW and CPW trade against each other (tuned per device).
//
// Memory safety: the column table marks columns 0 <= ow < OW (with ow*STRIDE exact) and holds 0
// for the others, rows likewise, so every read, even one whose value is replaced by 0, stays
// inside the tensor; the 4-wide loads run only when all XPW + 2 columns exist. Positions
// x0+p >= W (the last group of a row) compute but are not stored; channels c0+j >= C read
// channel C-1's weights and are not stored. The weight float4 loads are aligned and inside the
// tensor as in stage 07.
//
// Measured: the ladder in notebooks/08_combining_width.ipynb
// (this device, and the GPU runs recorded in results/).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// NDRange: dim 0 = (n*H + h)*ceil(W/XPW) + group of x (padded to WG), dim 1 = c / CPW.
// JIT parameters: KH, KW, STRIDE, ACT (from the problem); FAST (host: 1 only for 3x3 with
// K % 16 == 0); CPW >= 1 and XPW >= 1 (any C and W work: tails are masked), SPLIT (divides 16:
// weights loaded per group of depths, read by the generator), WG (host: work-group size).

#include "dgrad.h"

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif
#ifndef FAST
#define FAST 0                // 1 requires KH == KW == 3 and K % 16 == 0 (set by the host)
#endif
#ifndef CPW
#define CPW 4                 // input channels per work-item, >= 1
#endif
#ifndef XPW
#define XPW 4                 // x positions per work-item, >= 1
#endif
#define NCOL (XPW + KW - 1)   // columns of dy one row of the window spans

#if ACT == ACT_NONE
#define GRAD_IN4(dy, y, i) vload4(0, (dy) + (i))
#else
inline float4 act_derivative4(float4 a) {
    return (float4)(act_derivative(a.x), act_derivative(a.y), act_derivative(a.z), act_derivative(a.w));
}
#define GRAD_IN4(dy, y, i) (vload4(0, (dy) + (i)) * act_derivative4(vload4(0, (y) + (i))))
#endif

// Row r of the window: d[u] = gradient at column u (ow = x0 + PAD - 2 + u), 0 where the output
// does not exist. Inside the tensor's columns: XPW + 2 consecutive floats, 4 at a time. Elsewhere
// each column is read at its table entry, which points inside the tensor even where the output
// does not exist (col, rowoff are 0 there), and a select puts the 0 in: no branch around loads.
#define LOAD_ROW(d, o, r) do {                                                         \
        if (inside) {                                                                  \
            _Pragma("unroll") for (int q = 0; q < NCOL / 4; q++) {                     \
                const float4 v4 = GRAD_IN4(dy, y, (o) + col[0] + 4 * q);               \
                d[4 * q] = rowok[r] ? v4.x : 0.0f; d[4 * q + 1] = rowok[r] ? v4.y : 0.0f; \
                d[4 * q + 2] = rowok[r] ? v4.z : 0.0f; d[4 * q + 3] = rowok[r] ? v4.w : 0.0f; \
            }                                                                          \
            _Pragma("unroll") for (int u = NCOL / 4 * 4; u < NCOL; u++) {              \
                const float g = GRAD_IN(dy, y, (o) + col[0] + u);                      \
                d[u] = rowok[r] ? g : 0.0f;                                            \
            }                                                                          \
        } else {                                                                       \
            _Pragma("unroll") for (int u = 0; u < NCOL; u++) {                         \
                const float g = GRAD_IN(dy, y, (o) + col[u]);                          \
                d[u] = (rowok[r] & colok[u]) ? g : 0.0f;                              \
            }                                                                          \
        }                                                                              \
    } while (0)

// With stride 1 a row is missing only at the top and bottom of the image: it is read (at row 0)
// and multiplied by zeros rather than branched around. With a larger stride most rows are
// missing for half the work-items, and the branch skips them.
#if STRIDE == 1
#define ROW_TAKEN(r) 1
#else
#define ROW_TAKEN(r) rowok[r]
#endif

__kernel void conv_dgrad(__global const float* restrict dy,  // gradient w.r.t. the layer output
                         __global const float* restrict y,   // layer output after activation
                         __global const float* restrict w,   // weights, IOHW
                         __global float* restrict dx,        // gradient w.r.t. the layer input
                         const int N, const int C, const int H, const int W,
                         const int K, const int OH, const int OW, const int PAD) {
    const int XG = (W + XPW - 1) / XPW;  // groups of XPW positions per row
    const int t = get_global_id(0);
    const int c0 = get_global_id(1) * CPW;
    if (t >= N * H * XG) return;         // the NDRange is padded up to a multiple of WG
    const int x0 = (t % XG) * XPW;
    const int h = (t / XG) % H;
    const int n = t / (XG * H);
    const int OHW = OH * OW;

    // The checks, once per work-item: one table for the rows, one for the XPW + KW - 1 columns.
    // Position x0+p with tap s reads column u = p + KW - 1 - s.
    bool rowok[KH], colok[NCOL];
    int rowoff[KH], col[NCOL];
#pragma unroll
    for (int r = 0; r < KH; r++) {
        const int oh_s = h + PAD - r;                   // oh * STRIDE, if it exists
        rowok[r] = oh_s >= 0 && oh_s % STRIDE == 0 && oh_s / STRIDE < OH;
        rowoff[r] = rowok[r] ? oh_s / STRIDE * OW : 0;
    }
#pragma unroll
    for (int u = 0; u < NCOL; u++) {
        const int ow_s = x0 + PAD - (KW - 1) + u;       // ow * STRIDE, if it exists
        colok[u] = ow_s >= 0 && ow_s % STRIDE == 0 && ow_s / STRIDE < OW;
        col[u] = colok[u] ? ow_s / STRIDE : 0;
    }
    int cw[CPW];                                        // channels whose weights are read
#pragma unroll
    for (int j = 0; j < CPW; j++) cw[j] = min(c0 + j, C - 1);

    float acc[CPW][XPW];
#pragma unroll
    for (int j = 0; j < CPW; j++)
#pragma unroll
        for (int p = 0; p < XPW; p++) acc[j][p] = 0.0f;

#if FAST
#if STRIDE == 1
    const bool inside = colok[0] && colok[NCOL - 1];    // stride 1: every column between exists too
#else
    const bool inside = false;
#endif
    for (int k0 = 0; k0 < K; k0 += 16) {
        const int ob = (n * K + k0) * OHW;
        {
            // @generated
        }
    }
#else
    // General path (other kernel sizes, K % 16 != 0): the same tables, plain loops.
    for (int k = 0; k < K; k++) {
        const int ok = (n * K + k) * OHW;
#pragma unroll
        for (int r = 0; r < KH; r++) {
            if (!rowok[r]) continue;
#pragma unroll
            for (int s = 0; s < KW; s++) {
#pragma unroll
                for (int p = 0; p < XPW; p++) {
                    const int u = p + KW - 1 - s;
                    if (!colok[u]) continue;
                    const float g = GRAD_IN(dy, y, ok + rowoff[r] + col[u]);
#pragma unroll
                    for (int j = 0; j < CPW; j++)
                        acc[j][p] += g * w[((cw[j] * K + k) * KH + r) * KW + s];
                }
            }
        }
    }
#endif

#pragma unroll
    for (int j = 0; j < CPW; j++)
#pragma unroll
        for (int p = 0; p < XPW; p++)
            if (c0 + j < C && x0 + p < W) dx[((n * C + c0 + j) * H + h) * W + x0 + p] = acc[j][p];
}
