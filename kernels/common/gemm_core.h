// The blocked GEMM core: C[m0 .. m0+TM) x [n0 .. n0+TN) += A . B over a reduction of k_total,
// written once and included by the course GEMM (kernels/gemm/03_register_blocked.cl) and the
// GEMM-based convolution stages of chapter 11, which differ only in how an operand element is
// fetched: a plain matrix, or a gather from a tensor (implicit GEMM).
//
// A work-group of (TN/WN) x (TM/WM) work-items stages a TM x TK tile of A and a TK x TN tile of B
// in local memory per step; each work-item keeps a WM x WN block of C in registers (its rows
// tm + i*(TM/WM), columns tn + j*(TN/WN): neighbouring work-items read neighbouring local words
// and write neighbouring columns of C).
//
// Before including, define how operands are fetched (0 outside the matrices):
//     GEMM_ARGS       the parameter list gemm_accumulate takes (tensors, sizes)
//     GEMM_A(m, k)    element (m, k) of A; GEMM_B(k, n) element (k, n) of B
//     GEMM_VEC_A = 1  and GEMM_A4(m, k): A[m][k .. k+3] as a float4 (the 4 all in or all out)
//     GEMM_VEC_B = 1  and GEMM_B4(k, n): B[k][n .. n+3] as a float4 (the 4 all in or all out)
// Each work-item fetches B in the same column every step (GEMM_B_COL, when WG % TN == 0): an
// implicit GEMM decodes that column once, outside the reduction loop.
// GEMM_B_KMAJOR = 1 (default 0) copies B along k, as A is copied: for a B that is contiguous along
// the reduction (the weight gradient's x, kernels/conv_wgrad/06_igemm_blocked.cl), neighbouring
// work-items then load neighbouring words. Element i of B's copy is B[k0 + i%TK][n0 + i/TK], stored
// in the tile with rows padded (GEMM_LDB), and with WG % TK == 0 a work-item's elements all lie in
// one row of the step, k0 + GEMM_TID % TK: a gather decodes that row once per step (GEMM_STEP)
// and each of its columns once per work-item. The fetch is GEMM_BK(p, k, n), p the element's slot
// among the work-item's (0 .. ceil(TK*TN/WG)-1, the same column every step), so a kernel can keep
// what it decoded of each column in registers indexed by p (built in GEMM_STEP_STATE).
// Optionally, what is the same for every element of a step (both default to nothing):
//     GEMM_STEP_STATE declarations at the top of gemm_accumulate, for the fetches to read
//     GEMM_STEP(k0)   statements run once per step k0, before its elements are fetched
//
// GEMM_PREFETCH = 1 (default 0) overlaps the copy of the next step with the arithmetic of this
// one. Without it each step runs: global loads -> (wait for them) -> local stores -> barrier (1)
// -> TK rank-1 updates -> barrier (2), so every step waits out a whole global-memory latency and
// the arithmetic units idle unless other work-groups on the compute unit fill the gap. With it, a
// work-item issues its loads of step k0+TK into registers right after barrier (1), computes step
// k0 from local memory while they are in flight, and stores them into the tiles at the top of the
// next step: a step waits for its loads only where they take longer than its arithmetic. The
// price: ceil(TM*TK/WG) + ceil(TK*TN/WG) more floats in registers per work-item, in whole float4s
// with vector loads (4 + 4 beside 16 accumulators for the default tiles, 8 + 8 beside 64 for
// TM = TN = 128, WM = WN = 8); still one local buffer. 09_prefetch (chapter 09) and
// conv_forward's 05_wino_blocked prefetch the same way.
#ifndef GEMM_CORE_H
#define GEMM_CORE_H

#include "course.h"

// JIT parameters; constraints (checked in helpers/ops/gemm.py: tile_requires before building):
// TM % WM == 0, TN % WN == 0; TK % 4 == 0 and TN % 4 == 0 with vector loads; for GEMM_B_COL to
// hold, the work-group WG = (TM/WM)*(TN/WN) a multiple of TN. Any WG is legal: a work-item copies
// ceil(elements/WG) elements of a tile, the last ones only where they exist.
#ifndef TM
#define TM 64
#endif
#ifndef TN
#define TN 64
#endif
#ifndef TK
#define TK 16
#endif
#ifndef WM
#define WM 4
#endif
#ifndef WN
#define WN 4
#endif
#ifndef GEMM_VEC_A
#define GEMM_VEC_A 0
#endif
#ifndef GEMM_VEC_B
#define GEMM_VEC_B 0
#endif
#ifndef GEMM_PREFETCH
#define GEMM_PREFETCH 0               // 1: the next step's tiles fetched into registers (above)
#endif
#ifndef GEMM_LDS4
#define GEMM_LDS4 0                   // 1: float4 reads of the tiles (below)
#endif
#ifndef GEMM_B_KMAJOR
#define GEMM_B_KMAJOR 0               // 1: B copied along k through GEMM_BK (above)
#endif

#define GEMM_RM (TM / WM)             // work-items along m
#define GEMM_RN (TN / WN)             // work-items along n
#define GEMM_WG (GEMM_RM * GEMM_RN)

// Which element of C a work-item's acc[i][j] holds, as an offset from (m0, n0): every kernel's
// epilogue writes acc[i][j] to row m0 + GEMM_ROW(i), column n0 + GEMM_COL(j).
//
// GEMM_LDS4 = 0: rows tm + i*(TM/WM), columns tn + j*(TN/WN). A step's rank-1 update reads WM
// words of the A tile and WN of the B tile, one word per read instruction: for 8 x 8 blocks, 16
// local-memory read instructions beside 64 multiply-adds.
// GEMM_LDS4 = 1 (WM and WN multiples of 4): a work-item holds runs of 4 consecutive rows and 4
// consecutive columns, rows 4*tm + (i/4)*4*(TM/WM) + i%4, so each run is one float4 read of a tile:
// 4 read instructions per 64 multiply-adds, for the same bytes. Neighbouring work-items still read
// neighbouring float4s of B and the same float4 of A (a broadcast). What falls is the number of
// instructions the compute unit issues besides the multiply-adds; what that is worth on a GPU is
// measured, not modelled (11b prints the recorded pair). The A tile's rows are padded by 4
// words instead of 1, to keep every run 16-byte aligned, and the tiles are declared 16-byte aligned.
#if GEMM_LDS4
#define GEMM_ROW(i) (4 * get_local_id(1) + ((i) / 4) * (4 * GEMM_RM) + (i) % 4)
#define GEMM_COL(j) (4 * get_local_id(0) + ((j) / 4) * (4 * GEMM_RN) + (j) % 4)
#define GEMM_LDA (TM + 4)             // A tile stored k-major, rows padded to stay 16-byte aligned
#define GEMM_LDB (TN + 4 * GEMM_B_KMAJOR)  // B's rows padded likewise where it is copied along k
#define GEMM_TILES(As, Bs) __local float As[TK * GEMM_LDA] __attribute__((aligned(16))); \
                           __local float Bs[TK * GEMM_LDB] __attribute__((aligned(16)))
#else
#define GEMM_ROW(i) (get_local_id(1) + (i) * GEMM_RM)
#define GEMM_COL(j) (get_local_id(0) + (j) * GEMM_RN)
#define GEMM_LDA (TM + 1)             // A tile stored k-major, one word of padding per row:
                                      // work-items storing along k hit different banks
#define GEMM_LDB (TN + GEMM_B_KMAJOR)   // B's rows padded likewise where it is copied along k
#define GEMM_TILES(As, Bs) __local float As[TK * GEMM_LDA]; __local float Bs[TK * GEMM_LDB]
#endif
#ifndef GEMM_STEP_STATE
#define GEMM_STEP_STATE
#endif
#ifndef GEMM_STEP
#define GEMM_STEP(k0)
#endif
#define GEMM_TID ((int)(get_local_id(1) * GEMM_RN + get_local_id(0)))
#define GEMM_B_COL (GEMM_TID % TN)    // the column of B this work-item fetches, every step

// The epilogue through local memory, for kernels whose work-group is a multiple of TN (GEMM_B_COL
// holds). Written straight from the registers with GEMM_LDS4, a store instruction of a warp puts
// one value per work-item at columns 4 apart (each work-item holds runs of 4 columns); where the
// kernel's columns are themselves spread in memory (the phase split's, STRIDE apart) each lane
// hits a 32-byte sector of its own (chapter 11 counts them). GEMM_STORE_COLUMN instead passes the
// block row by row, acc[i][.] of every work-item, through Cs (GEMM_RM x TN floats, declared by
// GEMM_C_TILE); after each pass a work-item writes the values of its own column GEMM_B_COL, so
// neighbouring work-items write neighbouring columns of C. STORE(row, value) writes C's element
// (m0 + row, n0 + GEMM_B_COL); the kernel decodes that column's address once, before.
// GEMM_ROW_OF(t, i): the row of acc[i][.] for the work-items with local id 1 equal to t.
#if GEMM_LDS4
#define GEMM_ROW_OF(t, i) (4 * (t) + ((i) / 4) * (4 * GEMM_RM) + (i) % 4)
#else
#define GEMM_ROW_OF(t, i) ((t) + (i) * GEMM_RM)
#endif
#define GEMM_C_TILE(Cs) __local float Cs[GEMM_RM * TN]
#define GEMM_STORE_COLUMN(Cs, acc, STORE) do {                                                  \
        for (int i_ = 0; i_ < WM; i_++) {                                                      \
            barrier(CLK_LOCAL_MEM_FENCE);   /* the previous pass's reads are done */            \
            for (int j_ = 0; j_ < WN; j_++) Cs[get_local_id(1) * TN + GEMM_COL(j_)] = acc[i_][j_]; \
            barrier(CLK_LOCAL_MEM_FENCE);                                                      \
            for (int t_ = GEMM_TID / TN; t_ < GEMM_RM; t_ += GEMM_WG / TN)                     \
                STORE(GEMM_ROW_OF(t_, i_), Cs[t_ * TN + GEMM_B_COL]);                          \
        }                                                                                      \
    } while (0)

#if GEMM_PREFETCH
// The copy loops of gemm_accumulate (GEMM_PREFETCH = 0, below) split in two: GEMM_FETCH(k0)
// reads a work-item's elements of step k0 into registers ra, rb; gemm_store puts them into the
// tiles. Element i of A's copy is A[m0 + i/TK][k0 + i%TK] (with float4 loads: the 4 consecutive
// k from 4*(i%(TK/4)) of row i/(TK/4)), element i of B's is B[k0 + i/TN][n0 + i%TN] (the 4
// consecutive n from 4*(i%(TN/4)) of row i/(TN/4)); a work-item's are i = tid + p*WG, p < GEMM_PA
// (GEMM_PB for B), the last p only where the work-group does not divide the copy evenly.
#if GEMM_VEC_A
#define GEMM_NA (TM * TK / 4)                     // float4s of A per step
#define GEMM_A_T float4
#define GEMM_A_GET(p, i, k0) GEMM_A4(m0 + (i) / (TK / 4), (k0) + 4 * ((i) % (TK / 4)))
#else
#define GEMM_NA (TM * TK)                         // floats of A per step
#define GEMM_A_T float
#define GEMM_A_GET(p, i, k0) GEMM_A(m0 + (i) / TK, (k0) + (i) % TK)
#endif
#if GEMM_VEC_B
#define GEMM_NB (TK * TN / 4)
#define GEMM_B_T float4
#define GEMM_B_GET(p, i, k0) GEMM_B4((k0) + (i) / (TN / 4), n0 + 4 * ((i) % (TN / 4)))
#elif GEMM_B_KMAJOR
#define GEMM_NB (TK * TN)
#define GEMM_B_T float
#define GEMM_B_GET(p, i, k0) GEMM_BK(p, (k0) + (i) % TK, n0 + (i) / TK)
#else
#define GEMM_NB (TK * TN)
#define GEMM_B_T float
#define GEMM_B_GET(p, i, k0) GEMM_B((k0) + (i) / TN, n0 + (i) % TN)
#endif
#define GEMM_PA CEIL_DIV(GEMM_NA, GEMM_WG)        // registers (float or float4) per work-item
#define GEMM_PB CEIL_DIV(GEMM_NB, GEMM_WG)
#define GEMM_A_IN(i) (GEMM_NA % GEMM_WG == 0 || (i) < GEMM_NA)    // element i exists (always,
#define GEMM_B_IN(i) (GEMM_NB % GEMM_WG == 0 || (i) < GEMM_NB)    // at build time, if WG divides)

// A macro, not a function: GEMM_A and GEMM_B name gemm_accumulate's arguments.
#define GEMM_FETCH(k0) do {                                                                  \
        GEMM_STEP(k0);                                                                      \
        _Pragma("unroll") for (int p = 0; p < GEMM_PA; p++) {                               \
            const int i = tid + p * GEMM_WG;                                                \
            if (GEMM_A_IN(i)) ra[p] = GEMM_A_GET(p, i, k0);                                 \
        }                                                                                   \
        _Pragma("unroll") for (int p = 0; p < GEMM_PB; p++) {                               \
            const int i = tid + p * GEMM_WG;                                                \
            if (GEMM_B_IN(i)) rb[p] = GEMM_B_GET(p, i, k0);                                 \
        }                                                                                   \
    } while (0)

inline void gemm_store(__local float* As, __local float* Bs, const int tid,
                       const GEMM_A_T ra[GEMM_PA], const GEMM_B_T rb[GEMM_PB]) {
#pragma unroll
    for (int p = 0; p < GEMM_PA; p++) {
        const int i = tid + p * GEMM_WG;
        if (!GEMM_A_IN(i)) continue;
#if GEMM_VEC_A
        const int mm = i / (TK / 4), kk = 4 * (i % (TK / 4));
        As[kk * GEMM_LDA + mm] = ra[p].x;
        As[(kk + 1) * GEMM_LDA + mm] = ra[p].y;
        As[(kk + 2) * GEMM_LDA + mm] = ra[p].z;
        As[(kk + 3) * GEMM_LDA + mm] = ra[p].w;
#else
        As[(i % TK) * GEMM_LDA + i / TK] = ra[p];
#endif
    }
#pragma unroll
    for (int p = 0; p < GEMM_PB; p++) {
        const int i = tid + p * GEMM_WG;
        if (!GEMM_B_IN(i)) continue;
#if GEMM_VEC_B
        vstore4(rb[p], 0, Bs + 4 * i);             // row i/(TN/4), column 4*(i%(TN/4))
#elif GEMM_B_KMAJOR
        Bs[(i % TK) * GEMM_LDB + i / TK] = rb[p];  // row i%TK, column i/TK
#else
        Bs[i] = rb[p];                             // row i/TN, column i%TN
#endif
    }
}
#endif

inline void gemm_accumulate(GEMM_ARGS, const int m0, const int n0, const int k_total,
                            __local float* As, __local float* Bs, float acc[WM][WN]) {
    const int tn = get_local_id(0), tm = get_local_id(1), tid = GEMM_TID;
    GEMM_STEP_STATE
#if GEMM_PREFETCH
    GEMM_A_T ra[GEMM_PA];                         // this work-item's elements of the next step
    GEMM_B_T rb[GEMM_PB];
    if (k_total > 0) GEMM_FETCH(0);
#endif
    for (int k0 = 0; k0 < k_total; k0 += TK) {
#if GEMM_PREFETCH
        gemm_store(As, Bs, tid, ra, rb);          // step k0, fetched during step k0-TK's products
#else
        GEMM_STEP(k0);
#if GEMM_VEC_A
        for (int i = tid; i < TM * TK / 4; i += GEMM_WG) {     // 4 consecutive k of one row
            const int mm = i / (TK / 4), kk = 4 * (i % (TK / 4));
            const float4 v = GEMM_A4(m0 + mm, k0 + kk);
            As[kk * GEMM_LDA + mm] = v.x;
            As[(kk + 1) * GEMM_LDA + mm] = v.y;
            As[(kk + 2) * GEMM_LDA + mm] = v.z;
            As[(kk + 3) * GEMM_LDA + mm] = v.w;
        }
#else
        for (int i = tid; i < TM * TK; i += GEMM_WG) {         // neighbours along k: coalesced
            const int mm = i / TK, kk = i % TK;
            As[kk * GEMM_LDA + mm] = GEMM_A(m0 + mm, k0 + kk);
        }
#endif
#if GEMM_VEC_B
        for (int i = tid; i < TK * TN / 4; i += GEMM_WG) {
            const int kk = i / (TN / 4), nn = 4 * (i % (TN / 4));
            vstore4(GEMM_B4(k0 + kk, n0 + nn), 0, Bs + kk * TN + nn);
        }
#elif GEMM_B_KMAJOR
#pragma unroll
        for (int p = 0; p < CEIL_DIV(TK * TN, GEMM_WG); p++) {  // neighbours along k: coalesced
            const int i = tid + p * GEMM_WG, kk = i % TK, nn = i / TK;
            if (i < TK * TN) Bs[kk * GEMM_LDB + nn] = GEMM_BK(p, k0 + kk, n0 + nn);
        }
#else
        for (int i = tid; i < TK * TN; i += GEMM_WG) {         // neighbours along n: coalesced
            const int kk = i / TN, nn = i % TN;
            Bs[kk * TN + nn] = GEMM_B(k0 + kk, n0 + nn);
        }
#endif
#endif
        // (1) read after write: each word of the tiles is stored by one work-item and read by
        // many, so every store of step k0 is done before anyone computes on the tiles.
        barrier(CLK_LOCAL_MEM_FENCE);
#if GEMM_PREFETCH
        // Step k0+TK's loads go out now, into private registers that no other work-item reads:
        // they need no barrier of their own, and they touch As and Bs only in gemm_store, after
        // barrier (2).
        if (k0 + TK < k_total) GEMM_FETCH(k0 + TK);
#endif
#pragma unroll 4
        for (int kk = 0; kk < TK; kk++) {
            float a[WM], b[WN];
#if GEMM_LDS4
#pragma unroll
            for (int g = 0; g < WM / 4; g++)
                vstore4(*(__local const float4*)(As + kk * GEMM_LDA + 4 * tm + g * 4 * GEMM_RM), 0, a + 4 * g);
#pragma unroll
            for (int g = 0; g < WN / 4; g++)
                vstore4(*(__local const float4*)(Bs + kk * GEMM_LDB + 4 * tn + g * 4 * GEMM_RN), 0, b + 4 * g);
#else
#pragma unroll
            for (int i = 0; i < WM; i++) a[i] = As[kk * GEMM_LDA + tm + i * GEMM_RM];
#pragma unroll
            for (int j = 0; j < WN; j++) b[j] = Bs[kk * GEMM_LDB + tn + j * GEMM_RN];
#endif
#pragma unroll
            for (int i = 0; i < WM; i++)
#pragma unroll
                for (int j = 0; j < WN; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        // (2) write after read: every work-item has finished reading step k0's tiles before the
        // stores of step k0+TK (the top of the next step) overwrite them. With GEMM_PREFETCH = 1
        // those values are in registers by now (or about to be): nothing else waits here.
        // Without this barrier the tests still pass on PoCL, which adds a barrier at the latch of
        // every loop that holds one; a GPU would race. tests/test_gemm_prefetch.py checks the order.
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

#endif
