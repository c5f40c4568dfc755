// Stage 03: memoized bounds checks.
//
// What changed since stage 02: the padding and stride checks no longer run inside the loop over
// output channels. Whether weight (r, s) meets an output position depends only on where the
// work-item sits (h, x), never on the output channel k. So each work-item evaluates the checks
// once, before the k loop, into a small table valid[KH][KW], and the k loop only looks entries
// up. The naive kernel repeated the same checks for every k: K times as many.
//
// Why the output-channel loop is not yet innermost (which would also evaluate each check once):
// both tensors the loop reads are laid out spatially. Weights are IOHW, so the KH*KW weights of
// one (c, k) pair are adjacent in memory; dy is NCHW, so neighbouring ow are adjacent. Keeping
// (r, s) innermost keeps the reads of one k together, which stages 04 and 05 turn into vector
// loads. Stage 06 moves k inside, 16 channels at a time.
//
// The table is a private array with sizes known at build time; the loops that index it are fully
// unrolled, so the compiler can keep it in registers instead of private (stack) memory.
//
// Measured: the ladder in notebooks/03_memoized_bounds.ipynb
// (this device, and the GPU runs recorded in results/).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// NDRange: dim 0 = h*W + w (padded to WG), dim 1 = c, dim 2 = n (as stage 02).
// JIT parameters: KH, KW (kernel size, >= 1), STRIDE (>= 1), ACT (activation), WG (host side:
// work-group size, a multiple of the device's SIMD width works best).

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
