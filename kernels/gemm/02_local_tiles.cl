// GEMM stage 02: local-memory tiles.
//
// What changed: a TS x TS work-group loads a TS x TS tile of A and of B into local memory per step
// (one element each, zero outside the matrices), waits at a barrier, and every work-item reads
// its row of the A tile and column of the B tile from there. Each global element is now fetched
// M/TS (or N/TS) times instead of M (or N) times; each multiply-add still costs two local loads.
// Stage 03 keeps a block of C per work-item in registers so one local load feeds several FMAs.
// NDRange: dim 0 = column n, dim 1 = row m, both padded to TS; work-group TS x TS.
// JIT parameters: TS (tile side; TS*TS <= the device's work-group limit).

#ifndef TS
#define TS 16
#endif

__kernel void gemm(__global const float* restrict A, __global const float* restrict B,
                   __global float* restrict C, const int M, const int N, const int K) {
    __local float As[TS][TS];
    __local float Bs[TS][TS + 1];
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int n = get_global_id(0), m = get_global_id(1);
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        As[tm][tn] = (m < M && k0 + tn < K) ? A[m * K + k0 + tn] : 0.0f;
        Bs[tm][tn] = (k0 + tm < K && n < N) ? B[(k0 + tm) * N + n] : 0.0f;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++) {
            acc = fma(As[tm][k], Bs[k][tn], acc);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (m < M && n < N) C[m * N + n] = acc;
}
