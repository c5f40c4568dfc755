// Stage 12: the input gradient through Winograd F(2x2,3x3) (chapter 12).
//
// What changed: nothing in the kernels; the problem is renamed. For stride 1 the input gradient
//     dx[n][c][h][w] = sum_{k,r,s} dy[n][k][h + PAD - r][w + PAD - s] * w[c][k][r][s]
// is, with r' = 2 - r and s' = 2 - s, a forward 3x3 convolution of dy, padded by 2 - PAD, with
// the filter w'[k][c][r'][s'] = w[c][k][2 - r'][2 - s']: rotated by 180 degrees, its input and
// output channels swapped. So this stage is conv_forward's stage 05 (register-blocked Winograd)
// built with ROTATED = 1: wino_filter reads the filter that way, wino_input reads dy (applying
// the activation's derivative, GRAD_IN) with padding PADT = 2 - PAD, wino_output writes dx.
// helpers/stages.py passes the renamed sizes: CI = K (dy's channels), CO = C, (IH, IW) = (OH, OW),
// output (H, W). Shapes that are not 3x3 with stride 1 run the fallback stage instead.

#define ROTATED 1
#include "../conv_forward/05_wino_blocked.cl"
