// Stage 16_dw_tiles: the input gradient of a depthwise convolution from tiles in local memory.
//
// What changed since stage 16 any_shape: there, each work-item asked every output channel of its
// group and every tap whether it reached its input element, and read dy and w from global memory
// once per tap. A depthwise layer (groups = C = K) has one output channel per input channel, so
// the question shrinks to the R x S taps of one filter, and the same dy value is read by up to
// R x S neighbouring work-items. Here a slice of the work-group stages the dy tile its TH x TW
// input elements read, with its halo (zeros outside dy: no bounds tests in the sum), and the
// channel's R x S weights in local memory; each work-item then sums its taps from there. A
// tap reaches input row h from output row oh when oh*SH + r*DH - PH = h: at a stride, only the
// taps whose offset the stride divides (common/depthwise.h: the geometry is compile-time).
//
// Layouts: dy, y (N,C,OH,OW); w (C,1,R,S); dx (N,C,H,W), all row-major.
// NDRange: dim 0 = BX * (tiles_x * tiles_y * ceil(N*C / PL)), dim 1 = BY, dim 2 = PL; a
// work-group's slice z takes plane (n*C + c) = group's planes + z and one TH x TW tile of it
// (TH = BY, TW = BX), one input element per work-item.
// JIT parameters: common/depthwise.h's, ACT (helpers/launch/depthwise.py: geometry).

#include "course.h"
#include "depthwise.h"

__kernel __attribute__((reqd_work_group_size(BX, BY, PL)))
void conv_dgrad(DGRAD_ARGS) {
    __local float tiles[PL][LH * LW];      // each slice's dy tile, with its halo
    __local float taps[PL][RS];            // each slice's filter
    const int z = get_local_id(2);
    const dgrad_tile t = dgrad_stage(tiles[z], taps[z], dy, y, w, planes, C, OH, OW, tiles_x, tiles_y);
    const int plane = t.plane, h = t.h0 + get_local_id(1), x = t.w0 + get_local_id(0);
    if (!t.live || h >= H || x >= W) return;

    float grad = 0.0f;
#pragma unroll
    for (int r = 0; r < R; r++) {
        const int a = h + PH - r * DH - t.oh0 * SH;    // oh*SH relative to the tile: >= 0
        if (SH > 1 && a % SH != 0) continue;           // no output row reads row h through tap r
#pragma unroll
        for (int s = 0; s < S; s++) {
            const int b = x + PW - s * DW - t.ow0 * SW;
            if (SW > 1 && b % SW != 0) continue;
            grad += tiles[z][(a / SH) * LW + b / SW] * taps[z][r * S + s];
        }
    }
    dx[plane * H * W + h * W + x] = grad;
}
