// Stage 13 tc_fp16_ldm: stage tc_fp16 with its fragments loaded by ldmatrix from an unpadded,
// XOR-swizzled shared layout.
//
// What changed since tc_fp16: a fragment was 4 (A) or 2 (B) 32-bit shared loads per lane and
// per mma tile; ldmatrix.x4 loads four 8x8 matrices of 16-bit values in one instruction, each
// lane naming one 16-byte row and receiving exactly the mma fragment layout: a 16x16 A tile in
// one instruction, two 8x16 B tiles in another. Fewer shared-memory instructions per mma.
// The layout: rows of BK = 32 values (64 bytes, four 16-byte chunks), no padding. Chapter 10's
// bank map: ldmatrix serves each 8x8 matrix as one request of 8 rows x 16 bytes; unpadded, rows
// r and r+2 start 128 bytes apart, on the same banks: 4-way conflicts. Swizzled, chunk j of row
// r is stored at chunk j ^ ((r / 2) % 4): rows 0-1 keep their chunk, rows 2-3 swap it with its
// neighbour, ..., and the 8 rows of a request fall on 8 different 4-bank groups (no conflict);
// the 16-byte stores of the gathered rows are conflict-free by the same argument.
// Launch, tiles, JIT parameters: as tc_fp16.
// Why swizzle rather than pad: tc_fp16's padded rows (80 bytes) were already conflict-free and
// 16-byte aligned, so cp.async would work with either. The swizzle saves shared memory (64
// instead of 80 bytes a row), keeps the row pitch a power of two, and is the hardware's 64-byte
// swizzle pattern; 13_tc_nhwc.cu's CH = 8 rows take j ^ (r % 8), the 128-byte pattern that
// wgmma and the TMA read there.
// Measured (H200, ResNet-50, batch 64): see chapter 13's recorded table. Fewer shared-memory
// instructions do not help a kernel bounded by its gather.

#include "tc.cuh"

#define BM 128                // positions per block
#define BN 64                 // channels per block
#define BK 32                 // reduction indices per chunk: 4 chunks of 8 values per row
// where chunk j (8 values) of shared row r is stored, in 16-bit values from the tile's start
#define SWZ(r, j) ((r) * BK + (((j) ^ (((r) >> 1) & 3)) << 3))

extern "C" __global__ void __launch_bounds__(128)
conv_dgrad(const h16* __restrict__ dy, const h16* __restrict__ y, const h16* __restrict__ w,
           h16* __restrict__ dx, int N, int C, int H, int W, int K, int OH, int OW, int PAD) {
    __shared__ __align__(128) h16 As[BM * BK];           // row = position, swizzled
    __shared__ __align__(128) h16 Bs[BN * BK];           // row = channel, swizzled
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int NP = N * H * W, HW = H * W, KTOT = K * KH * KW;
    const int m0 = blockIdx.x * BM, c0 = blockIdx.y * BN;
    const int warp_m = (warp & 1) * 64, warp_n = (warp >> 1) * 32;
    const unsigned as = smem_addr(As), bs = smem_addr(Bs);

    // the position whose row of A this thread gathers: decoded once
    const Position p = position_at(m0 + tid, NP, H, W, K, OH, OW, PAD);

    float acc[4][4][4];
    zero_acc(acc);

    for (int k0 = 0; k0 < KTOT; k0 += BK) {
        // A: this thread's row, BK taps in order, 8 values per 16-byte store into its chunk
        Tap q = tap_at(k0);
#pragma unroll
        for (int j = 0; j < BK / 8; j++) {
            h16 v[8];
#pragma unroll
            for (int e = 0; e < 8; e++) {
                v[e] = to_h16(grad_at(dy, y, tap_offset(q, p, K, OH, OW)));
                next_tap(q);
            }
            *(uint4*)&As[SWZ(tid, j)] = make_uint4(pack2(v[0], v[1]), pack2(v[2], v[3]),
                                                   pack2(v[4], v[5]), pack2(v[6], v[7]));
        }
        // B: w[c][k0 + kk], copied as stored
#pragma unroll
        for (int i = 0; i < BN * BK / 128; i++) {
            const int c = tid / BK + i * (128 / BK), kk = tid % BK;
            const bool ok = c0 + c < C && k0 + kk < KTOT;
            Bs[SWZ(c, kk >> 3) + (kk & 7)] = ok ? w[(c0 + c) * KTOT + k0 + kk] : (h16)0;
        }
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < BK; ks += 16) {
            unsigned a[4][4], b[4][2];
            // A: lane l names row l % 16 of the 16x16 tile, chunk l / 16 (matrices a0..a3)
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
                ldmatrix_x4(a[mt], as + 2 * SWZ(warp_m + mt * 16 + (lane & 15), (ks >> 3) + (lane >> 4)));
            // B: two n8 tiles per instruction; matrix l / 8: tile (l / 16), k chunk (l / 8) % 2
#pragma unroll
            for (int np = 0; np < 2; np++) {
                unsigned r[4];
                ldmatrix_x4(r, bs + 2 * SWZ(warp_n + np * 16 + ((lane >> 4) << 3) + (lane & 7),
                                            (ks >> 3) + ((lane >> 3) & 1)));
                b[2 * np][0] = r[0];
                b[2 * np][1] = r[1];
                b[2 * np + 1][0] = r[2];
                b[2 * np + 1][1] = r[3];
            }
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
#pragma unroll
                for (int nt = 0; nt < 4; nt++) mma_16(acc[mt][nt], a[mt], b[nt]);
        }
        __syncthreads();
    }

    store_dx(dx, acc, m0 + warp_m, c0 + warp_n, g, t, NP, C, HW);
}
