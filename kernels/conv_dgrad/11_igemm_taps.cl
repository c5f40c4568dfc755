// Stage 11 (implicit GEMM, tap-major reduction): the phase split with its gathers decoded once
// per step instead of once per element.
//
// What changed since 11_igemm_phases: the order of the reduction. There, index kk of a phase's
// reduction is (output channel k, tap t) with the tap innermost, so every element a work-item
// fetches has its own tap: per element a division by the tap count, the tap's dy row and column,
// four bounds tests and the address. Here kk = t * K + k, the channel innermost. A step of TK
// consecutive indices (K % TK == 0, which the host requires) then lies inside one tap t: the tap,
// its dy row and column for this work-item's column of B, whether they lie inside dy and the
// step's first offsets are decoded once per step (GEMM_STEP, gemm_core.h), and an element of the
// step is its channel's offset from those: one multiply-add and a load. The sum is the same, in
// another order (the tests' tolerance covers the rounding).
// The weights are read in the same order: consecutive elements of A's copy are consecutive
// channels k, KH*KW floats apart in w (IOHW); w is small and read from the caches.
// The GEMM of a phase, the kernel and its switches: kernels/common/phase_gemm.h, as 11_igemm_phases.
// Layouts, NDRange and JIT parameters: as 11_igemm_phases; K % TK == 0.

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

// The tile loop counts kk from 0 over this run; the run's terms start at k_begin. Step k0 holds
// indices k0 + k_begin + (0 .. TK-1) = tap t, channels kc .. kc+TK-1.
#define GEMM_STEP_STATE int k0_ = 0, dyo_ = 0, wo_ = 0; bool in_ = false;
#define GEMM_STEP(k0) do {                                                                   \
        const int kk_ = (k0) + k_begin, t_ = kk_ / K, kc_ = kk_ - t_ * K;                      \
        const int j_ = t_ / q.sp, l_ = t_ % q.sp, oh_ = hq - j_, ow_ = wq - l_;                \
        k0_ = (k0);                                                                           \
        in_ = col_ok && oh_ >= 0 && ow_ >= 0 && oh_ < OH && ow_ < OW;                          \
        dyo_ = col_base + (kc_ * OH + oh_) * OW + ow_;       /* dy' of channel kc_ */          \
        wo_ = kc_ * KH * KW + (q.ph + STRIDE * j_) * KW + q.pw + STRIDE * l_;  /* w[0][kc_][r][s] */ \
    } while (0)
// A[c][kk] = w[c][kc + (kk - k0)][r][s]; B[kk][column] = dy'[kc + (kk - k0)] at the step's (oh, ow).
#define GEMM_A(m, kk) ((m) < C ? w[(m) * K * KH * KW + wo_ + ((kk) - k0_) * KH * KW] : 0.0f)
#define GEMM_B(kk, n) (in_ ? GRAD_IN(dy, y, dyo_ + ((kk) - k0_) * OH * OW) : 0.0f)

#include "phase_gemm.h"   // the tile loop, the GEMM of one phase, the kernel
