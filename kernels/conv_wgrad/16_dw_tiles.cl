// conv_wgrad stage 16_dw_tiles: the weight gradient of a depthwise convolution from tiles in local
// memory, the sum split as in stage 02.
//
// What changed since stage 16 any_shape: there, one work-item per weight walked its whole sum
// alone: a depthwise layer of C channels has only C x R x S weights (288 for 32 channels 3x3),
// far too few work-items to fill a GPU, each with a chain of N*OH*OW dependent adds, reading x
// and dy from global memory. Here the sum of channel c is split across work-groups by tiles of
// output positions, and a work-group holds all R x S sums of its channel at once: each work-item
// takes one output position (oh, ow) of a TH x TW tile, reads its dy' once and adds dy' times
// each of the R x S input values its window covers into RS registers. The input tile with its
// halo (zeros outside x: no bounds tests in the sum) is staged in local memory by the slice,
// since neighbouring positions' windows overlap. The work-group's slices take different tiles
// (images) of the same channel; after its tiles the work-group adds its sums in local memory
// (common/depthwise.h: reduce_weights) and writes one partial per weight; wgrad_sum adds the
// splits' partials in order (stage 02's second kernel): no atomics, the same bits every run.
//
// Layouts: x (N,C,H,W); dy, y (N,C,OH,OW); dw (C,1,R,S); partials (SPLITS, C*R*S).
// NDRange: wgrad_dw_partial dim 0 = BX * C * SPLITS (group g: channel g % C, split g / C),
// dim 1 = BY, dim 2 = PL; a split is ``per_split`` consecutive tiles of the channel's
// N * tiles_y * tiles_x, slice z taking every PL-th. wgrad_sum: C*R*S (kernels/common/wgrad_sum.h).
// JIT parameters: common/depthwise.h's, RED, KH = R, KW = S (wgrad_sum), ACT
// (helpers/launch/depthwise.py: geometry).

#include "course.h"
#include "depthwise.h"

__kernel __attribute__((reqd_work_group_size(BX, BY, PL)))
void wgrad_dw_partial(WGRAD_ARGS) {
    __local float buffer[RED];             // the slices' staged tiles, then the reduction
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int c = get_group_id(0) % C, split = get_group_id(0) / C;
    const int first = split * per_split, last = min(first + per_split, N * tiles_x * tiles_y);
    __local float* tile = buffer + get_local_id(2) * (LH * LW);

    float acc[RS];                         // the R x S sums of this work-item's positions
#pragma unroll
    for (int i = 0; i < RS; i++) acc[i] = 0.0f;
    for (int t0 = first; t0 < last; t0 += PL) {
        const wgrad_tile t = wgrad_stage(tile, x, t0, last, c, C, H, W, tiles_x, tiles_y);
        const int oh = t.oh0 + ty, ow = t.ow0 + tx;
        if (!t.live || oh >= OH || ow >= OW) continue;
        const float g = GRAD_IN(dy, y, ((t.n * C + c) * OH + oh) * OW + ow);
        __local const float* at = tile + ty * SH * LW + tx * SW;     // the window's corner
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int s = 0; s < S; s++) acc[r * S + s] += g * at[r * DH * LW + s * DW];
    }
    reduce_weights(acc, buffer, (get_local_id(2) * BY + ty) * BX + tx, partials + split * (C * RS) + c * RS);
}

#include "wgrad_sum.h"      // wgrad_sum: each weight's SPLITS partial sums, in split order
