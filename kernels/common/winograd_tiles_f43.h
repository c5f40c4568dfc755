// Whole-tile Winograd F(4x4,3x3) transforms in registers (chapter 12a): winograd_tiles.h with
// the 6x6 input tile and 4x4 output tile of winograd_f43.h. Each applies a 1-D transform to the
// columns, then to the rows, of a tile held in a private array (row-major).
#ifndef WINOGRAD_TILES_F43_H
#define WINOGRAD_TILES_F43_H

#include "winograd_f43.h"

// u = G g G^T: 3x3 filter -> 6x6
inline void wino_filter_tile(const float g[9], float u[36]) {
    float t[18];                                      // t = G g, 6x3
    for (int s = 0; s < 3; s++)
        WINO_G_APPLY(t[s], t[3 + s], t[6 + s], t[9 + s], t[12 + s], t[15 + s], g[s], g[3 + s], g[6 + s]);
    for (int a = 0; a < 6; a++)                       // u = t G^T: G applied to each row of t
        WINO_G_APPLY(u[6 * a], u[6 * a + 1], u[6 * a + 2], u[6 * a + 3], u[6 * a + 4], u[6 * a + 5],
                     t[3 * a], t[3 * a + 1], t[3 * a + 2]);
}

// v = B^T d B: 6x6 input tile -> 6x6
inline void wino_input_tile(const float d[36], float v[36]) {
    float t[36];                                      // t = B^T d
    for (int j = 0; j < 6; j++)
        WINO_BT_APPLY(t[j], t[6 + j], t[12 + j], t[18 + j], t[24 + j], t[30 + j],
                      d[j], d[6 + j], d[12 + j], d[18 + j], d[24 + j], d[30 + j]);
    for (int a = 0; a < 6; a++)                       // v = t B: B^T applied to each row of t
        WINO_BT_APPLY(v[6 * a], v[6 * a + 1], v[6 * a + 2], v[6 * a + 3], v[6 * a + 4], v[6 * a + 5],
                      t[6 * a], t[6 * a + 1], t[6 * a + 2], t[6 * a + 3], t[6 * a + 4], t[6 * a + 5]);
}

// y = A^T m A: 6x6 -> 4x4 output tile
inline void wino_output_tile(const float m[36], float y[16]) {
    float t[24];                                      // t = A^T m, 4x6
    for (int j = 0; j < 6; j++)
        WINO_AT_APPLY(t[j], t[6 + j], t[12 + j], t[18 + j], m[j], m[6 + j], m[12 + j], m[18 + j], m[24 + j], m[30 + j]);
    for (int a = 0; a < 4; a++)                       // y = t A
        WINO_AT_APPLY(y[4 * a], y[4 * a + 1], y[4 * a + 2], y[4 * a + 3],
                      t[6 * a], t[6 * a + 1], t[6 * a + 2], t[6 * a + 3], t[6 * a + 4], t[6 * a + 5]);
}

#endif
