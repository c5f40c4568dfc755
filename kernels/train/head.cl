// The network's head on the device: the last block's ReLU + 2x2 average pooling, the linear layer,
// softmax and mean cross-entropy, forward (head_forward) and backward (head_backward), so that a
// training step reads back nothing but its loss (helpers/train/course.py). Before, the head ran in
// host NumPy: the pooled features read back, their gradient uploaded, 18 % of the step on the
// recorded H200 (results/training_nvidia-h200.json, 0.60 of 3.37 ms).
//
// head_forward: one work-group per sample n. Its work-items walk the sample's F = C*(H/2)*(W/2)
//   features: each pools relu(y) over its 2x2 window (stored in `features`: the weight gradient
//   of the head reads them) and adds feature * fc_w[j] to CLASSES partial sums; a tree in local
//   memory adds the partial sums of the work-group; work-item 0 adds the bias and writes the
//   logits, the loss term -log softmax[label] and dz = (softmax - onehot(label)) / N.
// head_backward: one work-item per value the backward pass needs, over four ranges of one NDRange:
//   [0, N*C*H*W)  dy = 0.25 * (dz @ fc_w) at the feature whose window holds the element: the
//                 head's input gradient and pooling's gradient in one (the ReLU's derivative is
//                 fused into batch norm's backward pass, which reads dy);
//   CLASSES*F     d fc_w[j, f] = sum over the batch of dz[n, j] * features[n, f];
//   CLASSES       d fc_b[j] = sum over the batch of dz[n, j];
//   1             loss = the mean of the loss terms.
// Labels are float32 class indices (exact for small integers; the host checks them before upload).
// y is NCHW with even H and W; features (N, F), dz and logits (N, CLASSES), terms (N), loss (1).

#include "course.h"

#ifndef CLASSES
#define CLASSES 10      // outputs of the linear layer (model.CLASSES)
#endif
#ifndef WG
#define WG 256          // head_forward's work-group: a power of two (its tree halves it)
#endif

// The pooled feature f = (c, oy, ox) of sample n: the mean of relu(y) over its 2x2 window.
DEVICE_FN float pooled(GLOBAL const float* y, const int n, const int f, const int C, const int H, const int W)
{
    const int OW = W / 2, OH = H / 2;
    const int ox = f % OW, oy = (f / OW) % OH, c = f / (OW * OH);
    const GLOBAL float* top = y + ((size_t)(n * C + c) * H + 2 * oy) * W + 2 * ox;
    return 0.25f * ((fmax(top[0], 0.0f) + fmax(top[1], 0.0f)) + (fmax(top[W], 0.0f) + fmax(top[W + 1], 0.0f)));
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void head_forward(GLOBAL const float* y, GLOBAL const float* fc_w, GLOBAL const float* fc_b,
                  GLOBAL const float* labels, GLOBAL float* features, GLOBAL float* logits,
                  GLOBAL float* terms, GLOBAL float* dz, const int N, const int C, const int H, const int W)
{
    __local float part[CLASSES][WG];
    const int n = get_group_id(0), lid = get_local_id(0);
    const int F = C * (H / 2) * (W / 2);
    float acc[CLASSES];
    for (int j = 0; j < CLASSES; j++) acc[j] = 0.0f;
    for (int f = lid; f < F; f += WG) {
        const float a = pooled(y, n, f, C, H, W);
        features[(size_t)n * F + f] = a;
        for (int j = 0; j < CLASSES; j++) acc[j] = fma(a, fc_w[(size_t)j * F + f], acc[j]);
    }
    for (int j = 0; j < CLASSES; j++) part[j][lid] = acc[j];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s)
            for (int j = 0; j < CLASSES; j++) part[j][lid] += part[j][lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid != 0) return;
    float z[CLASSES], top = -INFINITY;
    for (int j = 0; j < CLASSES; j++) {
        z[j] = part[j][0] + fc_b[j];
        logits[n * CLASSES + j] = z[j];
        top = fmax(top, z[j]);
    }
    float sum = 0.0f;
    for (int j = 0; j < CLASSES; j++) sum += exp(z[j] - top);
    const float log_sum = log(sum);
    const int label = (int)labels[n];
    terms[n] = -(z[label] - top - log_sum);
    for (int j = 0; j < CLASSES; j++)
        dz[n * CLASSES + j] = (exp(z[j] - top - log_sum) - (j == label ? 1.0f : 0.0f)) / (float)N;
}

KERNEL void head_backward(GLOBAL const float* dz, GLOBAL const float* fc_w, GLOBAL const float* features,
                          GLOBAL const float* terms, GLOBAL float* dy, GLOBAL float* grad_w,
                          GLOBAL float* grad_b, GLOBAL float* loss, const int N, const int C, const int H,
                          const int W)
{
    const int OW = W / 2, OH = H / 2, F = C * OH * OW;
    const int full = N * C * H * W;
    int i = GLOBAL_ID(0);
    if (i < full) {                                   // dy: the head's and pooling's gradient
        const int x = i % W, yy = (i / W) % H, c = (i / (W * H)) % C, n = i / (W * H * C);
        const int f = (c * OH + yy / 2) * OW + x / 2;
        float g = 0.0f;
        for (int j = 0; j < CLASSES; j++) g = fma(dz[n * CLASSES + j], fc_w[(size_t)j * F + f], g);
        dy[i] = 0.25f * g;
        return;
    }
    i -= full;
    if (i < CLASSES * F) {                            // d fc_w: a sum over the batch
        const int f = i % F, j = i / F;
        float g = 0.0f;
        for (int n = 0; n < N; n++) g = fma(dz[n * CLASSES + j], features[(size_t)n * F + f], g);
        grad_w[i] = g;
        return;
    }
    i -= CLASSES * F;
    if (i < CLASSES) {                                // d fc_b
        float g = 0.0f;
        for (int n = 0; n < N; n++) g += dz[n * CLASSES + i];
        grad_b[i] = g;
    } else if (i == CLASSES) {                        // the loss: the mean over the batch
        float sum = 0.0f;
        for (int n = 0; n < N; n++) sum += terms[n];
        loss[0] = sum / (float)N;
    }
}
