// Stage 03: one pass for the statistics (Welford in each work-item, Chan's merge in the tree).
//
// Changed from stage 02: each work-item keeps (count, mean, m2) and updates it with Welford's
// rule for every value it reads (welford_add in batchnorm.h); the work-group then merges the WG
// triples with Chan's formula at every level of the same local-memory tree (wg_merge). The mean
// and the variance come out of one read of x, so the forward pass reads x twice instead of three
// times, and still never forms the large squares of E[x^2] - E[x]^2. The backward pass reduces
// its two sums in one pass, as stage 02 with SPLIT_SUMS=0 (so it reads dy and x twice instead
// of dy three times), and through one tree of float2 lanes instead of two trees.
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

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_forward_train(BN_FORWARD_TRAIN_ARGS) {
    __local float bn[WG], bmean[WG], bm2[WG];
    const int c = get_group_id(0);
    const int lid = get_local_id(0);
    const float count = (float)N * (float)HW;

    float n_i = 0.0f, mean = 0.0f, m2 = 0.0f;         // pass 1: Welford, then the merge tree
    for (int n = 0; n < N; n++)
        for (int i = lid; i < HW; i += WG) welford_add(&n_i, &mean, &m2, x[(n * C + c) * HW + i]);
    wg_merge(bn, bmean, bm2, &n_i, &mean, &m2);
    const float inv_std = 1.0f / sqrt(m2 / count + eps);

    const float scale = gamma[c] * inv_std;            // pass 2: normalize
    const float b = beta[c];
    for (int n = 0; n < N; n++)
        for (int i = lid; i < HW; i += WG) {
            const int e = (n * C + c) * HW + i;
            y[e] = fma(x[e] - mean, scale, b);
        }
    if (lid == 0)
        STORE_STATS(c, count, mean, inv_std, m2);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_forward_infer(BN_FORWARD_INFER_ARGS) {
    const int c = get_group_id(0);
    const int lid = get_local_id(0);
    const float scale = gamma[c] / sqrt(running_var[c] + eps);
    const float m = running_mean[c], b = beta[c];
    for (int n = 0; n < N; n++)
        for (int i = lid; i < HW; i += WG) {
            const int e = (n * C + c) * HW + i;
            y[e] = fma(x[e] - m, scale, b);
        }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_backward(BN_BACKWARD_ARGS) {
    __local float2 buf[WG];
    const int c = get_group_id(0);
    const int lid = get_local_id(0);
    const float m = mean[c];
    const float is = inv_std[c];

    float2 part = (float2)(0.0f);                      // pass 1: both sums, one tree
    for (int n = 0; n < N; n++)
        for (int i = lid; i < HW; i += WG) {
            const int e = (n * C + c) * HW + i;
            const float g = GRAD_IN(dy, out, e);
            part += (float2)(g, g * (x[e] - m));
        }
    const float2 sums = wg_sum2(buf, part);
    const float gbeta = sums.x;
    const float ggamma = sums.y * is;

    const float count = (float)N * (float)HW;          // pass 2: the input gradient
    const float k = gamma[c] * is;
    const float mb = gbeta / count, mg = ggamma / count;
    for (int n = 0; n < N; n++)
        for (int i = lid; i < HW; i += WG) {
            const int e = (n * C + c) * HW + i;
            const float xhat = (x[e] - m) * is;
            dx[e] = k * (GRAD_IN(dy, out, e) - mb - xhat * mg);
        }
    if (lid == 0) {
        grad_gamma[c] = ggamma;
        grad_beta[c] = gbeta;
    }
}
