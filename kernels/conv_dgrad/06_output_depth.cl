// Stage 06: combining output depth.
//
// What changed since stage 05: when K (the layer's output depth) is a multiple of 16 (decided on
// the host and passed as the JIT parameter K16, so the preprocessor keeps exactly one path), the
// 3x3 path walks the output channels 16 at a time. The 16 x 9 = 144 weights of (c, k0..k0+15)
// are consecutive in the IOHW tensor; they arrive through nine 16-wide loads that alternate
// between two float16 registers (ping, pong) and are handed out to 16 weights3x3 blocks
// (load_weights_16x3x3 below). The depth loop moved innermost: the bounds table is looked up
// once per row (or tap) for 16 depths instead of once per depth. When K % 16 != 0, KB is 1 and
// the code is stage 05's loop; other kernel sizes keep the general path.
//
// Why: stage 04's blocks of 9 floats start 36 bytes apart, so a 9-float block often straddles
// two cache lines and leaves a scalar load behind. Sixteen blocks fill exactly nine 64-byte
// lines, read with full-width requests. The weights of one (c, k0) block are the same for every
// work-item of a group (all share c), so the loads are few; what still dominates is dy, read
// once per (c, k) by every work-item: stage 07 reuses it across input channels.
//
// Memory safety: the block of (c, k0) is w[9*(c*K + k0)] .. w[9*(c*K + k0) + 143]; with
// k0 + 16 <= K it ends inside the tensor. dy offsets of depth k0+i are o0 + i*OH*OW, inside
// the tensor because k0 + i < K.
//
// Measured: the ladder in notebooks/06_combining_output_depth.ipynb
// (this device, and the GPU runs recorded in results/).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// NDRange: dim 0 = h*W + w (padded to WG), dim 1 = c, dim 2 = n (as stage 02).
// JIT parameters: KH, KW (kernel size, >= 1; 3x3 takes the vector paths), STRIDE (>= 1),
// ACT (activation), K16 (1 only if K % 16 == 0: set by the host from the problem), WG (host).

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
#ifndef K16
#define K16 0                 // 1 requires K % 16 == 0 (the host derives it from the problem)
#endif

#if KH == 3 && KW == 3 && K16
#define KB 16                 // output channels per iteration of the k loop
// The 16 x 9 weights of (c, k0 .. k0+15) through nine 16-wide loads. Load v brings floats
// 16v .. 16v+15 of the block into ping (v even) or pong (v odd); depth i's 9 weights are floats
// 9i .. 9i+8, so they are complete once load (9i+8)/16 has arrived, and they may start in the
// previous load: that is why two registers take turns. After unrolling, every index here is a
// constant and wk lives in registers. A 16-wide load is written as two vload8: on x86 CPUs without
// AVX-512, PoCL's vload16 returns a float16 through an ABI its built-in library does not share
// (its compiler warns so) and the upper 8 floats arrive as garbage; a GPU compiles both the same.
inline void load_weights_16x3x3(weights3x3 wk[16], __global const float* p) {
    union { float16 v; float s[16]; } pp[2];           // ping = pp[0], pong = pp[1]
#pragma unroll
    for (int i = 0; i < 16; i++) {
        const int last = (9 * i + 8) / 16;              // the load that completes depth i
        if (i == 0 || last != (9 * i - 1) / 16)         // not yet loaded for depth i - 1
        {                                               // one 16-wide load, as two 8-wide halves
            pp[last % 2].v.lo = vload8(2 * last, p);
            pp[last % 2].v.hi = vload8(2 * last + 1, p);
        }
#pragma unroll
        for (int t = 0; t < 9; t++)
            wk[i].s[t] = pp[((9 * i + t) / 16) % 2].s[(9 * i + t) % 16];
    }
}
#define LOAD_WEIGHTS(wk, p) load_weights_16x3x3(wk, p)
#else
#define KB 1                  // stage 05: one output channel per iteration
#define LOAD_WEIGHTS(wk, p) (wk[0] = load_weights3x3(p))
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
#if STRIDE == 1
    // The whole window's columns inside dy: one 3-wide load per valid row.
    const bool inside = x + PAD - 2 >= 0 && x + PAD < OW;
#else
    const bool inside = false;                          // strided: scalar loads only
#endif
    if (inside) {
        const int ow0 = x + PAD - 2;                    // leftmost column, s = 2
        for (int k0 = 0; k0 < K; k0 += KB) {
            weights3x3 wk[KB];
            LOAD_WEIGHTS(wk, w + (c * K + k0) * 9);     // KB blocks of 9 weights
#pragma unroll
            for (int r = 0; r < 3; r++) {
                if (!valid[r][0]) continue;             // one lookup for KB depths
                const int oh = h + PAD - r;
                const int o0 = ((n * K + k0) * OH + oh) * OW + ow0;
#pragma unroll
                for (int i = 0; i < KB; i++) {          // depth innermost
                    const float3 g = GRAD_IN3(dy, y, o0 + i * OH * OW);
                    grad += g.s0 * wk[i].s[r * 3 + 2] + g.s1 * wk[i].s[r * 3 + 1] + g.s2 * wk[i].s[r * 3 + 0];
                }
            }
        }
    } else                                              // borders, strides: stage 04's loop
    for (int k0 = 0; k0 < K; k0 += KB) {
        weights3x3 wk[KB];
        LOAD_WEIGHTS(wk, w + (c * K + k0) * 9);
#pragma unroll
        for (int r = 0; r < 3; r++) {
            const int oh = (h + PAD - r) / STRIDE;
#pragma unroll
            for (int s = 0; s < 3; s++) {
                if (!valid[r][s]) continue;             // one lookup for KB depths
                const int ow = (x + PAD - s) / STRIDE;
                const int o0 = ((n * K + k0) * OH + oh) * OW + ow;
#pragma unroll
                for (int i = 0; i < KB; i++)            // depth innermost
                    grad += GRAD_IN(dy, y, o0 + i * OH * OW) * wk[i].s[r * 3 + s];
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
