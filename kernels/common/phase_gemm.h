// The GEMM of one phase of a strided input gradient and the kernel that runs every phase, shared
// by the phase-split stages 11_igemm_phases and 11_igemm_taps, which differ only in the order of
// the reduction and so in how an operand element is fetched.
//
// Before including, define KH, KW, STRIDE and the fetches, GEMM_A(m, kk) and GEMM_B(kk, n)
// (optionally GEMM_STEP_STATE and GEMM_STEP(k0), gemm_core.h), in terms of the parameters of
// GEMM_ARGS below: the tensors, the phase q, the reduction's length KTOT = K * q.taps, whether the
// work-item's column of B exists (col_ok), dy's offset of its image (col_base), its dy row and
// column for tap (0, 0) (hq, wq), and where this run's terms start (k_begin: the tile loop counts
// kk from 0 over the run).
//
// Switches (JIT parameters, on by default except SPLITS):
// PHASE_CONSTANT = 1 compiles each phase as its own case (the kernel, at the end): its tap counts
// are then constants, and the fetches' divisions by them become shifts and multiplications. 0
// keeps one copy with the phase a run-time value (11b times both).
// SPLITS > 1 (split-K, set by the launch where the product has too few work-groups for the
// device, tuned by SPLIT_TARGET): grid dimension 1 holds SPLITS runs of each phase's reduction;
// run j writes its sums into slice j of a workspace the shape of dx, and split_sum adds the slices.
// STORE_LOCAL = 1 writes dx through local memory (gemm_core.h: GEMM_STORE_COLUMN), so that
// neighbouring work-items store neighbouring positions; 0 stores from the registers.
// NDRange: (ceil(N*ceil(H/s)*ceil(W/s) / TN) * TN/WN, SPLITS * ceil(C/TM) * TM/WM, s*s).
#ifndef PHASE_GEMM_H
#define PHASE_GEMM_H

#ifndef PHASE_CONSTANT
#define PHASE_CONSTANT 1
#endif
#ifndef STORE_LOCAL
#define STORE_LOCAL 1
#endif
#ifndef SPLITS
#define SPLITS 1
#endif

#include "dgrad_phases.h"
#include "split_sum.h"

#define GEMM_ARGS __global const float* restrict dy, __global const float* restrict y, \
                  __global const float* restrict w, const phase_t q, const int C, const int KTOT, \
                  const int K, const int OH, const int OW, \
                  const int col_ok, const int col_base, const int hq, const int wq, const int k_begin
#include "gemm_core.h"

// The GEMM of one phase (PHASE_CONSTANT: the kernel calls it with ``phase`` a constant). Whether
// the compiler really makes one copy per phase is its choice: NVIDIA's kept a single copy, the
// phase a run-time value again, when the call had one more argument (the run of a split). So the
// run comes from grid dimension 1 here, and tests/test_conv_gemm.py counts the copies in the PTX.
inline void phase_gemm(const int phase, __global const float* restrict dy, __global const float* restrict y,
                       __global const float* restrict w, __global float* restrict dx,
                       const int N, const int C, const int H, const int W,
                       const int K, const int OH, const int OW, const int PAD,
                       __local float* As, __local float* Bs, __local float* Cs) {
    const phase_t q = make_phase(phase, H, W, PAD);
    const int PHW = q.hp * q.wp, NP = N * PHW, KTOT = K * q.taps;
#if SPLITS > 1
    const int mblocks = CEIL_DIV(C, TM), split = get_group_id(1) / mblocks;   // dim 1: (run, block)
    const int m0 = get_group_id(1) % mblocks * TM, n0 = get_group_id(0) * TN;
#else
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
#endif
    if (n0 >= NP) return;                // the whole work-group: past this phase's positions
    // the column of B this work-item fetches: decoded once
    const int col = n0 + GEMM_B_COL;
    const int img = col / max(PHW, 1), i = (col % max(PHW, 1)) / q.wp, j = col % q.wp;
    float acc[WM][WN];
    for (int a = 0; a < WM; a++)
        for (int b = 0; b < WN; b++) acc[a][b] = 0.0f;
#if SPLITS > 1
    const int run = CEIL_DIV(CEIL_DIV(KTOT, TK), SPLITS) * TK;        // terms per run, whole steps
    const int k_begin = min(KTOT, split * run), k_len = min(KTOT - k_begin, run);
#else
    const int k_begin = 0, k_len = KTOT;
#endif
    gemm_accumulate(dy, y, w, q, C, KTOT, K, OH, OW, col < NP, img * K * OH * OW, q.bh + i, q.bw + j,
                    k_begin, m0, n0, k_len, As, Bs, acc);
#if SPLITS > 1
    // this run's slice of the workspace, found after the loop, not held in a pointer across it:
    // igemm_taps' spill at 168 registers went from 16 bytes to 8 (H200; igemm_phases now spills
    // 8 at 64: results/registers_split_k_nvidia-h200.json, 11b)
    dx += get_group_id(1) / CEIL_DIV(C, TM) * N * C * H * W;
#endif
#if STORE_LOCAL
    // dx[img][c][h0 + STRIDE*i][w0 + STRIDE*j] for this work-item's column, c = m0 + row
    const int out = img * C * H * W + (q.h0 + STRIDE * i) * W + q.w0 + STRIDE * j;
#define DX_ROW(row, v) if (col < NP && m0 + (row) < C) dx[out + (m0 + (row)) * H * W] = (v)
    GEMM_STORE_COLUMN(Cs, acc, DX_ROW);
#else
    PHASE_STORE(dx, acc, q, m0, n0, NP, PHW, C, H * W, W);
#endif
}

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void conv_dgrad(__global const float* restrict dy, __global const float* restrict y,
                __global const float* restrict w, __global float* restrict dx,
                const int N, const int C, const int H, const int W,
                const int K, const int OH, const int OW, const int PAD) {
    GEMM_TILES(As, Bs);
#if STORE_LOCAL
    GEMM_C_TILE(Cs);
#else
    __local float* Cs = 0;          // no staging tile: the stores go straight from the registers
#endif
#if PHASE_CONSTANT
    // One copy of phase_gemm per phase, each with its phase a constant once the loop is unrolled.
    // The branch is the same for the whole work-group, so the barriers inside it are legal.
#pragma unroll
    for (int phase = 0; phase < STRIDE * STRIDE; phase++)
        if (get_group_id(2) == phase)
            phase_gemm(phase, dy, y, w, dx, N, C, H, W, K, OH, OW, PAD, As, Bs, Cs);
#else
    // One copy: every fetch divides by a tap count known only at run time.
    phase_gemm(get_group_id(2), dy, y, w, dx, N, C, H, W, K, OH, OW, PAD, As, Bs, Cs);
#endif
}

#endif
