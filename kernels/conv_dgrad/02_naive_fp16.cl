// Stage 02 in half precision storage: the naive input gradient reading and writing fp16 tensors.
//
// The same loops as 02_naive.cl. Only the storage changes: dy, y, w and dx hold 16-bit halves,
// half the bytes of float32. vload_half converts one half to a float on the read and vstore_half
// rounds the float result to the nearest half on the write; both are core OpenCL C, so this runs
// on every device, with or without the cl_khr_fp16 extension (no arithmetic happens in half).
// The sum accumulates in float: only the inputs (rounded on upload) and the one final store are
// rounded to half, which is what the checker's fp16 tolerance allows for.
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major, all half.
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

__kernel void conv_dgrad(__global const half* restrict dy,  // gradient w.r.t. the layer output
                         __global const half* restrict y,   // layer output after activation
                         __global const half* restrict w,   // weights, IOHW
                         __global half* restrict dx,        // gradient w.r.t. the layer input
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
                float g = vload_half(o, dy);
#if ACT != ACT_NONE
                g *= act_derivative(vload_half(o, y));
#endif
                grad += g * vload_half(((c * K + k) * KH + r) * KW + s, w);
            }
        }
    }
    vstore_half_rte(grad, ((n * C + c) * H + h) * W + x, dx);
}
