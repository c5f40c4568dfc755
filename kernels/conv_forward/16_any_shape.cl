// Stage 16: the forward convolution of any shape, the reference kernel of chapter 16.
//
// One work-item computes one output element, as stage 00 does, for every convolution the course
// accepts: 1 to 4 spatial axes, groups, dilation, a stride per axis and a padding per side. Every
// convolution is seen as 4-D (one of lower rank has unit extents in front: one tap, stride 1, no
// padding there), and the rest is index arithmetic:
//     y[n][k][oa][od][oh][ow] = sum over the taps (q, t, r, s) and the channels c of k's group of
//         x[n][c][oa*SA + q*DA - PA][od*SD + t*DD - PD][oh*SH + r*DH - PH][ow*SW + s*DW - PW]
//         * w[c][k % (K/G)][q][t][r][s]
// with zero outside the input. Groups: output channel k belongs to group g = k / (K/G), which
// reads only input channels g*(C/G) .. (g+1)*(C/G) - 1 (G = C: depthwise). Dilation DA, DD, DH,
// DW spaces the taps. The padding after each axis needs no argument: the output extents (computed
// on the host with it) say where the windows stop. The tap's bounds are checked once, outside the
// loop over the group's channels, so the axes in front of a lower-rank convolution cost one
// check per work-item, not one per product. Nothing is specialised, so nothing is fast: it is
// the portable answer every faster any-shape kernel is checked against.
//
// Layouts: x (N,C,A,D,H,W); w (C,K/G,Q,T,R,S); bias (K); y (N,K,OA,OD,OH,OW), all row-major.
// NDRange: dim 0 = (od*OH + oh)*OW + ow (padded to WG), dim 1 = k, dim 2 = n*OA + oa.
// Arguments after the tensors: the geometry (common/any_shape.h). JIT parameters: BIAS,
// ACT, WG (work-group size, host side).

#include "course.h"
#include "any_shape.h"

#ifndef BIAS
#define BIAS 0
#endif

__kernel void conv_forward(__global const float* restrict x,     // input (N,C,A,D,H,W)
                           __global const float* restrict w,     // weights (C,K/G,Q,T,R,S)
                           __global const float* restrict bias,  // (K), read only with BIAS
                           __global float* restrict y,           // output (N,K,OA,OD,OH,OW)
                           ANY_SHAPE_GEOMETRY) {
    const int o = get_global_id(0);
    const int k = get_global_id(1);
    const int n = get_global_id(2) / OA, oa = get_global_id(2) % OA;
    if (o >= OD * OH * OW) return;       // the NDRange is padded up to a multiple of WG
    const int3 op = position3(o, OH, OW);
    const int od = op.x, oh = op.y, ow = op.z;
    const int CG = C / G, KG = K / G, g = k / KG;   // channels per group, k's group
    const int plane = A * D * H * W, taps = Q * T * R * S;   // x's channel stride, w's

    float acc = 0.0f;
    for (int q = 0; q < Q; q++) {
        const int a = oa * SA + q * DA - PA;
        if (a < 0 || a >= A) continue;
        for (int t = 0; t < T; t++) {
            const int d = od * SD + t * DD - PD;
            if (d < 0 || d >= D) continue;
            for (int r = 0; r < R; r++) {
                const int h = oh * SH + r * DH - PH;
                if (h < 0 || h >= H) continue;
                for (int s = 0; s < S; s++) {
                    const int xw = ow * SW + s * DW - PW;
                    if (xw < 0 || xw >= W) continue;
                    // the tap's input and weight in the group's first channel, then channel by channel
                    const __global float* xc = x + (n * C + g * CG) * plane + ((a * D + d) * H + h) * W + xw;
                    const __global float* wc = w + (g * CG * KG + k % KG) * taps + ((q * T + t) * R + r) * S + s;
                    for (int c = 0; c < CG; c++)
                        acc += xc[c * plane] * wc[c * KG * taps];
                }
            }
        }
    }
#if BIAS
    acc += bias[k];
#endif
    y[((n * K + k) * OA + oa) * (OD * OH * OW) + o] = act_forward(acc);
}
