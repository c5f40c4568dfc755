// Stage 16: the input gradient of a convolution of any shape, the reference kernel of chapter 16.
//
// Stage 02's question for every convolution the course accepts (1 to 4 spatial axes, groups,
// dilation, a stride per axis, a padding per side), each seen as 4-D with unit extents in front:
// which output position read input (a, d, h, w) through tap (q, t, r, s)? The forward pass read
// (oa*SA + q*DA - PA, od*SD + t*DD - PD, oh*SH + r*DH - PH, ow*SW + s*DW - PW), so on each axis
//     oa = (a + PA - q*DA) / SA,   valid only if the division is exact and 0 <= oa < OA,
// and the same for od, oh and ow. Groups: input channel c belongs to group g = c / (C/G) and sends
// its gradient only to that group's K/G output channels (G = C: depthwise). The activation's
// derivative is applied on the read of dy (GRAD_IN). A tap's checks are made once, outside the
// loop over the group's output channels.
//
// Layouts: dy, y (N,K,OA,OD,OH,OW); w (C,K/G,Q,T,R,S); dx (N,C,A,D,H,W), all row-major.
// NDRange: dim 0 = (d*H + h)*W + w (padded to WG), dim 1 = c, dim 2 = n*A + a.
// Arguments after the tensors: the geometry (common/any_shape.h). JIT parameters: ACT,
// WG (work-group size, host side).

#include "course.h"
#include "any_shape.h"

__kernel void conv_dgrad(__global const float* restrict dy,  // gradient w.r.t. the layer output
                         __global const float* restrict y,   // layer output after activation
                         __global const float* restrict w,   // weights (C,K/G,Q,T,R,S)
                         __global float* restrict dx,        // gradient w.r.t. the layer input
                         ANY_SHAPE_GEOMETRY) {
    const int i = get_global_id(0);
    const int c = get_global_id(1);
    const int n = get_global_id(2) / A, a = get_global_id(2) % A;
    if (i >= D * H * W) return;          // the NDRange is padded up to a multiple of WG
    const int3 p = position3(i, H, W);
    const int d = p.x, h = p.y, x = p.z;
    const int plane = OA * OD * OH * OW, taps = Q * T * R * S;   // dy's channel stride, w's

    float grad = 0.0f;
    const int CG = C / G, KG = K / G, g = c / CG;   // channels per group, c's group
    for (int q = 0; q < Q; q++) {
        const int oa_s = a + PA - q * DA;               // oa * SA, if it exists
        if (oa_s < 0 || oa_s % SA != 0 || oa_s / SA >= OA) continue;
        for (int t = 0; t < T; t++) {
            const int od_s = d + PD - t * DD;
            if (od_s < 0 || od_s % SD != 0 || od_s / SD >= OD) continue;
            for (int r = 0; r < R; r++) {
                const int oh_s = h + PH - r * DH;
                if (oh_s < 0 || oh_s % SH != 0 || oh_s / SH >= OH) continue;
                for (int s = 0; s < S; s++) {
                    const int ow_s = x + PW - s * DW;
                    if (ow_s < 0 || ow_s % SW != 0 || ow_s / SW >= OW) continue;
                    // the output position in the group's first channel, then channel by channel
                    const int o = (n * K + g * KG) * plane
                                + ((oa_s / SA * OD + od_s / SD) * OH + oh_s / SH) * OW + ow_s / SW;
                    const __global float* wc = w + c * KG * taps + ((q * T + t) * R + r) * S + s;
                    for (int kl = 0; kl < KG; kl++)
                        grad += GRAD_IN(dy, y, o + kl * plane) * wc[kl * taps];
                }
            }
        }
    }
    dx[((n * C + c) * A + a) * (D * H * W) + i] = grad;
}
