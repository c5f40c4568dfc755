// conv_wgrad stage 16_dw_regs: 16_dw_tiles with register blocking along the row.
//
// What changed since 16_dw_tiles: there, each work-item read R x S input values from local
// memory for each output position, one multiply-add per read. Here a work-item takes XPW
// neighbouring positions of a row: it reads their XPW dy' values into registers (a float4 per
// four when OW % 4 == 0: VEC = 1, the fast path), and per tap row the window of input values they
// share ((XPW - 1)*SW + (S - 1)*DW + 1 values) once, then does R x S x XPW multiply-adds from
// registers, every window index a constant of the unrolled loops.
//
// Layouts, NDRange and the split: as 16_dw_tiles, with TW = BX * XPW (work-item (tx, ty) takes
// row oh0 + ty, positions ow0 + tx*XPW .. + XPW - 1).
// JIT parameters: 16_dw_tiles', XPW, NWIN (the window's length), VEC.

#include "course.h"
#include "depthwise.h"

__kernel __attribute__((reqd_work_group_size(BX, BY, PL)))
void wgrad_dw_partial(WGRAD_ARGS) {
    __local float buffer[RED];
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int c = get_group_id(0) % C, split = get_group_id(0) / C;
    const int first = split * per_split, last = min(first + per_split, N * tiles_x * tiles_y);
    __local float* tile = buffer + get_local_id(2) * (LH * LW);

    float acc[RS];
#pragma unroll
    for (int i = 0; i < RS; i++) acc[i] = 0.0f;
    for (int t0 = first; t0 < last; t0 += PL) {
        const wgrad_tile t = wgrad_stage(tile, x, t0, last, c, C, H, W, tiles_x, tiles_y);
        const int oh = t.oh0 + ty, ow = t.ow0 + tx * XPW;
        if (!t.live || oh >= OH || ow >= OW) continue;
        const int o = ((t.n * C + c) * OH + oh) * OW + ow;
        float g[XPW];                      // the XPW positions' dy'
#if VEC
#pragma unroll
        for (int i = 0; i < XPW; i += 4) {     // OW % 4 == 0: a float4 is all in or all out
            float4 v = ow + i < OW ? *(__global const float4*)(dy + o + i) : (float4)(0.0f);
#if ACT != ACT_NONE
            if (ow + i < OW) {
                const float4 a = *(__global const float4*)(y + o + i);
                v *= (float4)(act_derivative(a.x), act_derivative(a.y), act_derivative(a.z), act_derivative(a.w));
            }
#endif
            g[i] = v.x; g[i + 1] = v.y; g[i + 2] = v.z; g[i + 3] = v.w;
        }
#else
#pragma unroll
        for (int i = 0; i < XPW; i++) g[i] = ow + i < OW ? GRAD_IN(dy, y, o + i) : 0.0f;
#endif
        __local const float* at = tile + ty * SH * LW + tx * XPW * SW;
#pragma unroll
        for (int r = 0; r < R; r++) {
            float win[NWIN];                   // the input values the XPW windows share
#pragma unroll
            for (int j = 0; j < NWIN; j++) win[j] = at[r * DH * LW + j];
#pragma unroll
            for (int s = 0; s < S; s++)
#pragma unroll
                for (int i = 0; i < XPW; i++) acc[r * S + s] += win[i * SW + s * DW] * g[i];
        }
    }
    reduce_weights(acc, buffer, (get_local_id(2) * BY + ty) * BX + tx, partials + split * (C * RS) + c * RS);
}

#include "wgrad_sum.h"
