// Stage 04: weight vectorization.
//
// What changed since stage 03: for a 3x3 kernel (chosen at build time: KH and KW are JIT
// parameters, so the preprocessor keeps exactly one path), the 9 weights of the current
// (c, k) pair are fetched before the (r, s) loops as one 8-wide load and one scalar load
// (load_weights3x3 in dgrad.h) instead of 9 scalar loads inside them. Every other kernel size
// keeps stage 03's general path unchanged.
//
// Why: all work-items of a SIMD group share c and k, so they all read the same weights. A scalar
// load moves 4 useful bytes over a data path that is 32 or more bytes wide; the 8-wide load moves
// 32 useful bytes in one request. The one scalar left over, and the 36-byte stride between the
// blocks of consecutive k (9 floats), mean a block often straddles two cache lines: stage 06
// removes both by loading 16 output channels at a time.
//
// vload8 needs only 4-byte alignment in OpenCL C; a device whose vector load instructions need
// natural alignment gets narrower loads from the compiler, still issued together, before the
// loops, instead of one by one behind the table's branches.
//
// Memory safety: a block is 9 consecutive floats of w, and the last pair's block ends at the
// tensor's last element, so nothing past the tensor is read.
//
// Measured: the ladder in notebooks/04_weight_vectorization.ipynb
// (this device, and the GPU runs recorded in results/).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// NDRange: dim 0 = h*W + w (padded to WG), dim 1 = c, dim 2 = n (as stage 02).
// JIT parameters: KH, KW (kernel size, >= 1; 3x3 takes the vector path), STRIDE (>= 1),
// ACT (activation), WG (host side: work-group size).

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
