// Stage 12 winograd4: the input gradient through Winograd F(4x4,3x3) (chapter 12a).
//
// What changed since stage 12 winograd: what conv_forward's stage 06 changes in stage 05 (6x6
// tiles, the 36 products through the course GEMM).
// The input gradient of a 3x3 stride-1 layer is the forward convolution of dy, padded by
// 2 - PAD, with the filter rotated by 180 degrees and its channels swapped (12_winograd.cl
// derives it), so this stage is conv_forward's stage 06 built with ROTATED = 1.
// Shapes that are not 3x3 with stride 1, or with too few output channels K for F(4x4)'s
// rounding error (helpers/launch/winograd.py), run the fallback stage instead.

#define ROTATED 1
#include "../conv_forward/06_wino4_blocked.cl"
