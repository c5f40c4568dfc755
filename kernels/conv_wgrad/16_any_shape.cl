// conv_wgrad stage 16: the weight gradient of a convolution of any shape, the reference kernel
// of chapter 16.
//
// Stage 01's walk for every convolution the course accepts (1 to 4 spatial axes, groups,
// dilation, a stride per axis, a padding per side), each seen as 4-D with unit extents in front.
// One work-item per weight (c, k', q, t, r, s), k' the output channel's place in its group: the
// weight connects input channel c to output channel k = g*(K/G) + k' of c's group g = c / (C/G)
// (G = C: depthwise), and its gradient collects one product per output position:
//     dw[c][k'][q][t][r][s] = sum over (n, oa, od, oh, ow) of
//         x[n][c][oa*SA + q*DA - PA][od*SD + t*DD - PD][oh*SH + r*DH - PH][ow*SW + s*DW - PW]
//         * dy'[n][k][oa][od][oh][ow]
// with x zero outside the input and dy' the incoming gradient scaled by the activation's
// derivative (GRAD_IN).
//
// Layouts: x (N,C,A,D,H,W); dy, y (N,K,OA,OD,OH,OW); dw (C,K/G,Q,T,R,S), all row-major.
// NDRange: dim 0 = the weight's index ((((c*K/G + k')*Q + q)*T + t)*R + r)*S + s (padded to WG).
// Arguments after the tensors: the geometry (common/any_shape.h). JIT parameters: ACT,
// WG (work-group size, host side).

#include "course.h"
#include "any_shape.h"

__kernel void conv_wgrad(__global const float* restrict x,    // the layer's input
                         __global const float* restrict dy,   // gradient w.r.t. the layer output
                         __global const float* restrict y,    // layer output after activation
                         __global float* restrict dw,         // gradient w.r.t. the weights
                         ANY_SHAPE_GEOMETRY) {
    const int KG = K / G, CG = C / G;    // channels per group
    const int i = get_global_id(0);
    if (i >= C * KG * Q * T * R * S) return; // the NDRange is padded up to a multiple of WG
    const int s = i % S;
    const int r = (i / S) % R;
    const int t = (i / (S * R)) % T;
    const int q = (i / (S * R * T)) % Q;
    const int kl = (i / (S * R * T * Q)) % KG;
    const int c = i / (S * R * T * Q * KG);
    const int k = (c / CG) * KG + kl;

    float grad = 0.0f;
    for (int n = 0; n < N; n++) {
        for (int oa = 0; oa < OA; oa++) {
            const int a = oa * SA + q * DA - PA;        // the input volume this tap read
            if (a < 0 || a >= A) continue;              // padding: x is zero there
            for (int od = 0; od < OD; od++) {
                const int d = od * SD + t * DD - PD;
                if (d < 0 || d >= D) continue;
                for (int oh = 0; oh < OH; oh++) {
                    const int h = oh * SH + r * DH - PH;
                    if (h < 0 || h >= H) continue;
                    for (int ow = 0; ow < OW; ow++) {
                        const int xw = ow * SW + s * DW - PW;
                        if (xw < 0 || xw >= W) continue;
                        const int o = ((((n * K + k) * OA + oa) * OD + od) * OH + oh) * OW + ow;
                        grad += x[((((n * C + c) * A + a) * D + d) * H + h) * W + xw] * GRAD_IN(dy, y, o);
                    }
                }
            }
        }
    }
    dw[i] = grad;                        // i is the index of (c, k', q, t, r, s)
}
