// Stage 16_dw_regs: 16_dw_tiles with register blocking along the row.
//
// What changed since 16_dw_tiles: there, each work-item read R x S values of the tile from local
// memory for its one input element (49 reads for a 7x7 filter). Here each work-item computes XPW
// neighbouring elements of a row: per tap row it reads the window of dy values those XPW elements
// share into registers once (NWIN values: XPW + S - 1 at stride and dilation 1) and the filter row
// once, and does XPW * S multiply-adds from registers. The first element x0 of a work-item is a
// multiple of the stride SW (XPW is: helpers/launch/depthwise.py), so which taps reach element
// x0 + i is known when the kernel is compiled: the unrolled loops keep only those products, and
// their window indices are constants. Rows of a width W % 4 == 0 store their XPW results in float4s
// (VEC = 1: the fast path, XPW a multiple of 4).
//
// Layouts: dy, y (N,C,OH,OW); w (C,1,R,S); dx (N,C,H,W), all row-major.
// NDRange: as 16_dw_tiles, with TW = BX * XPW: work-item (tx, ty) computes row h0 + ty, elements
// w0 + tx*XPW .. + XPW - 1.
// JIT parameters: common/depthwise.h's, XPW, JMIN (the window's first dy column relative to
// x0/SW), NWIN (its length), VEC, ACT (helpers/launch/depthwise.py: geometry).

#include "course.h"
#include "depthwise.h"

__kernel __attribute__((reqd_work_group_size(BX, BY, PL)))
void conv_dgrad(DGRAD_ARGS) {
    __local float tiles[PL][LH * LW];
    __local float taps[PL][RS];
    const int z = get_local_id(2);
    const dgrad_tile t = dgrad_stage(tiles[z], taps[z], dy, y, w, planes, C, OH, OW, tiles_x, tiles_y);
    const int h = t.h0 + get_local_id(1), x0 = t.w0 + get_local_id(0) * XPW;
    if (!t.live || h >= H || x0 >= W) return;

    float grad[XPW];
#pragma unroll
    for (int i = 0; i < XPW; i++) grad[i] = 0.0f;
    const int col = x0 / SW + JMIN - t.ow0;        // the window's first column in the tile: >= 0
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int a = h + PH - r * DH - t.oh0 * SH;
        if (SH > 1 && a % SH != 0) continue;
        __local const float* row = tiles[z] + (a / SH) * LW + col;
        float win[NWIN];                           // the dy values the XPW elements share
#pragma unroll
        for (int j = 0; j < NWIN; j++) win[j] = row[j];
#pragma unroll
        for (int s = 0; s < S; s++) {
            const float tap = taps[z][r * S + s];
#pragma unroll
            for (int i = 0; i < XPW; i++) {
                const int off = i + PW - s * DW;   // (x0 + i + PW - s*DW) - x0: a constant
                if (((off % SW) + SW) % SW == 0) grad[i] += win[off / SW - JMIN] * tap;
            }
        }
    }
    __global float* out = dx + t.plane * H * W + h * W + x0;
#if VEC
#pragma unroll
    for (int i = 0; i < XPW; i += 4)               // W % 4 == 0: a float4 is all in or all out
        if (x0 + i < W) *(__global float4*)(out + i) = (float4)(grad[i], grad[i + 1], grad[i + 2], grad[i + 3]);
#else
#pragma unroll
    for (int i = 0; i < XPW; i++)
        if (x0 + i < W) out[i] = grad[i];
#endif
}
