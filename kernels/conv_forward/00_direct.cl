// Stage 00: direct forward convolution, the baseline of chapter 12.
//
// One work-item computes one output element y[n][k][oh][ow] = sum over input channels c and
// kernel offsets (r, s) of x[n][c][oh*STRIDE + r - PAD][ow*STRIDE + s - PAD] * w[c][k][r][s],
// with zero outside the input (the bounds checks sit inside the loops). 2·C·R·S FLOPs per output:
// the count every Winograd stage of the chapter is measured against. Its epilogue adds the bias
// (BIAS = 1) and applies the activation (ACT), so a whole layer's forward step runs here too: the
// portable reference for chapter 13's tensor-core forward stages, which fuse the same epilogue.
//
// Layouts: x (N,C,H,W); w IOHW (C,K,KH,KW); bias (K); y (N,K,OH,OW), all row-major.
// NDRange: dim 0 = oh*OW + ow (padded to WG), dim 1 = k, dim 2 = n.
// JIT parameters: KH, KW (kernel size), STRIDE, BIAS, ACT, WG (work-group size, host side).

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
#ifndef BIAS
#define BIAS 0
#endif

__kernel void conv_forward(__global const float* restrict x,   // input (N,C,H,W)
                           __global const float* restrict w,   // weights, IOHW
                           __global const float* restrict bias,  // (K), read only with BIAS
                           __global float* restrict y,         // output (N,K,OH,OW)
                           const int N, const int C, const int H, const int W,
                           const int K, const int OH, const int OW, const int PAD) {
    const int ohw = get_global_id(0);
    const int k = get_global_id(1);
    const int n = get_global_id(2);
    if (ohw >= OH * OW) return;          // the NDRange is padded up to a multiple of WG
    const int oh = ohw / OW;
    const int ow = ohw % OW;

    float acc = 0.0f;
    for (int c = 0; c < C; c++) {
        for (int r = 0; r < KH; r++) {
            const int h = oh * STRIDE + r - PAD;
            if (h < 0 || h >= H) continue;
            for (int s = 0; s < KW; s++) {
                const int xw = ow * STRIDE + s - PAD;
                if (xw < 0 || xw >= W) continue;
                acc += x[((n * C + c) * H + h) * W + xw] * w[((c * K + k) * KH + r) * KW + s];
            }
        }
    }
#if BIAS
    acc += bias[k];
#endif
    y[((n * K + k) * OH + oh) * OW + ow] = act_forward(acc);
}
