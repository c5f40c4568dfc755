// Stage 06: one launch, each tensor read once, for channels that fit one work-group's registers.
//
// Changed from stage 05: stage 05 cuts a channel into B blocks and needs two kernels, because no
// work-group can start normalizing before every block of its channel has been reduced; each
// tensor is read twice and a small tensor pays two launch latencies, which at these sizes cost
// more than moving the data. When the whole channel fits the registers of one work-group (N*H*W
// units <= WG * ITEMS, ITEMS small), B = 1: the work-group loads its channel once, reduces it,
// and writes the result from the values it still holds. With the values in registers the
// statistics use the plain two-pass formulas (the mean, then the squared deviations from it),
// exact up to rounding, without a second read (the switch TWO_PASS_STATS: 0 keeps stage 05's
// Welford update and Chan's merge, to show and time the change of formula alone: on the recorded
// H200 it took 1.15 of the two-pass time, geometric mean over the 4 bn layers that fit, tags
// two_pass_stats0/1). Larger channels do not fit: the stage falls back to stage 05
// (helpers/launch/batchnorm.py: channel_fits).
//
// Small channels (ResNet-50's 14x14 and 7x7 layers at batch 32: 1,568 units a channel, C of 256
// to 2,048) put one wave of C work-groups on the GPU, so the kernel's time is mostly its chain of
// latencies: the channel's loads, the statistics' trees, the stores. The forward kernel shortens
// that chain (each a switch, to time it alone):
//   EARLY_PARAMS: gamma[c], beta[c] and the running statistics loaded with the channel, not after
//     the trees (0: after, a second trip to memory the work-group waits for);
//   STEP_OFFSETS: each unit's offset walked from the previous one, WG units on (0: unit_start's
//     division per unit);
//   RADIX: trees that add RADIX values per work-item and level: log_RADIX(WG) barriers instead of
//     log2(WG) (2: wg_sum's binary tree);
//   and the launch's work-group: WG work-items (128), doubled up to 256 while the channel needs
//     more than 25 units a work-item (helpers/launch/batchnorm.py: one_pass_wg).
//
// Kernels and arguments: as stage 01 (no partials). NDRange: (WG * C), work-group WG.
// HOLD_OFFSETS (forward): 1 keeps each unit's offset in a register from the load to the store; 0
// computes it again for the store. With many units the held offsets cost occupancy: at ITEMS = 25
// the forward kernel used 178 registers on the H200 (124 without them), so a work-group of 256
// had an SM to itself instead of sharing it with another (results/registers_one_pass_*).
// The launch sets 0 above 8 units (helpers/launch/batchnorm.py: one_pass_items).
// JIT parameters: WG (a power of two: the launch's, one_pass_wg), ITEMS (units per work-item:
// ceil(N * units per slab / WG), derived from the problem), VEC4 (1 when H*W % 4 == 0),
// HOLD_OFFSETS (derived from ITEMS), TWO_PASS_STATS, EARLY_PARAMS, STEP_OFFSETS (0 or 1), RADIX
// (a power of two, 2 to 16), UPDATE_RUNNING, ACT.

#include "course.h"
#include "batchnorm.h"

#ifndef WG
#define WG 256          // work-group size: a power of two (the reduction tree halves it)
#endif
#ifndef ITEMS
#define ITEMS 4         // units per work-item: the whole channel is WG * ITEMS units at most
#endif
#ifndef VEC4
#define VEC4 0          // 1 only if H*W % 4 == 0 (host side: helpers/stages.py)
#endif
#ifndef TWO_PASS_STATS
#define TWO_PASS_STATS 1  // forward: 1: mean, then squared deviations, over registers; 0: Welford (as 05)
#endif
#ifndef UPDATE_RUNNING
#define UPDATE_RUNNING 0
#endif
#ifndef EARLY_PARAMS
#define EARLY_PARAMS 0  // forward: 1 loads gamma, beta (and the running statistics) beside the channel
#endif
#ifndef STEP_OFFSETS
#define STEP_OFFSETS 0  // forward: 1 walks the units' offsets without a division per unit
#endif
#ifndef RADIX
#define RADIX 2         // forward: the radix of the statistics' trees (2: wg_sum's binary tree)
#endif
#ifndef HOLD_OFFSETS
#define HOLD_OFFSETS 1  // forward: 1 holds each unit's offset in a register, 0 computes it again
#endif

// A unit and its operations: a float4 when VEC4, else a float (as stage 05).
#include "batchnorm_unit.h"

// The element where unit k of this work-item starts (the channel's units in slab order,
// neighbouring work-items on neighbouring units), or -1 past the channel's last unit.
inline int unit_start(const int k, const int c, const int N, const int C, const int HW) {
    const int per_slab = HW / UNIT;
    const int u = k * WG + get_local_id(0);
    if (u >= N * per_slab) return -1;
    const int n = u / per_slab;
    return (n * C + c) * HW + (u - n * per_slab) * UNIT;
}

// Whether unit k of this work-item lies in the channel (unit_start(k, ...) >= 0, without dividing).
inline bool unit_ok(const int k, const int N, const int HW) {
    return k * WG + (int)get_local_id(0) < N * (HW / UNIT);
}

// The walk over a work-item's units without a division per unit: unit k*WG + lid as (image n,
// unit r of the slab), advanced by WG units a step (q whole slabs and d units); the element where
// the unit starts, or -1 past the channel's last unit. STEP_OFFSETS = 0: unit_start's division.
inline void walk_start(int* n, int* r, const int per_slab) {
    *n = (int)get_local_id(0) / per_slab;
    *r = (int)get_local_id(0) - *n * per_slab;
}

inline int walk_next(int* n, int* r, const int slabs, const int rest, const int per_slab,
                     const int c, const int N, const int C, const int HW) {
    const int e = *n < N ? (*n * C + c) * HW + *r * UNIT : -1;
    *n += slabs;
    *r += rest;
    if (*r >= per_slab) { *r -= per_slab; *n += 1; }
    return e;
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_forward_train(BN_FORWARD_TRAIN_ARGS) {
#if TWO_PASS_STATS
    __local float buf[WG];
#else
    __local float bn[WG], bmean[WG], bm2[WG];
#endif
    const int c = get_group_id(0);
#if EARLY_PARAMS
    const float g_c = gamma[c], b_c = beta[c];         // loaded beside the channel, not after the trees
#if UPDATE_RUNNING
    const float rm_c = running_mean[c], rv_c = running_var[c];
#endif
#endif
    unit_t v[ITEMS];
#if HOLD_OFFSETS
    int e[ITEMS];
#endif
    const int per_slab = HW / UNIT;
#if STEP_OFFSETS
    const int slabs = WG / per_slab, rest = WG - slabs * per_slab;   // WG units: whole slabs and the rest
    int wn, wr;
    walk_start(&wn, &wr, per_slab);
#define NEXT_START(k) walk_next(&wn, &wr, slabs, rest, per_slab, c, N, C, HW)
#else
#define NEXT_START(k) unit_start(k, c, N, C, HW)
#endif
    const float count = (float)N * (float)HW;
#if TWO_PASS_STATS
    float s = 0.0f;
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {                  // the channel, loaded once
        const int ek = NEXT_START(k);
#if HOLD_OFFSETS
        e[k] = ek;
#endif
        v[k] = ek >= 0 ? LOADU(x, ek) : (unit_t)(0.0f);
        s += SUMU(v[k]);
    }
    const float mean = wg_sum_radix(buf, s, WG, RADIX) / count;   // pass 1 over registers: the mean
    float q = 0.0f;
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {                  // pass 2 over registers: squared deviations
        const unit_t d = unit_ok(k, N, HW) ? v[k] - mean : (unit_t)(0.0f);
        q += DOTU(d, d);
    }
    const float m2 = wg_sum_radix(buf, q, WG, RADIX);
#else
    float n_i = 0.0f, mean = 0.0f, m2 = 0.0f;
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {                  // the channel, loaded once, Welford as loaded
        const int ek = NEXT_START(k);
#if HOLD_OFFSETS
        e[k] = ek;
#endif
        v[k] = ek >= 0 ? LOADU(x, ek) : (unit_t)(0.0f);
        if (ek >= 0) WELFORD_U(&n_i, &mean, &m2, v[k]);
    }
    wg_merge(bn, bmean, bm2, &n_i, &mean, &m2);        // Chan's merge in the tree, as stage 05
#endif
    const float inv_std = 1.0f / sqrt(m2 / count + eps);

#if EARLY_PARAMS
    const float scale = g_c * inv_std, shift = b_c;
#else
    const float scale = gamma[c] * inv_std, shift = beta[c];
#endif
#if !HOLD_OFFSETS && STEP_OFFSETS
    walk_start(&wn, &wr, per_slab);
#endif
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {                  // normalize from registers
#if HOLD_OFFSETS
        const int ek = e[k];
#else
        const int ek = NEXT_START(k);                  // again: no register holds it meanwhile
#endif
        if (ek >= 0)
            STOREU(y, ek, fma(v[k] - mean, (unit_t)(scale), (unit_t)(shift)));
    }
#undef NEXT_START
    if (get_local_id(0) == 0) {
        mean_out[c] = mean;
        inv_std_out[c] = inv_std;
#if UPDATE_RUNNING
#if EARLY_PARAMS
        running_store(running_mean_out, running_var_out, c, rm_c, rv_c, count, mean, m2, momentum);
#else
        running_update(running_mean, running_var, running_mean_out, running_var_out, c, count, mean, m2, momentum);
#endif
#endif
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_forward_infer(BN_FORWARD_INFER_ARGS) {
    const int c = get_group_id(0);
    const float scale = gamma[c] / sqrt(running_var[c] + eps);
    const float m = running_mean[c], shift = beta[c];
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        const int e = unit_start(k, c, N, C, HW);
        if (e >= 0) STOREU(y, e, fma(LOADU(x, e) - m, (unit_t)(scale), (unit_t)(shift)));
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_backward(BN_BACKWARD_ARGS) {
    __local float2 buf[WG];
    const int c = get_group_id(0);
    const float m = mean[c], is = inv_std[c];
    unit_t g[ITEMS], d[ITEMS];
    int e[ITEMS];
    float2 part = (float2)(0.0f);
    #pragma unroll
    for (int k = 0; k < ITEMS; k++) {                  // the channel's gradient and input, once
        e[k] = unit_start(k, c, N, C, HW);
        g[k] = e[k] >= 0 ? GRAD_INU(dy, out, e[k]) : (unit_t)(0.0f);
        d[k] = e[k] >= 0 ? LOADU(x, e[k]) - m : (unit_t)(0.0f);
        part += (float2)(SUMU(g[k]), DOTU(g[k], d[k]));
    }
    const float2 sums = wg_sum2(buf, part);
    const float gbeta = sums.x, ggamma = sums.y * is;

    const float count = (float)N * (float)HW;
    const float scale = gamma[c] * is;
    const float mb = gbeta / count, mg = ggamma / count;
    #pragma unroll
    for (int k = 0; k < ITEMS; k++)                    // the input gradient from registers
        if (e[k] >= 0) STOREU(dx, e[k], scale * (g[k] - mb - d[k] * is * mg));
    if (get_local_id(0) == 0) {
        grad_gamma[c] = ggamma;
        grad_beta[c] = gbeta;
    }
}
