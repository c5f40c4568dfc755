// conv_wgrad stage 02: the sum over output positions split across work-groups.
//
// What changed since stage 01: there, each weight's sum over the N*OH*OW output positions ran in
// one work-item, one add after another. A 64-channel 3x3 layer has 36,864 weights, so 36,864
// work-items: an H200 keeps 132 x 2048 = 270,336 in flight, so seven in eight of its slots stay
// empty, and each work-item waits on a chain of 200,704 dependent adds at batch 64 on 56x56.
// The work is there, the parallelism is not: it is inside the sum. So the sum is split, in two
// levels, without float atomics:
//
//   wgrad_partial  one work-group per (weight, slice of SLICE = WG*ITEMS consecutive positions):
//                  each work-item adds ITEMS products, strided by WG so that neighbours read
//                  neighbouring positions; the group's WG partial sums are combined by a tree
//                  in local memory (log2 WG halving steps with a barrier each), and work-item 0
//                  writes the slice's sum into the workspace: partials[slice][weight].
//   wgrad_sum      one work-item per weight adds its SPLITS slice sums, in slice order
//                  (kernels/common/wgrad_sum.h, shared with stage 03).
//
// Every addition happens in an order fixed by the launch geometry, so the result is the same
// on every run (atomic adds into dw would make the order, and the last bits, vary from run to
// run). The split also shortens each serial chain from N*OH*OW adds to ITEMS + log2 WG + SPLITS;
// the bound on a float sum's rounding error grows with that length, so it costs no accuracy.
// The tuning trades the two levels: small slices give many groups (parallelism) and a large
// workspace (SPLITS * C*K*R*S floats) for wgrad_sum to read; large slices the reverse.
//
// Layouts: x (N,C,H,W); dy, y (N,K,OH,OW); dw IOHW (C,K,KH,KW); partials (SPLITS, C*K*KH*KW).
// NDRange: wgrad_partial (C*K*KH*KW * WG, SPLITS), work-group (WG, 1);
//          wgrad_sum (C*K*KH*KW padded to WG), work-group (WG).
// JIT parameters: KH, KW, STRIDE, ACT; WG (a power of two: the tree halves it), ITEMS (products
// per work-item); SPLITS = ceil(N*OH*OW / (WG*ITEMS)) is a kernel argument (helpers/launch/wgrad.py).

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
#ifndef WG
#define WG 256
#endif
#ifndef ITEMS
#define ITEMS 16
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void wgrad_partial(__global const float* restrict x, __global const float* restrict dy,
                   __global const float* restrict y, __global float* restrict partials,
                   const int N, const int C, const int H, const int W,
                   const int K, const int OH, const int OW, const int PAD) {
    __local float sums[WG];
    const int i = get_group_id(0);                // the weight: its IOHW index (c, k, r, s)
    const int s = i % KW, r = (i / KW) % KH, k = (i / (KW * KH)) % K, c = i / (KW * KH * K);
    const int t = get_local_id(0);
    const int OHW = OH * OW, NP = N * OHW;
    const int first = get_group_id(1) * (WG * ITEMS);
    const int last = min(first + WG * ITEMS, NP);

    // q = (n, oh, ow) flattened, kept as the image n and the position p = oh*OW + ow in it:
    // decoded by division once, then advanced by WG (dividing by OH*OW only when it crosses
    // into another image)
    int n = (first + t) / OHW, p = (first + t) % OHW;
    float grad = 0.0f;
    for (int q = first + t; q < last; q += WG) {
        const int oh = p / OW, ow = p - oh * OW;
        const int h = oh * STRIDE + r - PAD, xw = ow * STRIDE + s - PAD;
        if (h >= 0 && h < H && xw >= 0 && xw < W) {              // padding: x is zero there
            const int o = (n * K + k) * OHW + p;
            grad += x[((n * C + c) * H + h) * W + xw] * GRAD_IN(dy, y, o);
        }
        p += WG;
        if (p >= OHW) { n += p / OHW; p %= OHW; }  // into the next image(s)
    }
    sums[t] = grad;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int width = WG / 2; width > 0; width /= 2) { // the tree: pairs, then pairs of pairs ...
        if (t < width) sums[t] += sums[t + width];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) partials[get_group_id(1) * (C * K * KH * KW) + i] = sums[0];
}

#include "wgrad_sum.h"      // wgrad_sum: each weight's SPLITS slice sums, in slice order
