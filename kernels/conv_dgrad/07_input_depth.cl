// Stage 07: combining input depth.
//
// What changed since stage 06: a work-item computes CPW input channels c0 .. c0+CPW-1 of one
// input position, CPW sums in registers. Every dy value it fetches feeds CPW multiply-adds (one
// per channel) instead of one. The bounds table is split into one table for the rows and one for
// the 3 columns, shared by all channels. For a 3x3 kernel with K % 16 == 0 (FAST, decided on the
// host) the body of the 16-depth loop is straight-line code written by a Python function
// (helpers/launch/unrolled.py: fast_block) for the chosen CPW and SPLIT; it replaces the
// "@generated" line below. Its weight loads are split: the depths go in groups of SPLIT, and a
// group's weights are loaded just before the group is used, so fewer weights are live at once.
// A missing row or column is read at a safe address and its value replaced by 0 (a select), so
// there are no branches around the loads; with STRIDE > 1 a missing row is skipped instead.
// Other problems take the general path: the same tables, plain loops.
//
// Why: up to stage 06, work-items of neighbouring channels read the same dy values again, one
// channel each. Reading once for CPW channels divides that traffic by CPW; the price is
// registers: CPW accumulators plus the weights of CPW channels, 9 floats per channel and depth.
// Loading all 16 depths' weights at once (SPLIT=16, stage 06's way) keeps 144 x CPW floats
// live; with too many, a compiler has to keep some in memory (spill) and the stage slows. The chapter
// times CPW and SPLIT; the benchmark's --tune picks them per device.
//
// Memory safety: the weights of (c, k0 .. k0+15) are 144 consecutive floats starting at
// 9*(c*K + k0), a multiple of 16 floats when K % 16 == 0, so reading them as 36 float4 through an
// aligned pointer is legal and stays inside the tensor. Channels c0+j >= C (the last block when
// C % CPW != 0) read channel C-1's weights and are not stored. Where the row/column tables
// mark an output that does not exist, its entry is 0, so the read whose value is then replaced
// by 0 stays inside the tensor; the 3-wide load runs only when all 3 columns exist (stride 1).
//
// Measured: the ladder in notebooks/07_combining_input_depth.ipynb
// (this device, and the GPU runs recorded in results/).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// NDRange: dim 0 = (n*H + h)*W + x (padded to WG), dim 1 = c / CPW.
// JIT parameters: KH, KW, STRIDE, ACT (from the problem); FAST (host: 1 only for 3x3 with
// K % 16 == 0); CPW >= 1 (any C works: the tail is masked), SPLIT (divides 16: read by the
// generator), WG (host: work-group size).

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
#define NCOL KW               // columns of dy one row of the window spans

// Row r of the window: d[u] = gradient at column u (ow = x + PAD - 2 + u), 0 where the output
// does not exist. Inside the tensor's columns: one 3-wide load (stage 05). Elsewhere each column
// is read at its table entry, which points inside the tensor even where the output does not
// exist (col, rowoff are 0 there), and a select puts the 0 in: no branch around the loads.
#define LOAD_ROW(d, o, r) do {                                                         \
        if (inside) {                                                                  \
            const float3 g3 = GRAD_IN3(dy, y, (o) + col[0]);                           \
            d[0] = rowok[r] ? g3.s0 : 0.0f;                                            \
            d[1] = rowok[r] ? g3.s1 : 0.0f;                                            \
            d[2] = rowok[r] ? g3.s2 : 0.0f;                                            \
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
    const int t = get_global_id(0);
    const int c0 = get_global_id(1) * CPW;
    if (t >= N * H * W) return;          // the NDRange is padded up to a multiple of WG
    const int x = t % W;
    const int h = (t / W) % H;
    const int n = t / (W * H);
    const int OHW = OH * OW;

    // The checks, once per work-item: one table for the rows, one for the KW columns.
    // Tap s reads column u = KW - 1 - s.
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
        const int ow_s = x + PAD - (KW - 1) + u;        // ow * STRIDE, if it exists
        colok[u] = ow_s >= 0 && ow_s % STRIDE == 0 && ow_s / STRIDE < OW;
        col[u] = colok[u] ? ow_s / STRIDE : 0;
    }
    int cw[CPW];                                        // channels whose weights are read
#pragma unroll
    for (int j = 0; j < CPW; j++) cw[j] = min(c0 + j, C - 1);

    float acc[CPW];
#pragma unroll
    for (int j = 0; j < CPW; j++) acc[j] = 0.0f;

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
                const int u = KW - 1 - s;
                if (!colok[u]) continue;
                const float g = GRAD_IN(dy, y, ok + rowoff[r] + col[u]);
#pragma unroll
                for (int j = 0; j < CPW; j++)
                    acc[j] += g * w[((cw[j] * K + k) * KH + r) * KW + s];
            }
        }
    }
#endif

#pragma unroll
    for (int j = 0; j < CPW; j++)
        if (c0 + j < C) dx[((n * C + c0 + j) * H + h) * W + x] = acc[j];
}
