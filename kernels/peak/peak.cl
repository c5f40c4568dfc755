// Chapter 00: the two numbers that bound every later kernel (the roofline).
//
// copy: each work-item copies VEC floats at a time; bandwidth = 2 * bytes / time (read + write).
// fma:  each work-item runs CHAINS independent multiply-add chains of ITERS steps on float4, so
//       the ALUs never wait on a result; FLOP/s = 2 * 4 * CHAINS * ITERS * work-items / time.
//       Written a*b+c, which OpenCL C may contract into one fused multiply-add: PoCL ran explicit
//       mad()/fma() calls several times slower on the CPU than this plain expression.
// JIT parameters: ITERS, CHAINS (fma).

#ifndef ITERS
#define ITERS 256
#endif
#ifndef CHAINS
#define CHAINS 8
#endif

__kernel void copy(__global const float4* restrict src, __global float4* restrict dst, const int n4) {
    const int i = get_global_id(0);
    if (i < n4) dst[i] = src[i];
}

__kernel void fma_rate(__global float* restrict out, const float a, const float b) {
    float4 acc[CHAINS];
    const float seed = (float)get_global_id(0);
    for (int j = 0; j < CHAINS; j++) acc[j] = (float4)(seed + j, seed - j, seed * j, seed + 2 * j);
    for (int i = 0; i < ITERS; i++) {
#pragma unroll
        for (int j = 0; j < CHAINS; j++) acc[j] = acc[j] * a + b;   // a*b+c: contracted to an FMA where the device has one
    }
    float4 s = acc[0];
    for (int j = 1; j < CHAINS; j++) s += acc[j];
    // a result the compiler cannot prove unused; written only when it is impossible in practice
    if (s.x + s.y + s.z + s.w == 1.2345e-30f) out[get_global_id(0)] = s.x;
}
