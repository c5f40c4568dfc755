// Stage 01: naive batch normalization, forward and backward.
//
// One work-item per channel walks all N*H*W values of its channel, slab by slab: a first loop
// for the mean, a second for the variance (squared deviations from that mean, so a large mean
// does no harm), a third to write y. The backward pass does the same with two sums. Correct
// and easy to read, but only C work-items run (a GPU wants tens of thousands), and neighbouring
// work-items read addresses H*W floats apart, so no load is coalesced.
//
// Kernels (arguments in helpers/ops/batchnorm_*.py order; batchnorm.h spells each list once for every
// stage, BN_FORWARD_TRAIN_ARGS, BN_FORWARD_INFER_ARGS, BN_BACKWARD_ARGS):
//   bn_forward_train  x, gamma, beta, running_mean, running_var -> y, mean, inv_std,
//                     running_mean_out, running_var_out; N, C, HW, eps, momentum
//   bn_forward_infer  x, gamma, beta, running_mean, running_var -> y; N, C, HW, eps
//   bn_backward       grad_output, output, x, gamma, mean, inv_std -> grad_input, grad_gamma,
//                     grad_beta; N, C, HW
// NDRange: one work-item per channel, padded to WG (host side).
// JIT parameters: UPDATE_RUNNING (0/1: write the momentum update of the running statistics),
// ACT (activation fused in the backward pass, course.h).

#include "course.h"
#include "batchnorm.h"

#ifndef UPDATE_RUNNING
#define UPDATE_RUNNING 0
#endif

__kernel void bn_forward_train(BN_FORWARD_TRAIN_ARGS) {
    const int c = get_global_id(0);
    if (c >= C) return;
    const float count = (float)N * (float)HW;

    float sum = 0.0f;                                  // loop 1: the mean
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) sum += x[(n * C + c) * HW + i];
    const float mean = sum / count;

    float m2 = 0.0f;                                   // loop 2: squared deviations
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) {
            const float d = x[(n * C + c) * HW + i] - mean;
            m2 = fma(d, d, m2);
        }
    const float inv_std = 1.0f / sqrt(m2 / count + eps);

    const float scale = gamma[c] * inv_std;            // loop 3: normalize, scale, shift
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) {
            const int e = (n * C + c) * HW + i;
            y[e] = fma(x[e] - mean, scale, beta[c]);
        }
    STORE_STATS(c, count, mean, inv_std, m2);
}

__kernel void bn_forward_infer(BN_FORWARD_INFER_ARGS) {
    const int c = get_global_id(0);
    if (c >= C) return;
    const float scale = gamma[c] / sqrt(running_var[c] + eps);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) {
            const int e = (n * C + c) * HW + i;
            y[e] = fma(x[e] - running_mean[c], scale, beta[c]);
        }
}

__kernel void bn_backward(BN_BACKWARD_ARGS) {
    const int c = get_global_id(0);
    if (c >= C) return;
    const float m = mean[c];
    const float is = inv_std[c];

    float sum_g = 0.0f, sum_gd = 0.0f;                 // loop 1: both sums
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) {
            const int e = (n * C + c) * HW + i;
            const float g = GRAD_IN(dy, out, e);       // ReLU derivative fused on the read
            sum_g += g;
            sum_gd = fma(g, x[e] - m, sum_gd);
        }
    const float gbeta = sum_g;
    const float ggamma = sum_gd * is;

    const float count = (float)N * (float)HW;          // loop 2: the input gradient
    const float k = gamma[c] * is;
    const float mb = gbeta / count, mg = ggamma / count;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++) {
            const int e = (n * C + c) * HW + i;
            const float xhat = (x[e] - m) * is;
            dx[e] = k * (GRAD_IN(dy, out, e) - mb - xhat * mg);
        }
    grad_gamma[c] = ggamma;
    grad_beta[c] = gbeta;
}
