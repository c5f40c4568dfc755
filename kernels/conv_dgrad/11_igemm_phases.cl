// Stage 11 (implicit GEMM, phase split): strided input gradients without multiplying zeros.
//
// What changed since 11_igemm_analytic: with STRIDE s, input row h is reached only by the taps r
// with (h + PAD - r) % s == 0, i.e. r = ph, ph + s, ... where ph = (h + PAD) % s. Grouping the
// input positions by their phase (ph, pw) gives s*s independent dense implicit GEMMs, phase p
// with reduction K * RP * SP over only its own taps (RP = ceil((KH - ph) / s)), and positions
// h = h0 + s*i, where dy's row is oh = bh + i - j for tap r = ph + s*j: a stride-1 window.
// One launch, dim 2 = phase; work-groups past their phase's positions return at once. A phase
// with no taps (ph >= KH) writes zeros. With STRIDE 1 there is one phase: stage igemm_analytic.
// The GEMM of a phase and the kernel are in kernels/common/phase_gemm.h (shared with
// 11_igemm_taps), with the stage's switches: PHASE_CONSTANT (each phase compiled with its tap
// counts constant), SPLITS (split-K for small batches) and STORE_LOCAL (dx stored through local
// memory). This file defines how an operand element is fetched.
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W).
// NDRange: (ceil(N*ceil(H/s)*ceil(W/s) / TN) * TN/WN, SPLITS * ceil(C/TM) * TM/WM, s*s).
// JIT parameters: KH, KW, STRIDE, ACT, PHASE_CONSTANT, STORE_LOCAL, SPLITS; TM, TN, TK, WM, WN (gemm_core.h).

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif

#include "dgrad_phases.h"

// A[c][(k, j, l)]: the weight of tap (ph + STRIDE*j, pw + STRIDE*l).
inline float phase_weight(__global const float* restrict w, const phase_t q, const int c, const int kk,
                          const int C, const int K, const int KTOT) {
    if (c >= C || kk >= KTOT) return 0.0f;
    const int k = kk / q.taps, t = kk % q.taps;
    const int r = q.ph + STRIDE * (t / q.sp), s = q.pw + STRIDE * (t % q.sp);
    return w[((c * K + k) * KH + r) * KW + s];
}

// B[(k, j, l)][column]: dy' at (hq - j, wq - l), or 0 outside dy.
inline float phase_dy(__global const float* restrict dy, __global const float* restrict y,
                      const phase_t q, const int kk, const int KTOT, const int OH, const int OW,
                      const int col_ok, const int col_base, const int hq, const int wq) {
    if (!col_ok || kk >= KTOT) return 0.0f;
    const int k = kk / q.taps, t = kk % q.taps;
    const int oh = hq - t / q.sp, ow = wq - t % q.sp;
    if (oh < 0 || ow < 0 || oh >= OH || ow >= OW) return 0.0f;
    const int o = col_base + (k * OH + oh) * OW + ow;
    return GRAD_IN(dy, y, o);
}

// The tile loop counts kk from 0 over this run; the run's terms start at k_begin.
#define GEMM_A(m, kk) phase_weight(w, q, m, (kk) + k_begin, C, K, KTOT)
#define GEMM_B(kk, n) phase_dy(dy, y, q, (kk) + k_begin, KTOT, OH, OW, col_ok, col_base, hq, wq)

#include "phase_gemm.h"   // the tile loop, the GEMM of one phase, the kernel
