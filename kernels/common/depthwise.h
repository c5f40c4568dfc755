// What the depthwise stages of chapter 16 share (conv_dgrad and conv_wgrad 16_dw_tiles and
// 16_dw_regs): a 2-D depthwise convolution, groups = C = K (one R x S filter per channel, weight
// (C, 1, R, S)), any stride, dilation and padding per side, all compile-time constants
// (helpers/launch/depthwise.py: geometry), so that the compiler folds the index arithmetic of
// every unrolled tap.
//
// A work-group is BX x BY x PL work-items: PL slices of BX x BY, one plane (an image's channel)
// or one run of tiles of a channel per slice, so that a small plane (7 x 7) does not leave most
// of a work-group idle. A slice stages a tile of a plane with its halo in local memory: LH x LW
// values, zeros outside the plane (the padding), so the taps' reads need no bounds tests.
//
// JIT parameters (derived on the host): R, S (kernel), SH, SW (stride), PH, PW (padding before),
// DH, DW (dilation), BX, BY, PL (work-group), TH, TW (a tile's outputs), LH, LW (a staged tile's
// extent), and for the weight gradient RED (floats of its reduction buffer).
#ifndef DEPTHWISE_H
#define DEPTHWISE_H

#define RS (R * S)
#define SLICE (BX * BY)               // work-items of a slice
#define NT (SLICE * PL)               // work-items of a work-group

// floor(a / b) for b > 0 and any a (C's / truncates toward zero)
inline int floor_div(const int a, const int b) {
    return a >= 0 ? a / b : -((b - 1 - a) / b);
}

// Stage rows [row0, row0 + LH) x columns [col0, col0 + LW) of one rows x cols plane into dst (LH x
// LW), zero outside the plane; ``derivative``: scale by the activation's derivative (dy through
// GRAD_IN, reading y), else a plain copy (x). The slice's SLICE work-items copy neighbouring
// elements of a row: the reads of a warp are coalesced.
inline void stage_tile(__local float* dst, __global const float* src, __global const float* y,
                       const int derivative, const int plane_start, const int rows, const int cols,
                       const int row0, const int col0, const int lid) {
    for (int i = lid; i < LH * LW; i += SLICE) {
        const int h = row0 + i / LW, w = col0 + i % LW;
        float v = 0.0f;
        if (h >= 0 && h < rows && w >= 0 && w < cols) {
            const int at = plane_start + h * cols + w;
            v = derivative ? GRAD_IN(src, y, at) : src[at];
        }
        dst[i] = v;
    }
}

// The input gradient's arguments and first steps (16_dw_tiles, 16_dw_regs of conv_dgrad): the
// group's tile (TH x TW elements of dx from (h0, w0)) and slice z's plane (n*C + c); the slice
// stages the dy tile every tap of it reads, from dy row oh0 and column ow0 (floor: they may lie in
// the padding), and the channel's filter; then the work-group's barrier.
#define DGRAD_ARGS                                                                           \
    __global const float* restrict dy,  /* gradient w.r.t. the layer output */                \
    __global const float* restrict y,   /* layer output after activation */                   \
    __global const float* restrict w,   /* weights (C,1,R,S) */                               \
    __global float* restrict dx,        /* gradient w.r.t. the layer input */                 \
    const int planes, const int C, const int H, const int W, const int OH, const int OW,      \
    const int tiles_x, const int tiles_y

typedef struct { int plane, h0, w0, oh0, ow0; bool live; } dgrad_tile;

inline dgrad_tile dgrad_stage(__local float* tile, __local float* taps, __global const float* dy,
                              __global const float* y, __global const float* w, const int planes,
                              const int C, const int OH, const int OW, const int tiles_x, const int tiles_y) {
    const int lid = get_local_id(1) * BX + get_local_id(0);
    int g = get_group_id(0);
    dgrad_tile t;
    t.w0 = (g % tiles_x) * TW;
    g /= tiles_x;
    t.h0 = (g % tiles_y) * TH;
    t.plane = (g / tiles_y) * PL + get_local_id(2);
    t.live = t.plane < planes;           // the last group's spare slices only meet the barrier
    t.oh0 = floor_div(t.h0 + PH - (R - 1) * DH, SH);
    t.ow0 = floor_div(t.w0 + PW - (S - 1) * DW, SW);
    if (t.live) {
        stage_tile(tile, dy, y, 1, t.plane * OH * OW, OH, OW, t.oh0, t.ow0, lid);
        for (int i = lid; i < RS; i += SLICE) taps[i] = w[(t.plane % C) * RS + i];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return t;
}

// The weight gradient's arguments and one step of its walk over the tiles (16_dw_tiles,
// 16_dw_regs of conv_wgrad): the work-group is channel c's split ``split`` (per_split tiles of
// the channel's N * tiles_y * tiles_x from ``first``); slice z takes tile t0 + z of them, a TH x TW
// tile of output positions from (oh0, ow0) of image n, and stages the input it reads, rows from
// oh0*SH - PH and columns from ow0*SW - PW, between two barriers.
#define WGRAD_ARGS                                                                           \
    __global const float* restrict x, __global const float* restrict dy,                       \
    __global const float* restrict y, __global float* restrict partials,                       \
    const int N, const int C, const int H, const int W, const int OH, const int OW,           \
    const int tiles_x, const int tiles_y, const int per_split

typedef struct { int n, oh0, ow0; bool live; } wgrad_tile;

inline wgrad_tile wgrad_stage(__local float* tile, __global const float* x, const int t0, const int last,
                              const int c, const int C, const int H, const int W, const int tiles_x,
                              const int tiles_y) {
    const int t = t0 + get_local_id(2), per_image = tiles_x * tiles_y;
    wgrad_tile at;
    at.n = t / per_image;
    at.oh0 = (t % per_image) / tiles_x * TH;
    at.ow0 = t % tiles_x * TW;
    at.live = t < last;
    barrier(CLK_LOCAL_MEM_FENCE);        // the previous tile's reads are done
    if (at.live)
        stage_tile(tile, x, x, 0, (at.n * C + c) * H * W, H, W, at.oh0 * SH - PH, at.ow0 * SW - PW,
                   get_local_id(1) * BX + get_local_id(0));
    barrier(CLK_LOCAL_MEM_FENCE);
    return at;
}

// The weight gradient's end of a work-group (16_dw_tiles, 16_dw_regs of conv_wgrad): each of its
// NT work-items holds RS partial sums (acc); they are added across the work-group in a fixed
// order, a tree in local memory (red: RS x NT/2 floats; the upper half's sums first stored, the
// lower half adds its own, then log2(NT/2) halving steps for all RS weights at once), and the
// group's RS sums written to out. NT is a power of two >= 2.
inline void reduce_weights(const float* acc, __local float* red, const int lid, __global float* out) {
    const int halves = NT / 2;
    barrier(CLK_LOCAL_MEM_FENCE);                  // every read of the staged tiles is done
    if (lid >= halves)
#pragma unroll
        for (int i = 0; i < RS; i++) red[i * halves + lid - halves] = acc[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < halves)
#pragma unroll
        for (int i = 0; i < RS; i++) red[i * halves + lid] += acc[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int width = halves / 2; width > 0; width /= 2) {
        if (lid < width)
#pragma unroll
            for (int i = 0; i < RS; i++) red[i * halves + lid] += red[i * halves + lid + width];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = lid; i < RS; i += NT) out[i] = red[i * halves];
}

#endif
