// Device code shared by the batch-norm kernels (kernels/batchnorm/*.cl), chapter 14.
//
// Layout: x, y, dy, dx are NCHW; channel c owns N slabs of HW = H*W consecutive floats, the
// slab of image n starting at element (n*C + c)*HW. Per-channel vectors have C entries.
#ifndef BATCHNORM_H
#define BATCHNORM_H

#include "course.h"

// The kernels' argument lists, the same in every stage (helpers/ops/batchnorm_*.py's order; stage
// 05's second kernels add their partials after them).
#define BN_FORWARD_TRAIN_ARGS                                                                   \
    __global const float* x, __global const float* gamma, __global const float* beta,         \
    __global const float* running_mean, __global const float* running_var, __global float* y, \
    __global float* mean_out, __global float* inv_std_out,                                     \
    __global float* running_mean_out, __global float* running_var_out,                         \
    const int N, const int C, const int HW, const float eps, const float momentum
#define BN_FORWARD_INFER_ARGS                                                                   \
    __global const float* x, __global const float* gamma, __global const float* beta,         \
    __global const float* running_mean, __global const float* running_var, __global float* y, \
    const int N, const int C, const int HW, const float eps
#define BN_BACKWARD_ARGS                                                                        \
    __global const float* dy, __global const float* out, __global const float* x,             \
    __global const float* gamma, __global const float* mean, __global const float* inv_std,   \
    __global float* dx, __global float* grad_gamma, __global float* grad_beta,                 \
    const int N, const int C, const int HW

// Per-channel statistics are carried as (count, mean, m2), m2 = sum of squared deviations
// from the mean. Counts are floats: exact up to 2^24, which helpers/ops checks for N*H*W.

// Welford's update: add one value to (n, mean, m2). No large squares are ever formed, so a
// large mean does not swamp a small variance (the E[x^2] - E[x]^2 failure of chapter 14).
inline void welford_add(float* n, float* mean, float* m2, const float v) {
    *n += 1.0f;
    const float d = v - *mean;
    *mean += d / *n;
    *m2 = fma(d, v - *mean, *m2);
}

// Chan's merge of two sets' statistics (a) += (b): exact in real arithmetic, and what a
// reduction tree does at every level.
inline void chan_merge(float* na, float* meana, float* m2a, const float nb, const float meanb, const float m2b) {
    const float n = *na + nb;
    if (nb == 0.0f) return;
    const float d = meanb - *meana;
    const float f = nb / n;
    *meana = fma(d, f, *meana);
    *m2a += m2b + d * d * (*na) * f;
    *na = n;
}

// Four values at once: their own (4, mean, m2), merged into (n, mean, m2) (chan_merge above).
inline void welford_add4(float* n, float* mean, float* m2, const float4 v) {
    const float m4 = 0.25f * ((v.x + v.y) + (v.z + v.w));
    const float4 d = v - m4;
    chan_merge(n, mean, m2, 4.0f, m4, dot(d, d));
}

// Per-channel results of training: the running statistics' momentum update uses the unbiased
// variance m2 / (count - 1), as PyTorch does; the batch statistics themselves are biased.
// running_store: the same from the old running values already loaded (rm, rv).
inline void running_store(__global float* running_mean_out, __global float* running_var_out,
                          const int c, const float rm, const float rv, const float count,
                          const float mean, const float m2, const float momentum) {
    running_mean_out[c] = (1.0f - momentum) * rm + momentum * mean;
    running_var_out[c] = (1.0f - momentum) * rv + momentum * (m2 / (count - 1.0f));
}

inline void running_update(__global const float* running_mean, __global const float* running_var,
                           __global float* running_mean_out, __global float* running_var_out,
                           const int c, const float count, const float mean, const float m2,
                           const float momentum) {
    running_store(running_mean_out, running_var_out, c, running_mean[c], running_var[c], count, mean, m2, momentum);
}

// The per-channel results of the training forward pass, written by one work-item: the batch's
// mean and inv_std, and, where update (UPDATE_RUNNING, known when the kernel is built), the
// running statistics' momentum update.
inline void store_stats(__global float* mean_out, __global float* inv_std_out,
                        __global const float* running_mean, __global const float* running_var,
                        __global float* running_mean_out, __global float* running_var_out,
                        const int c, const float count, const float mean, const float inv_std,
                        const float m2, const float momentum, const int update) {
    mean_out[c] = mean;
    inv_std_out[c] = inv_std;
    if (update)
        running_update(running_mean, running_var, running_mean_out, running_var_out, c, count, mean, m2, momentum);
}

// store_stats in a training-forward kernel, whose arguments (BN_FORWARD_TRAIN_ARGS) name the tensors
// and momentum: channel c's results, with the running update where the kernel's UPDATE_RUNNING says
#define STORE_STATS(c, count, mean, inv_std, m2)                                                     \
    store_stats(mean_out, inv_std_out, running_mean, running_var, running_mean_out, running_var_out, \
                c, count, mean, inv_std, m2, momentum, UPDATE_RUNNING)

// Sum over a work-group of WG work-items (WG a power of two) through local memory: the
// reduction tree. Every work-item gets the sum; buf is free again on return. One text for each
// type T it adds (OpenCL C has no templates): wg_sum for floats, wg_sum2 for two sums at once in
// float2 lanes.
#define WG_SUM_TREE(T, name)                                              \
inline T name(__local T* buf, const T v) {                                \
    const int lid = get_local_id(0);                                      \
    buf[lid] = v;                                                         \
    barrier(CLK_LOCAL_MEM_FENCE);                                         \
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {                 \
        if (lid < s) buf[lid] += buf[lid + s];                            \
        barrier(CLK_LOCAL_MEM_FENCE);                                     \
    }                                                                     \
    const T r = buf[0];                                                   \
    barrier(CLK_LOCAL_MEM_FENCE);                                         \
    return r;                                                             \
}
WG_SUM_TREE(float, wg_sum)
WG_SUM_TREE(float2, wg_sum2)

// The same sum over a work-group of wg work-items by a tree of radix r (wg and r powers of two,
// known when the kernel is built, so the loops unroll): each level adds r values per work-item
// left, log_r(wg) levels and as many barriers instead of log2(wg). r = 2 is wg_sum's tree.
inline float wg_sum_radix(__local float* buf, const float v, const int wg, const int r) {
    const int lid = get_local_id(0);
    buf[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = wg; s > 1; ) {
        const int t = s / min(r, s);               // work-items left after this level
        if (lid < t) {                             // reads lid, lid + t, ...: its own slot and
            float a = buf[lid];                    // slots >= t no other work-item writes
            for (int j = 1; j < s / t; j++)
                a += buf[lid + j * t];
            buf[lid] = a;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        s = t;
    }
    const float out = buf[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return out;
}

// Chan-merge (n, mean, m2) over the work-group: the same tree, merging instead of adding.
// Every work-item gets the merged statistics.
inline void wg_merge(__local float* bn, __local float* bmean, __local float* bm2,
                     float* n, float* mean, float* m2) {
    const int lid = get_local_id(0);
    bn[lid] = *n; bmean[lid] = *mean; bm2[lid] = *m2;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (lid < s) {
            float a = bn[lid], am = bmean[lid], a2 = bm2[lid];
            chan_merge(&a, &am, &a2, bn[lid + s], bmean[lid + s], bm2[lid + s]);
            bn[lid] = a; bmean[lid] = am; bm2[lid] = a2;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    *n = bn[0]; *mean = bmean[0]; *m2 = bm2[0];
    barrier(CLK_LOCAL_MEM_FENCE);
}

// Float4 number v of a buffer: elements 4v .. 4v+3, at a 16-byte-aligned address. vload4(v, p)
// reads the same floats but promises the compiler only the alignment of a float (4 bytes), so a
// compiler that cannot prove more may split it into narrower loads; a float4 pointer carries the
// 16-byte alignment, and the access is one 16-byte transaction.
#define LOAD4(p, v) (((__global const float4*)(p))[v])
#define STORE4(p, v, value) (((__global float4*)(p))[v] = (value))

// The activation's derivative on four values (course.h's act_derivative, lane by lane), and the
// gradient entering the batch norm four at a time: GRAD_IN of course.h for float4s.
inline float4 act_derivative4(const float4 y) {
    return (float4)(act_derivative(y.x), act_derivative(y.y), act_derivative(y.z), act_derivative(y.w));
}
#if ACT == ACT_NONE
#define GRAD_IN4(dy, y, v) LOAD4(dy, v)
#else
#define GRAD_IN4(dy, y, v) (LOAD4(dy, v) * act_derivative4(LOAD4(y, v)))
#endif

// A slab [g0, g1) of a buffer split for 4-wide access: a head of fewer than 4 scalars up to the
// first element whose address is a multiple of 16 bytes, a body of float4s [a0, a1), and a tail
// of fewer than 4 scalars. Buffers start 16-byte aligned (OpenCL aligns every buffer to at
// least CL_DEVICE_MEM_BASE_ADDR_ALIGN), so element i is aligned when i % 4 == 0.
inline void split4(const int g0, const int g1, int* a0, int* a1) {
    *a0 = min((g0 + 3) & ~3, g1);
    *a1 = max(*a0, g1 & ~3);
}

#endif
