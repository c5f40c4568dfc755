// Stage 03 in CUDA: memoized bounds, the twin of 03_memoized_bounds.cl.
//
// The same algorithm as the OpenCL stage: each thread evaluates the padding and stride checks
// once, into a KH x KW table of booleans, and the k loop only looks the table up. The loops over
// r and s have compile-time bounds (KH, KW are -D parameters), so `#pragma unroll` turns the
// table into registers in both languages. It includes course.h only: stage 03's OpenCL helpers
// in dgrad.h are vector loads (float8, vload3) that CUDA spells differently and this stage does
// not use. Indices and launch as in 02_naive.cu.
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// JIT parameters: KH, KW (kernel size), STRIDE, ACT (activation), WG (block size, host side).

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

extern "C" __global__ void conv_dgrad(const float* __restrict__ dy,  // gradient w.r.t. the layer output
                                      const float* __restrict__ y,   // layer output after activation
                                      const float* __restrict__ w,   // weights, IOHW
                                      float* __restrict__ dx,        // gradient w.r.t. the layer input
                                      const int N, const int C, const int H, const int W,
                                      const int K, const int OH, const int OW, const int PAD) {
    const int hw = blockIdx.x * blockDim.x + threadIdx.x;
    const int c = blockIdx.y;
    const int n = blockIdx.z;
    if (hw >= H * W) return;             // the grid is rounded up to whole blocks of WG
    const int h = hw / W;
    const int x = hw % W;

    // The checks, once per thread: valid[r][s] says whether output (oh, ow) exists.
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
