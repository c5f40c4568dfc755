// Stage 02 in CUDA: the naive input gradient, the twin of 02_naive.cl.
//
// The same algorithm line for line: one thread computes one element dx[n][c][h][w], visits
// every output channel k and kernel offset (r, s), and keeps the terms whose output position
// (oh, ow) exists, with the stride and border checks inside the innermost loop. What differs is
// spelling only:
//   - the kernel is `extern "C" __global__` (unmangled, so the host finds it by name: what
//     course.h spells KERNEL for code both languages share), pointers carry no address
//     space, and `__restrict__` replaces `restrict`;
//   - a thread's indices are blockIdx * blockDim + threadIdx per dimension, where OpenCL asks
//     get_global_id; the host launches grid = (ceil(H*W / WG), C, N) blocks of (WG, 1, 1)
//     threads, the OpenCL NDRange divided by its work-group.
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
                grad += GRAD_IN(dy, y, o) * w[((c * K + k) * KH + r) * KW + s];
            }
        }
    }
    dx[((n * C + c) * H + h) * W + x] = grad;
}
