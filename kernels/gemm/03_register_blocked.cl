// GEMM stage 03: register blocking with vector loads.
//
// What changed: a TM x TN block of C per work-group, WM x WN of it per work-item in registers:
// per step of the k loop a work-item reads WM + WN local words and does WM*WN FMAs (16 for 8
// words at 4x4, against stage 02's 1 for 2). When K % 4 == 0 (and N % 4 == 0) the tiles of A
// (and B) come in as float4 loads (GEMM_VEC_A / GEMM_VEC_B, set at JIT time). The tile loop
// itself is kernels/common/gemm_core.h, shared with the implicit-GEMM convolution stages.
// NDRange: (ceil(N/TN) * TN/WN, ceil(M/TM) * TM/WM), work-group (TN/WN, TM/WM).
// JIT parameters: TM, TN, TK, WM, WN (constraints in gemm_core.h), GEMM_VEC_A, GEMM_VEC_B.

#define GEMM_ARGS __global const float* restrict A, __global const float* restrict B, \
                  const int M, const int N, const int K
#define GEMM_A(m, k) (((m) < M && (k) < K) ? A[(m) * K + (k)] : 0.0f)
#define GEMM_B(k, n) (((k) < K && (n) < N) ? B[(k) * N + (n)] : 0.0f)
// K % 4 == 0 and k a multiple of 4: the four values are all inside or all outside
#define GEMM_A4(m, k) (((m) < M && (k) < K) ? vload4(0, A + (m) * K + (k)) : (float4)(0.0f))
#define GEMM_B4(k, n) (((k) < K && (n) < N) ? vload4(0, B + (k) * N + (n)) : (float4)(0.0f))
#include "gemm_core.h"

__kernel __attribute__((reqd_work_group_size(TN / WN, TM / WM, 1)))
void gemm(__global const float* restrict A, __global const float* restrict B,
          __global float* restrict C, const int M, const int N, const int K) {
    GEMM_TILES(As, Bs);
    const int m0 = get_group_id(1) * TM, n0 = get_group_id(0) * TN;
    float acc[WM][WN];
    for (int i = 0; i < WM; i++)
        for (int j = 0; j < WN; j++) acc[i][j] = 0.0f;
    gemm_accumulate(A, B, M, N, K, m0, n0, K, As, Bs, acc);
    for (int i = 0; i < WM; i++) {
        const int m = m0 + GEMM_ROW(i);
        for (int j = 0; j < WN; j++) {
            const int n = n0 + GEMM_COL(j);
            if (m < M && n < N) C[m * N + n] = acc[i][j];
        }
    }
}
