// Whole-tile Winograd F(2x2,3x3) transforms in registers (chapter 12, stages 02 onwards).
// Each applies a 1-D transform of winograd_f23.h to the columns, then to the rows, of a tile
// held in private arrays (row-major), so every input value is loaded once.
#ifndef WINOGRAD_TILES_H
#define WINOGRAD_TILES_H

#include "winograd_f23.h"

// u = G g G^T: 3x3 filter -> 4x4
inline void wino_filter_tile(const float g[9], float u[16]) {
    float t[12];                                      // t = G g, 4x3
    for (int s = 0; s < 3; s++)
        WINO_G_APPLY(t[s], t[3 + s], t[6 + s], t[9 + s], g[s], g[3 + s], g[6 + s]);
    for (int a = 0; a < 4; a++)                       // u = t G^T: G applied to each row of t
        WINO_G_APPLY(u[4 * a], u[4 * a + 1], u[4 * a + 2], u[4 * a + 3], t[3 * a], t[3 * a + 1], t[3 * a + 2]);
}

// v = B^T d B: 4x4 input tile -> 4x4
inline void wino_input_tile(const float d[16], float v[16]) {
    float t[16];                                      // t = B^T d
    for (int j = 0; j < 4; j++)
        WINO_BT_APPLY(t[j], t[4 + j], t[8 + j], t[12 + j], d[j], d[4 + j], d[8 + j], d[12 + j]);
    for (int a = 0; a < 4; a++)                       // v = t B: B^T applied to each row of t
        WINO_BT_APPLY(v[4 * a], v[4 * a + 1], v[4 * a + 2], v[4 * a + 3], t[4 * a], t[4 * a + 1], t[4 * a + 2], t[4 * a + 3]);
}

// y = A^T m A: 4x4 -> 2x2 output tile
inline void wino_output_tile(const float m[16], float y[4]) {
    float t[8];                                       // t = A^T m, 2x4
    for (int j = 0; j < 4; j++)
        WINO_AT_APPLY(t[j], t[4 + j], m[j], m[4 + j], m[8 + j], m[12 + j]);
    for (int a = 0; a < 2; a++)                       // y = t A
        WINO_AT_APPLY(y[2 * a], y[2 * a + 1], t[4 * a], t[4 * a + 1], t[4 * a + 2], t[4 * a + 3]);
}

#endif
