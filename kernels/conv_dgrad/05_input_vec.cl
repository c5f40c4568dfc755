// Stage 05: input width vectorization.
//
// What changed since stage 04: in the 3x3 path with stride 1, a work-item whose three columns
// ow = x+PAD-2 .. x+PAD all lie inside dy reads each valid row of its window as one 3-wide load
// (GRAD_IN3 in dgrad.h: vload3 of dy, and of y when there is an activation) instead of three
// scalar loads. The test is made once per work-item, before the k loop, so inside the tensor
// the loop runs with no column checks at all, only the row lookup. Work-items at the left and
// right borders, and every strided layer (STRIDE is a JIT parameter: with STRIDE != 1 the test
// is the constant false and the vector loop is dead code), run stage 04's scalar loop unchanged.
//
// Why: one 3-wide request instead of three scalar ones. Neighbouring work-items (SIMD lanes) x
// and x+1 read windows that overlap in two of three floats, so their loads together touch
// consecutive addresses: the hardware already merges them across lanes; the vector load merges
// them within a lane too. The cost: on a GPU, a warp (wavefront) that holds both border and
// interior work-items runs both loops, one after the other; with rows 7 or 14 wide, most warps
// hold a row's first or last column. With stride 2 a work-item meets only the weight columns s
// of one parity (x+PAD-s even): one or two dy columns, depending on x, paired with s = 0 and 2;
// the 3-wide load does not fit them, so strided layers keep the scalar loop.
//
// As for vload8 in stage 04, a device without unaligned vector loads may get narrower loads
// from the compiler; the column lookups are gone either way.
//
// Memory safety: the vector path runs only when 0 <= x+PAD-2 and x+PAD <= OW-1, so the three
// floats lie inside one row of dy (and of y).
//
// Measured: the ladder in notebooks/05_input_vectorization.ipynb
// (this device, and the GPU runs recorded in results/).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// NDRange: dim 0 = h*W + w (padded to WG), dim 1 = c, dim 2 = n (as stage 02).
// JIT parameters: KH, KW (kernel size, >= 1; 3x3 takes the weight vector path, 3x3 with
// STRIDE 1 also the input vector path), STRIDE (>= 1), ACT (activation), WG (host side).

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

__kernel void conv_dgrad(__global const float* restrict dy,  // gradient w.r.t. the layer output
                         __global const float* restrict y,   // layer output after activation
                         __global const float* restrict w,   // weights, IOHW
                         __global float* restrict dx,        // gradient w.r.t. the layer input
                         const int N, const int C, const int H, const int W,
                         const int K, const int OH, const int OW, const int PAD) {
    const int hw = get_global_id(0);
    const int c = get_global_id(1);
    const int n = get_global_id(2);
    if (hw >= H * W) return;             // the NDRange is padded up to a multiple of WG
    const int h = hw / W;
    const int x = hw % W;

    // The checks, once per work-item: valid[r][s] says whether output (oh, ow) exists.
    bool valid[KH][KW];
#pragma unroll
    for (int r = 0; r < KH; r++) {
        const int oh_s = h + PAD - r;                   // oh * STRIDE, if it exists
        const bool row_ok = oh_s >= 0 && oh_s % STRIDE == 0 && oh_s / STRIDE < OH;
#pragma unroll
        for (int s = 0; s < KW; s++) {
            const int ow_s = x + PAD - s;
            valid[r][s] = row_ok && ow_s >= 0 && ow_s % STRIDE == 0 && ow_s / STRIDE < OW;
        }
    }

    float grad = 0.0f;
#if KH == 3 && KW == 3
#if STRIDE == 1
    // The whole window's columns inside dy: one 3-wide load per valid row.
    const bool inside = x + PAD - 2 >= 0 && x + PAD < OW;
#else
    const bool inside = false;                          // strided: scalar loads only
#endif
    if (inside) {
        const int ow0 = x + PAD - 2;                    // leftmost column, s = 2
        for (int k = 0; k < K; k++) {
            const weights3x3 wk = load_weights3x3(w + (c * K + k) * 9);  // 8-wide + 1 scalar
#pragma unroll
            for (int r = 0; r < 3; r++) {
                if (!valid[r][0]) continue;             // whole row valid or not: look up s = 0
                const int oh = h + PAD - r;
                const float3 g = GRAD_IN3(dy, y, ((n * K + k) * OH + oh) * OW + ow0);
                grad += g.s0 * wk.s[r * 3 + 2] + g.s1 * wk.s[r * 3 + 1] + g.s2 * wk.s[r * 3 + 0];
            }
        }
    } else                                              // borders, strides: stage 04's loop
    for (int k = 0; k < K; k++) {
        const weights3x3 wk = load_weights3x3(w + (c * K + k) * 9);  // 8-wide + 1 scalar
#pragma unroll
        for (int r = 0; r < 3; r++) {
            const int oh = (h + PAD - r) / STRIDE;
#pragma unroll
            for (int s = 0; s < 3; s++) {
                if (!valid[r][s]) continue;
                const int ow = (x + PAD - s) / STRIDE;
                const int o = ((n * K + k) * OH + oh) * OW + ow;
                grad += GRAD_IN(dy, y, o) * wk.s[r * 3 + s];
            }
        }
    }
#else
    for (int k = 0; k < K; k++) {
#pragma unroll
        for (int r = 0; r < KH; r++) {
            const int oh = (h + PAD - r) / STRIDE;      // exact where valid[r][.] holds
#pragma unroll
            for (int s = 0; s < KW; s++) {
                if (!valid[r][s]) continue;             // a table lookup, not a computation
                const int ow = (x + PAD - s) / STRIDE;
                const int o = ((n * K + k) * OH + oh) * OW + ow;
                grad += GRAD_IN(dy, y, o) * w[((c * K + k) * KH + r) * KW + s];
            }
        }
    }
#endif
    dx[((n * C + c) * H + h) * W + x] = grad;
}
