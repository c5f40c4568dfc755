// GEMM stage 01: naive C = A . B (A: M x K, B: K x N, C: M x N, all row-major float32).
//
// One work-item per element of C walks a row of A and a column of B. Neighbouring work-items
// (dim 0 = column) read the same A element and neighbouring B elements, so the loads coalesce,
// but every A and B element is fetched from global memory M or N times: the kernel is bound by
// memory traffic, not by arithmetic. Stage 02 reuses tiles through local memory.
// NDRange: dim 0 = column n (padded to WG), dim 1 = row m. JIT parameters: WG (host side).

__kernel void gemm(__global const float* restrict A, __global const float* restrict B,
                   __global float* restrict C, const int M, const int N, const int K) {
    const int n = get_global_id(0);
    const int m = get_global_id(1);
    if (n >= N) return;                  // the NDRange is padded up to a multiple of WG
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        acc = fma(A[m * K + k], B[k * N + n], acc);
    }
    C[m * N + n] = acc;
}
