// conv_wgrad stage 01: naive weight gradient.
//
// The weight gradient is the third product of a convolution layer's backward pass, beside the
// input gradient (conv_dgrad). In the forward pass weight w[c][k][r][s] multiplied input
// x[n][c][oh*STRIDE + r - PAD][ow*STRIDE + s - PAD] into output (n, k, oh, ow), once for every
// output position. So its gradient collects one product per output position:
//
//     dw[c][k][r][s] = sum over (n, oh, ow) of x[n][c][oh*STRIDE + r - PAD][ow*STRIDE + s - PAD] * dy'[n][k][oh][ow]
//
// where dy' is the incoming gradient scaled by the activation's derivative (GRAD_IN), and x is
// zero outside the input (the padding). It is a correlation of the input with the output
// gradient, and it differs from the other two passes in its shape: few outputs (C*K*R*S, 36,864
// for a 64-channel 3x3 layer) and a long sum behind each one (N*OH*OW, 200,704 at batch 64 on
// 56x56). This stage gives one work-item to each weight and lets it walk the whole sum alone:
// simple and exact, but only C*K*R*S work-items, each a long serial chain of dependent adds.
// Stage 02 splits the sum across work-groups.
//
// Work-items with neighbouring ids hold neighbouring s (then r, then k): at each step they read
// neighbouring x values of one row and the same dy value, which the caches serve.
// Layouts: x (N,C,H,W); dy, y (N,K,OH,OW); dw IOHW (C,K,KH,KW), all row-major.
// NDRange: dim 0 = ((c*K + k)*KH + r)*KW + s (padded to WG).
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

__kernel void conv_wgrad(__global const float* restrict x,    // the layer's input
                         __global const float* restrict dy,   // gradient w.r.t. the layer output
                         __global const float* restrict y,    // layer output after activation
                         __global float* restrict dw,         // gradient w.r.t. the weights, IOHW
                         const int N, const int C, const int H, const int W,
                         const int K, const int OH, const int OW, const int PAD) {
    const int i = get_global_id(0);
    if (i >= C * K * KH * KW) return;    // the NDRange is padded up to a multiple of WG
    const int s = i % KW;
    const int r = (i / KW) % KH;
    const int k = (i / (KW * KH)) % K;
    const int c = i / (KW * KH * K);

    float grad = 0.0f;
    for (int n = 0; n < N; n++) {
        for (int oh = 0; oh < OH; oh++) {
            const int h = oh * STRIDE + r - PAD;        // the input row this tap read
            if (h < 0 || h >= H) continue;              // padding: x is zero there
            for (int ow = 0; ow < OW; ow++) {
                const int xw = ow * STRIDE + s - PAD;
                if (xw < 0 || xw >= W) continue;
                const int o = ((n * K + k) * OH + oh) * OW + ow;
                grad += x[((n * C + c) * H + h) * W + xw] * GRAD_IN(dy, y, o);
            }
        }
    }
    dw[i] = grad;                        // i is the IOHW index of (c, k, r, s)
}
