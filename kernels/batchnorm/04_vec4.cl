// Stage 04: 4-wide vector loads and stores, with a head and a tail for H*W % 4 != 0.
//
// Changed from stage 03: each slab (the H*W floats of one image and channel) is split by
// split4 (batchnorm.h) into a head of < 4 scalars up to the first 16-byte-aligned element, a
// body read and written as float4 (LOAD4/STORE4 through a float4 pointer: one 16-byte
// transaction per work-item instead of four 4-byte ones), and a tail of < 4 scalars. When
// H*W % 4 == 0 every slab starts aligned and the head and tail are empty; otherwise slab n
// starts (n*C + c)*H*W floats in, which is aligned for some n only, so the head and tail sizes
// change from slab to slab. Welford's update takes four values at a time (welford_add4: the
// float4's own mean and m2, merged with Chan's formula), which also removes 3 of 4 divisions.
//
// Kernels and arguments: as stage 01. NDRange: (WG * C), work-group WG.
// JIT parameters: WG (work-group size, a power of two), UPDATE_RUNNING, ACT.

#include "course.h"
#include "batchnorm.h"

#ifndef WG
#define WG 256          // work-group size: a power of two (the reduction tree halves it)
#endif
#ifndef UPDATE_RUNNING
#define UPDATE_RUNNING 0
#endif

// y = (x - m) * scale + b over channel c's N slabs, each as its head, float4 body and tail: pass 2
// of training and the whole of inference
inline void normalize4(__global const float* restrict x, __global float* restrict y, const int N, const int C,
                       const int HW, const int c, const int lid, const float m, const float scale, const float b) {
    for (int n = 0; n < N; n++) {
        const int g0 = (n * C + c) * HW, g1 = g0 + HW;
        int a0, a1;
        split4(g0, g1, &a0, &a1);
        if (g0 + lid < a0) y[g0 + lid] = fma(x[g0 + lid] - m, scale, b);
        for (int v = a0 / 4 + lid; v < a1 / 4; v += WG)
            STORE4(y, v, fma(LOAD4(x, v) - m, (float4)(scale), (float4)(b)));
        if (a1 + lid < g1) y[a1 + lid] = fma(x[a1 + lid] - m, scale, b);
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_forward_train(BN_FORWARD_TRAIN_ARGS) {
    __local float bn[WG], bmean[WG], bm2[WG];
    const int c = get_group_id(0);
    const int lid = get_local_id(0);
    const float count = (float)N * (float)HW;

    float n_i = 0.0f, mean = 0.0f, m2 = 0.0f;         // pass 1: Welford, then the merge tree
    for (int n = 0; n < N; n++) {
        const int g0 = (n * C + c) * HW, g1 = g0 + HW;
        int a0, a1;
        split4(g0, g1, &a0, &a1);
        if (g0 + lid < a0) welford_add(&n_i, &mean, &m2, x[g0 + lid]);          // head
        for (int v = a0 / 4 + lid; v < a1 / 4; v += WG)                          // body
            welford_add4(&n_i, &mean, &m2, LOAD4(x, v));
        if (a1 + lid < g1) welford_add(&n_i, &mean, &m2, x[a1 + lid]);          // tail
    }
    wg_merge(bn, bmean, bm2, &n_i, &mean, &m2);
    const float inv_std = 1.0f / sqrt(m2 / count + eps);

    const float scale = gamma[c] * inv_std;            // pass 2: normalize
    const float b = beta[c];
    normalize4(x, y, N, C, HW, c, lid, mean, scale, b);
    if (lid == 0)
        STORE_STATS(c, count, mean, inv_std, m2);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_forward_infer(BN_FORWARD_INFER_ARGS) {
    const int c = get_group_id(0);
    const int lid = get_local_id(0);
    const float scale = gamma[c] / sqrt(running_var[c] + eps);
    const float m = running_mean[c], b = beta[c];
    normalize4(x, y, N, C, HW, c, lid, m, scale, b);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_backward(BN_BACKWARD_ARGS) {
    __local float2 buf[WG];
    const int c = get_group_id(0);
    const int lid = get_local_id(0);
    const float m = mean[c];
    const float is = inv_std[c];

    float2 part = (float2)(0.0f);                      // pass 1: both sums, one tree
    for (int n = 0; n < N; n++) {
        const int g0 = (n * C + c) * HW, g1 = g0 + HW;
        int a0, a1;
        split4(g0, g1, &a0, &a1);
        if (g0 + lid < a0) {
            const float g = GRAD_IN(dy, out, g0 + lid);
            part += (float2)(g, g * (x[g0 + lid] - m));
        }
        for (int v = a0 / 4 + lid; v < a1 / 4; v += WG) {
            const float4 g = GRAD_IN4(dy, out, v);
            const float4 d = LOAD4(x, v) - m;
            part += (float2)((g.x + g.y) + (g.z + g.w), dot(g, d));
        }
        if (a1 + lid < g1) {
            const float g = GRAD_IN(dy, out, a1 + lid);
            part += (float2)(g, g * (x[a1 + lid] - m));
        }
    }
    const float2 sums = wg_sum2(buf, part);
    const float gbeta = sums.x;
    const float ggamma = sums.y * is;

    const float count = (float)N * (float)HW;          // pass 2: the input gradient
    const float k = gamma[c] * is;
    const float mb = gbeta / count, mg = ggamma / count;
    for (int n = 0; n < N; n++) {
        const int g0 = (n * C + c) * HW, g1 = g0 + HW;
        int a0, a1;
        split4(g0, g1, &a0, &a1);
        if (g0 + lid < a0) {
            const int e = g0 + lid;
            dx[e] = k * (GRAD_IN(dy, out, e) - mb - (x[e] - m) * is * mg);
        }
        for (int v = a0 / 4 + lid; v < a1 / 4; v += WG)
            STORE4(dx, v, k * (GRAD_IN4(dy, out, v) - mb - (LOAD4(x, v) - m) * is * mg));
        if (a1 + lid < g1) {
            const int e = a1 + lid;
            dx[e] = k * (GRAD_IN(dy, out, e) - mb - (x[e] - m) * is * mg);
        }
    }
    if (lid == 0) {
        grad_gamma[c] = ggamma;
        grad_beta[c] = gbeta;
    }
}
