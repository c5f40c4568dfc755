// Stage 16: the forward convolution of any shape, the reference kernel of chapter 16.
//
// One work-item computes one output element, as stage 00 does, for every convolution the course
// accepts: 1 to 3 spatial axes, groups, dilation, a stride per axis and a padding per side. Every
// convolution is seen as 3-D (a 1-D or 2-D one has unit extents in front: one tap, stride 1, no
// padding there), and the rest is index arithmetic:
//     y[n][k][od][oh][ow] = sum over the channels c of k's group and the taps (t, r, s) of
//         x[n][c][od*SD + t*DD - PD][oh*SH + r*DH - PH][ow*SW + s*DW - PW] * w[c][k % (K/G)][t][r][s]
// with zero outside the input. Groups: output channel k belongs to group g = k / (K/G), which
// reads only input channels g*(C/G) .. (g+1)*(C/G) - 1 (G = C: depthwise). Dilation DD, DH, DW
// spaces the taps. The padding after each axis needs no argument: the output extents OD, OH, OW
// (computed on the host with it) say where the windows stop. Nothing is specialised, so nothing is
// fast: it is the portable answer every faster any-shape kernel is checked against.
//
// Layouts: x (N,C,D,H,W); w (C,K/G,T,R,S); bias (K); y (N,K,OD,OH,OW), all row-major.
// NDRange: dim 0 = (od*OH + oh)*OW + ow (padded to WG), dim 1 = k, dim 2 = n.
// Arguments after the tensors: the geometry (common/any_shape.h). JIT parameters: BIAS,
// ACT, WG (work-group size, host side).

#include "course.h"
#include "any_shape.h"

#ifndef BIAS
#define BIAS 0
#endif

__kernel void conv_forward(__global const float* restrict x,     // input (N,C,D,H,W)
                           __global const float* restrict w,     // weights (C,K/G,T,R,S)
                           __global const float* restrict bias,  // (K), read only with BIAS
                           __global float* restrict y,           // output (N,K,OD,OH,OW)
                           ANY_SHAPE_GEOMETRY) {
    const int o = get_global_id(0);
    const int k = get_global_id(1);
    const int n = get_global_id(2);
    if (o >= OD * OH * OW) return;       // the NDRange is padded up to a multiple of WG
    const int3 op = position3(o, OH, OW);
    const int od = op.x, oh = op.y, ow = op.z;
    const int CG = C / G, KG = K / G, g = k / KG;   // channels per group, k's group

    float acc = 0.0f;
    for (int c = g * CG; c < (g + 1) * CG; c++) {
        for (int t = 0; t < T; t++) {
            const int d = od * SD + t * DD - PD;
            if (d < 0 || d >= D) continue;
            for (int r = 0; r < R; r++) {
                const int h = oh * SH + r * DH - PH;
                if (h < 0 || h >= H) continue;
                for (int s = 0; s < S; s++) {
                    const int xw = ow * SW + s * DW - PW;
                    if (xw < 0 || xw >= W) continue;
                    acc += x[(((n * C + c) * D + d) * H + h) * W + xw]
                         * w[(((c * KG + k % KG) * T + t) * R + r) * S + s];
                }
            }
        }
    }
#if BIAS
    acc += bias[k];
#endif
    y[(n * K + k) * (OD * OH * OW) + o] = act_forward(acc);
}
