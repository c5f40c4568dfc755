// The geometry every any-shape kernel (stage 16 of conv_forward, conv_dgrad, conv_wgrad) takes
// after its tensors, in the order of helpers/ops/shape.py's ConvShape.geometry: the batch, the
// channels and the groups, then for each axis A, D, H, W (unit extents in front of a 1-D, 2-D or
// 3-D convolution) the input extent, output extent, kernel extent, stride, padding before and
// dilation. The padding after an axis is in its output extent.
#ifndef ANY_SHAPE_H
#define ANY_SHAPE_H

#define ANY_SHAPE_GEOMETRY                                                                   \
    const int N, const int C, const int K, const int G,                                      \
    const int A, const int OA, const int Q, const int SA, const int PA, const int DA,        \
    const int D, const int OD, const int T, const int SD, const int PD, const int DD,        \
    const int H, const int OH, const int R, const int SH, const int PH, const int DH,        \
    const int W, const int OW, const int S, const int SW, const int PW, const int DW

// (d, h, w) of the flat position i = (d*H + h)*W + w of a D x H x W volume
inline int3 position3(const int i, const int H, const int W) {
    return (int3)(i / (W * H), (i / W) % H, i % W);
}

#endif
