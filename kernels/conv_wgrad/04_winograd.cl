// conv_wgrad stage 04: the weight gradient through Winograd F(3x3,4x4).
//
// What changed since stage 03: fewer multiplications. Cut the output positions of every image
// into 4x4 tiles. The 3x3 taps of dw[c][k] collect, from one tile, the correlation of a 6x6 patch
// of x (channel c) with the 4x4 tile of dy' (channel k): 9 outputs, 144 products. That is a
// Winograd problem like the forward pass's, with the roles turned around: the "filter" is the
// 4x4 tile of dy' and the "output" is the 3x3 filter gradient, F(3x3,4x4), which needs 6x6 = 36
// products instead of 144:
//
//     dw[c][k] += AT . [ (G . dy'tile . G^T)  (*)  (BT . xpatch . B) ] . A      (elementwise (*))
//                 3x6        6x4  4x4  4x6           6x6   6x6   6x6     6x3
//
// (winograd_f34.h holds G and AT; BT is F(4x4,3x3)'s, the same six points, so the x transform is
// wino_input_tile of winograd_tiles_f43.h, the forward pass's). Summed over every tile q of the
// batch, element xi of the 6x6 product is a matrix product with the tiles as its reduction:
//
//     Mxi[k][c] = sum over q of  U[xi][k][q] * V[xi][q][c]      (36 products of K x Q by Q x C)
//
// so the stage is four kernels, each a pass over memory or a GEMM:
//   1. wgrad_wino_delta: U[xi][k][q], the 4x4 tile of dy' (the activation's derivative fused)
//      transformed to 6x6; one work-item per (tile, k), neighbours along q: coalesced both ways.
//   2. wgrad_wino_input: V[xi][q][c], the 6x6 patch of x transformed; one work-item per (tile, c),
//      neighbours along c, so the 36 stores are coalesced (the loads are not: each work-item reads
//      its own channel's patch; the overlap of neighbouring patches is served by the caches).
//   3. wgrad_wino_gemm: the 36 products on the course GEMM's tiles (gemm_core.h), float4 loads of
//      both operands (U is k-major along q, V is q-major along c: each as gemm_core.h reads it).
//      The reduction over tiles is deep (12,544 tiles for ResNet-50's res64@56 at batch 64) and
//      the products small (64 x 64), so it is cut into SPLITS slices of SLICE tiles as in stage 03:
//      dim 2 of the NDRange is (slice, xi), and each work-group writes its tile of partial sums.
//   4. wgrad_wino_output: per (c, k), the slices' partial sums added in slice order (no atomics:
//      the same bits on every run), then AT . M . A: the 3x3 taps, written to dw (IOHW).
// Two switches move the transforms' scattered accesses through local memory (each 0 is the plain
// kernel, one work-item per element, kept to time the pair; the host sets LOAD_LOCAL where
// W >= LOAD_LOCAL_W, helpers/launch/wgrad.py: wino_jit):
//   LOAD_LOCAL = 1: wgrad_wino_input's work-group loads the 6x6 patches of IN_TILES neighbouring
//      tiles for IN_CHANNELS channels into local memory with neighbouring work-items on
//      neighbouring x along a row (a few 32-byte sectors per warp, not one per work-item), then
//      each work-item transforms one (tile, channel) and stores along c as before.
//   STORE_LOCAL = 1: wgrad_wino_output's work-group owns OUT_C x OUT_K pairs (c, k). Its OUT_WG
//      work-items add the slices of the 36 products (four per pair, 9 products each, their loads
//      in flight together: more of them where C*K is small and the slices many), the transform
//      writes the taps into local memory in dw's order, and the group stores each channel's
//      OUT_K*9 taps as one contiguous run. With STORE_LOCAL = 0 neighbouring work-items are
//      neighbouring channels, whose taps lie K*9 floats apart: every store of a warp touches its
//      own 32-byte sector.
// Multiplications per tile and (c, k): 36 in the products against stage 03's 144, so the GEMM
// does a quarter of the work; the transforms add passes over memory (U and V are 36/16 = 2.25x
// the size of dy and x, plus the padding of the edge tiles). Winograd rounds more than a direct
// sum (its transforms hold numbers up to 8), and its error scales with whole tiles: the op's
// tolerance for 3x3 stride-1 layers uses the tiles' magnitudes (helpers/ops/conv_wgrad.py).
//
// Layouts: x (N,C,H,W); dy, y (N,K,OH,OW); dw IOHW (C,K,3,3). Q = N*TH*TW tiles (TH = ceil(OH/4),
// TW = ceil(OW/4)), QP = SPLITS*SLICE_LEN (whole slices); KP and CP are K and C rounded up to
// TM and TN. Workspaces, padding written as zeros: U (36, KP, QP), V (36, QP, CP),
// M (SPLITS, 36, KP, CP).
// NDRanges: wgrad_wino_delta (KP*QP rounded up to WG), wgrad_wino_input (QP*CP rounded up to
// WG), both 1-D (QP can pass the 65,535 of a grid's other dimensions); wgrad_wino_gemm
// (CP/TN * TN/WN, KP/TM * TM/WM, SPLITS * 36), work-group (TN/WN, TM/WM, 1); wgrad_wino_output
// (C*K rounded up to WG).
// With LOAD_LOCAL, wgrad_wino_input's NDRange is ceil(QP/IN_TILES) * ceil(CP/IN_CHANNELS)
// work-groups of IN_TILES*IN_CHANNELS; with STORE_LOCAL, wgrad_wino_output's is
// ceil(C/OUT_C) * ceil(K/OUT_K) work-groups of OUT_WG.
// JIT parameters: ACT; LOAD_LOCAL (set from LOAD_LOCAL_W), STORE_LOCAL; TM, TN, TK, WM, WN
// (gemm_core.h); WG (the plain transforms' work-group, host side); SLICE (tiles per slice, host
// side: the slice length SLICE_LEN is an argument).

#ifndef LOAD_LOCAL
#define LOAD_LOCAL 1
#endif
#ifndef STORE_LOCAL
#define STORE_LOCAL 1
#endif
#define IN_TILES 4                  // LOAD_LOCAL: neighbouring tiles per work-group
#define IN_CHANNELS 16              //             channels per work-group
#define OUT_C 8                     // STORE_LOCAL: channels per work-group (8 floats: a sector of M)
#define OUT_K 8                     //              filters per work-group
#define OUT_WG 256                  //              work-items: OUT_WG / (OUT_C*OUT_K) per pair

#include "course.h"
#include "winograd_tiles_f43.h"     // wino_input_tile: BT . d . B on a 6x6 tile
#include "winograd_f34.h"           // WINOW_G_APPLY (6x4), WINOW_AT_APPLY (3x6)

#define T36 36                      // products per tile

// u = G g G^T: a 4x4 tile of dy' -> 6x6
inline void wgrad_delta_tile(const float g[16], float u[36]) {
    float t[24];                                      // t = G g, 6x4
    for (int j = 0; j < 4; j++)
        WINOW_G_APPLY(t[j], t[4 + j], t[8 + j], t[12 + j], t[16 + j], t[20 + j], g[j], g[4 + j], g[8 + j], g[12 + j]);
    for (int a = 0; a < 6; a++)                       // u = t G^T
        WINOW_G_APPLY(u[6 * a], u[6 * a + 1], u[6 * a + 2], u[6 * a + 3], u[6 * a + 4], u[6 * a + 5],
                      t[4 * a], t[4 * a + 1], t[4 * a + 2], t[4 * a + 3]);
}

// o = AT m A: 6x6 -> the 3x3 taps
inline void wgrad_output_tile(const float m[36], float o[9]) {
    float t[18];                                      // t = AT m, 3x6
    for (int j = 0; j < 6; j++)
        WINOW_AT_APPLY(t[j], t[6 + j], t[12 + j], m[j], m[6 + j], m[12 + j], m[18 + j], m[24 + j], m[30 + j]);
    for (int a = 0; a < 3; a++)                       // o = t A
        WINOW_AT_APPLY(o[3 * a], o[3 * a + 1], o[3 * a + 2],
                       t[6 * a], t[6 * a + 1], t[6 * a + 2], t[6 * a + 3], t[6 * a + 4], t[6 * a + 5]);
}

// One work-item per (tile q, channel k): dim 0 of the flattened index is q.
__kernel void wgrad_wino_delta(__global const float* restrict dy, __global const float* restrict y,
                               __global float* restrict U, const int N, const int K, const int OH,
                               const int OW, const int TH, const int TW, const int QP, const int KP) {
    const int i = get_global_id(0);
    if (i >= KP * QP) return;
    const int q = i % QP, k = i / QP;
    const int n = q / (TH * TW), th = (q / TW) % TH, tw = q % TW;
    const bool live = k < K && n < N;                 // q >= N*TH*TW: n >= N, the padding
    float g[16], u[T36];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            const int oh = 4 * th + a, ow = 4 * tw + b;
            g[4 * a + b] = (live && oh < OH && ow < OW) ? GRAD_IN(dy, y, ((n * K + k) * OH + oh) * OW + ow) : 0.0f;
        }
    wgrad_delta_tile(g, u);
    for (int xi = 0; xi < T36; xi++)
        U[(xi * KP + k) * QP + q] = u[xi];
}

#if LOAD_LOCAL
#define IN_WG (IN_TILES * IN_CHANNELS)
#define IN_PITCH 37                 // a patch's floats in local memory: 36, plus 1 so the reads of
                                    // neighbouring work-items fall in different banks
// The group's IN_TILES tiles from q0, IN_CHANNELS channels from c0. Work-item (t, cl) = (tid /
// IN_CHANNELS, tid % IN_CHANNELS) transforms the patch of tile q0 + t in channel c0 + cl.
__kernel __attribute__((reqd_work_group_size(IN_WG, 1, 1)))
void wgrad_wino_input(__global const float* restrict x, __global float* restrict V,
                      const int N, const int C, const int H, const int W, const int TH,
                      const int TW, const int PAD, const int QP, const int CP) {
    __local float patch[IN_WG * IN_PITCH];
    __local int tile_n[IN_TILES], tile_h0[IN_TILES], tile_w0[IN_TILES];
    const int tid = get_local_id(0), cblocks = CEIL_DIV(CP, IN_CHANNELS);
    const int q0 = get_group_id(0) / cblocks * IN_TILES, c0 = get_group_id(0) % cblocks * IN_CHANNELS;
    if (tid < IN_TILES) {                              // each tile decoded once
        const int q = q0 + tid;
        tile_n[tid] = q / (TH * TW);                   // >= N: a padding tile (q >= N*TH*TW)
        tile_h0[tid] = 4 * ((q / TW) % TH) - PAD;
        tile_w0[tid] = 4 * (q % TW) - PAD;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // element e = ((cl * 6 + a) * IN_TILES + t) * 6 + b: neighbouring work-items read along row a
    // of neighbouring tiles' patches (tiles overlap by 2 columns). A work-item's 36 elements are
    // e = tid, tid + IN_WG, ...: all 36 loads are issued before the first store to local memory, so
    // that their latencies overlap (a small plane is one wave of work-groups: latency is its time)
    float got[T36];
#pragma unroll
    for (int j = 0; j < T36; j++) {
        const int e = j * IN_WG + tid;
        const int b = e % 6, t = e / 6 % IN_TILES, a = e / (6 * IN_TILES) % 6, cl = e / (T36 * IN_TILES);
        const int n = tile_n[t], c = c0 + cl, h = tile_h0[t] + a, w = tile_w0[t] + b;
        got[j] = (c < C && n < N && h >= 0 && h < H && w >= 0 && w < W) ? x[((n * C + c) * H + h) * W + w] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < T36; j++) {
        const int e = j * IN_WG + tid;
        const int b = e % 6, t = e / 6 % IN_TILES, a = e / (6 * IN_TILES) % 6, cl = e / (T36 * IN_TILES);
        patch[(t * IN_CHANNELS + cl) * IN_PITCH + 6 * a + b] = got[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int q = q0 + tid / IN_CHANNELS, c = c0 + tid % IN_CHANNELS;
    float d[T36], v[T36];
    for (int j = 0; j < T36; j++) d[j] = patch[tid * IN_PITCH + j];
    wino_input_tile(d, v);
    if (q < QP && c < CP)
        for (int xi = 0; xi < T36; xi++)
            V[(xi * QP + q) * CP + c] = v[xi];
}
#else
// One work-item per (tile q, channel c): dim 0 of the flattened index is c.
__kernel void wgrad_wino_input(__global const float* restrict x, __global float* restrict V,
                               const int N, const int C, const int H, const int W, const int TH,
                               const int TW, const int PAD, const int QP, const int CP) {
    const int i = get_global_id(0);
    if (i >= QP * CP) return;
    const int c = i % CP, q = i / CP;
    const int n = q / (TH * TW), th = (q / TW) % TH, tw = q % TW;
    const int h0 = 4 * th - PAD, w0 = 4 * tw - PAD;   // the patch of output tile (th, tw): 6x6
    const bool live = c < C && n < N;
    float d[T36], v[T36];
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) {
            const int h = h0 + a, w = w0 + b;
            d[6 * a + b] = (live && h >= 0 && h < H && w >= 0 && w < W) ? x[((n * C + c) * H + h) * W + w] : 0.0f;
        }
    wino_input_tile(d, v);
    for (int xi = 0; xi < T36; xi++)
        V[(xi * QP + q) * CP + c] = v[xi];
}
#endif

// The products: A = U[xi] (KP x QP, float4 along q), B = V[xi] (QP x CP, float4 along c), both
// padded to whole blocks and slices, so every fetch is inside and 4-aligned.
#define GEMM_ARGS __global const float* restrict Ux, __global const float* restrict Vx, const int QP, const int CP
#define GEMM_VEC_A 1
#define GEMM_VEC_B 1
#define GEMM_A4(m, k) vload4(0, Ux + (m) * QP + (k))
#define GEMM_B4(k, n) vload4(0, Vx + (k) * CP + (n))
#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void wgrad_wino_gemm(__global const float* restrict U, __global const float* restrict V,
                     __global float* restrict M, const int QP, const int KP, const int CP,
                     const int SLICE_LEN) {
    GEMM_TILES(As, Bs);
    const int xi = get_group_id(2) % T36, slice = get_group_id(2) / T36;
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN, q0 = slice * SLICE_LEN;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(U + (size_t)xi * KP * QP + q0, V + ((size_t)xi * QP + q0) * CP, QP, CP,
                    m0, n0, SLICE_LEN, As, Bs, acc);
    __global float* out = M + ((size_t)slice * T36 + xi) * KP * CP;
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++)
            out[(m0 + GEMM_ROW(i)) * CP + n0 + GEMM_COL(j)] = acc[i][j];
}

#if STORE_LOCAL
#define OUT_PAIRS (OUT_C * OUT_K)
#define OUT_SHARE (OUT_WG / OUT_PAIRS)          // work-items per pair (4)
#define OUT_EACH (T36 / OUT_SHARE)              // products each (9)
// Pair p = tid % OUT_PAIRS is (c0 + p % OUT_C, k0 + p / OUT_C): neighbours along c read M in
// sectors of OUT_C floats.
__kernel __attribute__((reqd_work_group_size(OUT_WG, 1, 1)))
void wgrad_wino_output(__global const float* restrict M, __global float* restrict dw,
                       const int C, const int K, const int KP, const int CP, const int SPLITS) {
    __local float m[T36 * OUT_PAIRS];                 // m[xi][pair]
    __local float taps[OUT_PAIRS * 9];                // taps[cl][kl][t]: dw's order within the block
    const int tid = get_local_id(0), cblocks = CEIL_DIV(C, OUT_C);
    const int c0 = get_group_id(0) % cblocks * OUT_C, k0 = get_group_id(0) / cblocks * OUT_K;
    const int p = tid % OUT_PAIRS, c = c0 + p % OUT_C, k = k0 + p / OUT_C;
    // this work-item's products: first, first + OUT_SHARE, ... (OUT_EACH of them), their loads
    // of one slice in flight together; each product's slices still added in slice order
    const int first = tid / OUT_PAIRS;
    float sum[OUT_EACH];
    for (int j = 0; j < OUT_EACH; j++) sum[j] = 0.0f;
    if (c < C && k < K)
        for (int s = 0; s < SPLITS; s++)
#pragma unroll
            for (int j = 0; j < OUT_EACH; j++)
                sum[j] += M[((s * T36 + first + j * OUT_SHARE) * KP + k) * CP + c];
    for (int j = 0; j < OUT_EACH; j++) m[(first + j * OUT_SHARE) * OUT_PAIRS + p] = sum[j];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid < OUT_PAIRS) {
        float mp[T36], o[9];
        for (int xi = 0; xi < T36; xi++) mp[xi] = m[xi * OUT_PAIRS + p];
        wgrad_output_tile(mp, o);
        for (int t = 0; t < 9; t++) taps[((p % OUT_C) * OUT_K + p / OUT_C) * 9 + t] = o[t];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // channel c0 + cl's taps of filters k0 .. k0 + OUT_K - 1 lie together in dw: one run each
    for (int e = tid; e < OUT_PAIRS * 9; e += OUT_WG) {
        const int cl = e / (OUT_K * 9), r = e % (OUT_K * 9);
        if (c0 + cl < C && k0 + r / 9 < K) dw[((c0 + cl) * K + k0) * 9 + r] = taps[e];
    }
}
#else
// One work-item per (c, k), neighbours along c (coalesced reads of M): the slices added in
// order, then the output transform.
__kernel void wgrad_wino_output(__global const float* restrict M, __global float* restrict dw,
                                const int C, const int K, const int KP, const int CP, const int SPLITS) {
    const int i = get_global_id(0);
    if (i >= C * K) return;
    const int c = i % C, k = i / C;
    float m[T36], o[9];
    for (int xi = 0; xi < T36; xi++) {
        float sum = 0.0f;
        for (int s = 0; s < SPLITS; s++) sum += M[((s * T36 + xi) * KP + k) * CP + c];
        m[xi] = sum;
    }
    wgrad_output_tile(m, o);
    for (int t = 0; t < 9; t++) dw[(c * K + k) * 9 + t] = o[t];
}
#endif
