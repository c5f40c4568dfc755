// Stage 02: naive input gradient.
//
// One work-item computes one element dx[n][c][h][w] of the gradient with respect to the layer's
// input. It visits every output channel k and every kernel offset (r, s) and asks: which output
// position (oh, ow) read input (h, w) through weight (r, s) in the forward pass? The forward pass
// read input (oh*STRIDE + r - PAD, ow*STRIDE + s - PAD), so
//     oh = (h + PAD - r) / STRIDE,   valid only if the division is exact and 0 <= oh < OH,
// and the same for ow. Those checks (stride, then both borders) run inside the innermost loop:
// stage 03 takes them out. The activation's derivative is applied on the read of dy (GRAD_IN).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// NDRange: dim 0 = h*W + w (padded to WG), dim 1 = c, dim 2 = n.
// JIT parameters: KH, KW (kernel size), STRIDE, ACT (activation), WG (work-group size, host side).

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

    float grad = 0.0f;
    for (int k = 0; k < K; k++) {
        for (int r = 0; r < KH; r++) {
            const int oh_s = h + PAD - r;               // oh * STRIDE, if it exists
            if (oh_s < 0 || oh_s % STRIDE != 0) continue;
            const int oh = oh_s / STRIDE;
            if (oh >= OH) continue;
            for (int s = 0; s < KW; s++) {
                const int ow_s = x + PAD - s;
                if (ow_s < 0 || ow_s % STRIDE != 0) continue;
                const int ow = ow_s / STRIDE;
                if (ow >= OW) continue;
                const int o = ((n * K + k) * OH + oh) * OW + ow;
                grad += GRAD_IN(dy, y, o) * w[((c * K + k) * KH + r) * KW + s];
            }
        }
    }
    dx[((n * C + c) * H + h) * W + x] = grad;
}
