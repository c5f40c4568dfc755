// Stage 02: one work-group per channel, sums reduced in local memory, two passes.
//
// Changed from stage 01: one idea and two switches. (1) Parallelism: the WG work-items of a
// work-group share one channel; each keeps a partial sum of the values it visits, and the
// work-group adds the WG partials with a tree in local memory (wg_sum in batchnorm.h: log2(WG)
// steps with a barrier between them). (2) Coalescing, the switch COALESCED: with 1 (the default)
// work-item l visits elements l, l + WG, l + 2*WG, ... of each slab, so neighbouring work-items
// read neighbouring floats; with 0 it walks its own contiguous chunk of ceil(HW / WG) elements,
// so neighbours read addresses a chunk apart (the same addresses as with 1 when HW <= WG).
// (3) The backward sums, the switch SPLIT_SUMS: with 1 (the default) the two sums take a pass
// each, so dy (and the output) are read three times where stage 01 read them twice; with 0 one
// pass feeds both, as in stage 01, each sum still through its own tree (stage 03 joins the trees).
// The forward pass still reads x three times: the mean, the squared deviations, y.
// Measured on the recorded H200 (geometric means over the bn layers, results/): x39.7 stage 01
// forward with COALESCED=1; COALESCED=0 took 0.86 of its time forward and 0.85 backward,
// interleaved faster only on the two 102.8 MB tensors (chapter 14, section 5). SPLIT_SUMS=0 took
// 0.77 of SPLIT_SUMS=1's time backward (the same geometric mean; tags split_sums0/1).
//
// Kernels and arguments: as stage 01. NDRange: (WG * C), work-group WG.
// JIT parameters: WG (work-group size, a power of two), COALESCED (0 or 1), SPLIT_SUMS (0 or 1),
// UPDATE_RUNNING, ACT.

#include "course.h"
#include "batchnorm.h"

#ifndef WG
#define WG 256          // work-group size: a power of two (the reduction tree halves it)
#endif
#ifndef COALESCED
#define COALESCED 1     // 1: interleaved (neighbours read neighbouring floats); 0: a chunk each
#endif
#ifndef SPLIT_SUMS
#define SPLIT_SUMS 1    // backward: 1: one pass per sum (three reads of dy); 0: both sums in one pass
#endif
#ifndef UPDATE_RUNNING
#define UPDATE_RUNNING 0
#endif

// The elements of each slab that work-item lid visits: first, first + step, ... below last.
inline void slab_part(const int lid, const int HW, int* first, int* last, int* step) {
#if COALESCED
    *first = lid; *last = HW; *step = WG;              // interleaved: lid, lid + WG, lid + 2*WG, ...
#else
    const int chunk = (HW + WG - 1) / WG;              // its own chunk: lid*chunk ... lid*chunk + chunk-1
    *first = min(HW, lid * chunk); *last = min(HW, *first + chunk); *step = 1;
#endif
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_forward_train(BN_FORWARD_TRAIN_ARGS) {
    __local float buf[WG];
    const int c = get_group_id(0);
    const int lid = get_local_id(0);
    int first, last, step;
    slab_part(lid, HW, &first, &last, &step);
    const float count = (float)N * (float)HW;

    float part = 0.0f;                                 // pass 1: the mean
    for (int n = 0; n < N; n++)
        for (int i = first; i < last; i += step) part += x[(n * C + c) * HW + i];
    const float mean = wg_sum(buf, part) / count;

    part = 0.0f;                                       // pass 2: squared deviations
    for (int n = 0; n < N; n++)
        for (int i = first; i < last; i += step) {
            const float d = x[(n * C + c) * HW + i] - mean;
            part = fma(d, d, part);
        }
    const float m2 = wg_sum(buf, part);
    const float inv_std = 1.0f / sqrt(m2 / count + eps);

    const float scale = gamma[c] * inv_std;            // pass 3: normalize
    const float b = beta[c];
    for (int n = 0; n < N; n++)
        for (int i = first; i < last; i += step) {
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
    int first, last, step;
    slab_part(lid, HW, &first, &last, &step);
    const float scale = gamma[c] / sqrt(running_var[c] + eps);
    const float m = running_mean[c], b = beta[c];
    for (int n = 0; n < N; n++)
        for (int i = first; i < last; i += step) {
            const int e = (n * C + c) * HW + i;
            y[e] = fma(x[e] - m, scale, b);
        }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void bn_backward(BN_BACKWARD_ARGS) {
    __local float buf[WG];
    const int c = get_group_id(0);
    const int lid = get_local_id(0);
    int first, last, step;
    slab_part(lid, HW, &first, &last, &step);
    const float m = mean[c];
    const float is = inv_std[c];

#if SPLIT_SUMS
    float part = 0.0f;                                 // pass 1: sum of g
    for (int n = 0; n < N; n++)
        for (int i = first; i < last; i += step) part += GRAD_IN(dy, out, (n * C + c) * HW + i);
    const float gbeta = wg_sum(buf, part);

    part = 0.0f;                                       // pass 2: sum of g * (x - mean)
    for (int n = 0; n < N; n++)
        for (int i = first; i < last; i += step) {
            const int e = (n * C + c) * HW + i;
            part = fma(GRAD_IN(dy, out, e), x[e] - m, part);
        }
    const float ggamma = wg_sum(buf, part) * is;
#else
    float part = 0.0f, part_d = 0.0f;                  // pass 1: both sums, as stage 01
    for (int n = 0; n < N; n++)
        for (int i = first; i < last; i += step) {
            const int e = (n * C + c) * HW + i;
            const float g = GRAD_IN(dy, out, e);
            part += g;
            part_d = fma(g, x[e] - m, part_d);
        }
    const float gbeta = wg_sum(buf, part);             // then one tree per sum
    const float ggamma = wg_sum(buf, part_d) * is;
#endif

    const float count = (float)N * (float)HW;          // last pass: the input gradient
    const float k = gamma[c] * is;
    const float mb = gbeta / count, mg = ggamma / count;
    for (int n = 0; n < N; n++)
        for (int i = first; i < last; i += step) {
            const int e = (n * C + c) * HW + i;
            const float xhat = (x[e] - m) * is;
            dx[e] = k * (GRAD_IN(dy, out, e) - mb - xhat * mg);
        }
    if (lid == 0) {
        grad_gamma[c] = ggamma;
        grad_beta[c] = gbeta;
    }
}
