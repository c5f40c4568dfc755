// The kernel of conv_dgrad/03_memoized_bounds and its CUDA twin, one text for both languages
// (course.h's macros spell what they spell differently): stage 02's loops with the padding and
// stride checks evaluated once per work-item, into the table valid[KH][KW], before the loop over
// output channels. What it changes, why, and its layouts and NDRange: 03_memoized_bounds.cl's
// header; chapter 3 shows that file with this code inlined, in OpenCL C (hence the signature's
// alignment here). The OpenCL stage includes dgrad.h before it, the twin does not (dgrad.h's vector
// loads are OpenCL C, and this stage uses none of them).
// JIT parameters: KH, KW (default 3), STRIDE (default 1), ACT (course.h).
#ifndef DGRAD_MEMOIZED_H
#define DGRAD_MEMOIZED_H

#include "course.h"

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif

KERNEL void conv_dgrad(GLOBAL const float* RESTRICT dy,  // gradient w.r.t. the layer output
                         GLOBAL const float* RESTRICT y,   // layer output after activation
                         GLOBAL const float* RESTRICT w,   // weights, IOHW
                         GLOBAL float* RESTRICT dx,        // gradient w.r.t. the layer input
                         const int N, const int C, const int H, const int W,
                         const int K, const int OH, const int OW, const int PAD) {
    const int hw = GLOBAL_ID_1D(0);
    const int c = GLOBAL_ID_1D(1);
    const int n = GLOBAL_ID_1D(2);
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
    dx[((n * C + c) * H + h) * W + x] = grad;
}

#endif
