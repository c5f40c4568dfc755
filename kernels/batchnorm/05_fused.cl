// Stage 05: many work-groups per channel (a two-level reduction), each tensor read twice.
//
// Changed from stage 04: one work-group per channel gives only C work-groups, too few to keep a
// large GPU's memory system busy when C is small or N*H*W is large. Here the NDRange is
// (WG * B, C): the N*H*W values of a channel are cut into B blocks of WG*ITEMS units, one
// work-group per block. A unit is a float4 when H*W % 4 == 0 (then no float4 straddles two
// slabs) and a single float otherwise (still coalesced: neighbouring work-items read
// neighbouring units). Each launch is two kernels:
//   1. bn_stats_partial / bn_sums_partial: every work-group reduces its block (Welford + Chan's
//      merge for the forward pass; the two sums for the backward pass) and writes one partial
//      to a scratch buffer: the first level of the reduction.
//   2. bn_forward_train / bn_backward: every work-group first issues the loads of its block
//      into registers, then merges the B partials of its channel while those loads are in
//      flight (a few hundred bytes, from cache; every work-group merges in the same order, so
//      all agree bit for bit), then writes its block's output (y, or the input gradient with
//      the activation's derivative fused on the read of dy). Block 0 writes the per-channel
//      results (mean, inv_std, running statistics; grad_gamma, grad_beta). EARLY_LOADS = 0: the
//      merge first, then each unit loaded and written in one loop (as stage 04 does), a switch
//      to show and time the early loads alone. On the recorded H200 EARLY_LOADS=0 took 1.05
//      (forward) and 1.02 (backward) of EARLY_LOADS=1's time, geometric means over the bn layers
//      (tags early_loads0/1, chapter 14).
// The second kernel visits the blocks in the reverse order of the first (work-groups are
// started roughly in the order of their ids): the blocks the first kernel read last are the ones
// most likely still in the last-level cache, so part of the second read comes from there
// (REVERSE = 0: the same order, a switch to show and time this change alone). Measured on the
// recorded H200, forward: REVERSE=1 x1.02 (geometric mean over the bn layers), x1.065 at most.
// The forward pass reads x twice and writes y once; the backward pass reads dy and x (and the
// forward output, with an activation) twice and writes dx once. Reading each tensor once would
// need the whole tensor on chip between the two levels of the reduction.
//
// Kernels: bn_stats_partial (x -> partials; N, C, HW), then bn_forward_train (stage 01's
// arguments, then partials); bn_forward_infer as stage 01; bn_sums_partial (grad_output,
// output, x, mean -> partials; N, C, HW), then bn_backward (stage 01's arguments, then
// partials). NDRange: (WG * B, C), work-group (WG, 1), B = ceil(N * units per slab / (WG*ITEMS)).
// JIT parameters: WG (a power of two), ITEMS (units per work-item per block, >= 1),
// VEC4 (1 when H*W % 4 == 0, derived from the problem), REVERSE (0 or 1), EARLY_LOADS (0 or 1),
// UPDATE_RUNNING, ACT.

#include "course.h"
#include "batchnorm.h"

#ifndef WG
#define WG 256          // work-group size: a power of two (the reduction tree halves it)
#endif
#ifndef ITEMS
#define ITEMS 4         // units per work-item in one block: >= 1 (registers grow with it)
#endif
#ifndef VEC4
#define VEC4 0          // 1 only if H*W % 4 == 0 (host side: helpers/stages.py)
#endif
#ifndef REVERSE
#define REVERSE 1       // 1: the second kernel visits blocks and channels in reverse (see above)
#endif
#ifndef EARLY_LOADS
#define EARLY_LOADS 1   // 1: the second kernel loads its block before merging the partials (see above)
#endif
#ifndef UPDATE_RUNNING
#define UPDATE_RUNNING 0
#endif
#define CHUNK (WG * ITEMS)   // units per block

// A unit and its operations: a float4 when VEC4, else a float.
#include "batchnorm_unit.h"

// the work-group's block of its channel, and the channel: in launch order, or reversed (REVERSE)
inline int2 block_and_channel(const int C) {
#if REVERSE
    return (int2)(get_num_groups(0) - 1 - get_group_id(0), C - 1 - get_group_id(1));
#else
    return (int2)(get_group_id(0), get_group_id(1));
#endif
}

// The element where unit k of this work-item's block starts (units run through the channel's
// slabs in order), or -1 past the channel's last unit.
inline int unit_start(const int b, const int k, const int c, const int N, const int C, const int HW) {
    const int per_slab = HW / UNIT;
    const int u = b * CHUNK + k * WG + get_local_id(0);
    if (u >= N * per_slab) return -1;
    const int n = u / per_slab;
    return (n * C + c) * HW + (u - n * per_slab) * UNIT;
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_stats_partial(__global const float* x, __global float* partials,
                      const int N, const int C, const int HW) {
    __local float bn[WG], bmean[WG], bm2[WG];
    const int b = get_group_id(0), c = get_group_id(1);
    unit_t v[ITEMS];
    int e[ITEMS];
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {                  // all loads first: ITEMS in flight
        e[k] = unit_start(b, k, c, N, C, HW);
        v[k] = e[k] >= 0 ? LOADU(x, e[k]) : (unit_t)(0.0f);
    }
    float n_i = 0.0f, mean = 0.0f, m2 = 0.0f;
    #pragma unroll
    for (int k = 0; k < ITEMS; k++)
        if (e[k] >= 0) WELFORD_U(&n_i, &mean, &m2, v[k]);
    wg_merge(bn, bmean, bm2, &n_i, &mean, &m2);
    if (get_local_id(0) == 0) {
        const int p = (c * get_num_groups(0) + b) * 3;
        partials[p] = n_i;
        partials[p + 1] = mean;
        partials[p + 2] = m2;
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_forward_train(BN_FORWARD_TRAIN_ARGS, __global const float* partials) {
    __local float bn[WG], bmean[WG], bm2[WG];
    const int nb = get_num_groups(0), lid = get_local_id(0);
    const int2 bc = block_and_channel(C);
    const int b = bc.x, c = bc.y;
#if EARLY_LOADS
    unit_t v[ITEMS];
    int e[ITEMS];
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {                  // this block's loads, issued first
        e[k] = unit_start(b, k, c, N, C, HW);
        v[k] = e[k] >= 0 ? LOADU(x, e[k]) : (unit_t)(0.0f);
    }
#endif

    float n_i = 0.0f, mean = 0.0f, m2 = 0.0f;         // level 2: merge the channel's partials
    for (int j = lid; j < nb; j += WG) {
        const int p = (c * nb + j) * 3;
        chan_merge(&n_i, &mean, &m2, partials[p], partials[p + 1], partials[p + 2]);
    }
    wg_merge(bn, bmean, bm2, &n_i, &mean, &m2);
    const float inv_std = 1.0f / sqrt(m2 / n_i + eps);

    const float scale = gamma[c] * inv_std, shift = beta[c];
#if EARLY_LOADS
    #pragma unroll
    for (int k = 0; k < ITEMS; k++)                    // normalize this block
        if (e[k] >= 0) STOREU(y, e[k], fma(v[k] - mean, (unit_t)(scale), (unit_t)(shift)));
#else
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {                  // load and normalize this block, only now
        const int e = unit_start(b, k, c, N, C, HW);
        if (e >= 0) STOREU(y, e, fma(LOADU(x, e) - mean, (unit_t)(scale), (unit_t)(shift)));
    }
#endif
    if (b == 0 && lid == 0)
        STORE_STATS(c, n_i, mean, inv_std, m2);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_forward_infer(BN_FORWARD_INFER_ARGS) {
    const int b = get_group_id(0), c = get_group_id(1);
    const float scale = gamma[c] / sqrt(running_var[c] + eps);
    const float m = running_mean[c], shift = beta[c];
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        const int e = unit_start(b, k, c, N, C, HW);
        if (e >= 0) STOREU(y, e, fma(LOADU(x, e) - m, (unit_t)(scale), (unit_t)(shift)));
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_sums_partial(__global const float* dy, __global const float* out,
                     __global const float* x, __global const float* mean,
                     __global float* partials, const int N, const int C, const int HW) {
    __local float2 buf[WG];
    const int b = get_group_id(0), c = get_group_id(1);
    unit_t g[ITEMS], d[ITEMS];
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {                  // all loads first
        const int e = unit_start(b, k, c, N, C, HW);
        g[k] = e >= 0 ? GRAD_INU(dy, out, e) : (unit_t)(0.0f);
        d[k] = e >= 0 ? LOADU(x, e) : (unit_t)(0.0f);
    }
    const float m = mean[c];
    float2 part = (float2)(0.0f);
    #pragma unroll
    for (int k = 0; k < ITEMS; k++)                    // zeros past the end add nothing (g = 0)
        part += (float2)(SUMU(g[k]), DOTU(g[k], d[k] - m));
    const float2 sums = wg_sum2(buf, part);
    if (get_local_id(0) == 0) vstore2(sums, c * get_num_groups(0) + b, partials);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_backward(BN_BACKWARD_ARGS, __global const float* partials) {
    __local float2 buf[WG];
    const int nb = get_num_groups(0), lid = get_local_id(0);
    const int2 bc = block_and_channel(C);
    const int b = bc.x, c = bc.y;
#if EARLY_LOADS
    unit_t g[ITEMS], xv[ITEMS];
    int e[ITEMS];
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {                  // this block's loads, issued first
        e[k] = unit_start(b, k, c, N, C, HW);
        g[k] = e[k] >= 0 ? GRAD_INU(dy, out, e[k]) : (unit_t)(0.0f);
        xv[k] = e[k] >= 0 ? LOADU(x, e[k]) : (unit_t)(0.0f);
    }
#endif
    float2 part = (float2)(0.0f);                      // level 2: add the channel's partials
    for (int j = lid; j < nb; j += WG) part += vload2(c * nb + j, partials);
    const float2 sums = wg_sum2(buf, part);
    const float m = mean[c], is = inv_std[c];
    const float gbeta = sums.x, ggamma = sums.y * is;

    const float count = (float)N * (float)HW;
    const float scale = gamma[c] * is;
    const float mb = gbeta / count, mg = ggamma / count;
#if EARLY_LOADS
    #pragma unroll
    for (int k = 0; k < ITEMS; k++)                    // the input gradient of this block
        if (e[k] >= 0) STOREU(dx, e[k], scale * (g[k] - mb - (xv[k] - m) * is * mg));
#else
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {                  // load and differentiate this block, only now
        const int e = unit_start(b, k, c, N, C, HW);
        if (e >= 0) STOREU(dx, e, scale * (GRAD_INU(dy, out, e) - mb - (LOADU(x, e) - m) * is * mg));
    }
#endif
    if (b == 0 && lid == 0) {
        grad_gamma[c] = ggamma;
        grad_beta[c] = gbeta;
    }
}
