// Chapter 15's small kernels between the course's stages, so that a training step's tensors stay
// on the device: ReLU and 2x2 average pooling (stride 2) after batch norm, pooling's gradient
// before the next batch norm backward (ReLU's derivative is fused into batch norm's backward
// pass, helpers/train/course.py), and ReLU alone, in place, after a block without pooling. The
// pooling kernels are elementwise over NCHW float32 tensors with even H and W, one work-item per
// output element; relu one work-item per 4 values (float4, the tail scalar). Every NDRange is
// rounded up to a multiple of the work-group, the extra work-items idle.
//
// relu_pool:     y (N, C, H, W) -> a (N, C, H/2, W/2); a = mean of relu over each 2x2 window.
// pool_backward: g (N, C, H/2, W/2) -> dy (N, C, H, W); dy = g / 4 at each input of its window.
// Arguments: planes = N*C, H, W (of the full-size tensor).
// relu:          y = max(y, 0) over count values, in place (batch norm's backward reads the result
//                as its ReLU mask: relu(y) > 0 exactly where y > 0).

#include "course.h"

KERNEL void relu_pool(GLOBAL const float* y, GLOBAL float* a, int planes, int H, int W)
{
    const int OW = W / 2, OH = H / 2;
    const int i = GLOBAL_ID(0);
    if (i >= planes * OH * OW) return;
    const int ox = i % OW, oy = (i / OW) % OH, p = i / (OW * OH);
    const GLOBAL float* top = y + ((size_t)p * H + 2 * oy) * W + 2 * ox;
    a[i] = 0.25f * ((fmax(top[0], 0.0f) + fmax(top[1], 0.0f)) + (fmax(top[W], 0.0f) + fmax(top[W + 1], 0.0f)));
}

KERNEL void pool_backward(GLOBAL const float* g, GLOBAL float* dy, int planes, int H, int W)
{
    const int i = GLOBAL_ID(0);
    if (i >= planes * H * W) return;
    const int x = i % W, yy = (i / W) % H, p = i / (W * H);
    dy[i] = 0.25f * g[((size_t)p * (H / 2) + yy / 2) * (W / 2) + x / 2];
}

KERNEL void relu(GLOBAL float* y, int count)
{
    const int i = GLOBAL_ID(0);
    if (4 * i + 3 < count) {
        vstore4(fmax(vload4(i, y), 0.0f), i, y);
    } else {
        for (int e = 4 * i; e < count; e++) y[e] = fmax(y[e], 0.0f);
    }
}
