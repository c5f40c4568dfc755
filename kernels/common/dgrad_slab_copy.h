// The copy of chapter 10's first three stages (conv_dgrad/10_transposed, 10_padded, 10_swizzle and
// their CUDA twins), for the kernel of dgrad_slab_kernel.h: FETCH(k0) brings a work-item's share of chunk
// k0 (element i = lid + q*LS) from global memory into registers, STORE(b) puts it into half b of
// local memory, each decomposing the element's index again per chunk; COPY_ONCE does nothing
// (10_hoisted, which writes its own copy, computes there what is the same in every chunk). It reads
// the stage's layouts (DYW, DY_AT, WADDR, W_CC, W_R) and dgrad_slab.h's sizes; JIT parameters: those
// of dgrad_slab.h.
#ifndef DGRAD_SLAB_COPY_H
#define DGRAD_SLAB_COPY_H

// A work-item's share of chunk k0's copy: global -> registers (FETCH), registers -> half b (STORE).
#define COPY_ONCE                    // nothing before the chunk loop
#define FETCH(k0) do {                                                                  \
        _Pragma("unroll") for (int q = 0; q < NDY; q++) {                               \
            const int i = lid + q * LS;                                                 \
            const int kk = i / (PH * DYW), py = i / DYW % PH, px = i % DYW;             \
            const int k = (k0) + kk, oh = oh0 + py, ow = ow0 + px;                      \
            const bool ok = i < KC * PH * DYW && k < K && oh >= 0 && oh < OH && ow >= 0 && ow < OW; \
            gdy[q] = ok ? GRAD_IN(dy, y, ((n * K + k) * OH + oh) * OW + ow) : 0.0f;     \
        }                                                                               \
        _Pragma("unroll") for (int q = 0; q < NW; q++) {                                \
            const int i = lid + q * LS, cc = W_CC(i), R = W_R(i);                       \
            const bool ok = i < CB * ROWS && cb0 + cc < C && (k0) + R / TAPS < K;       \
            gw[q] = ok ? w[((cb0 + cc) * K + (k0)) * TAPS + R] : 0.0f;                  \
        }                                                                               \
    } while (0)
#define STORE(b) do {                                                                   \
        _Pragma("unroll") for (int q = 0; q < NDY; q++) {                               \
            const int i = lid + q * LS;                                                 \
            if (i < KC * PH * DYW) DYF(b)[DY_AT(i)] = gdy[q];                           \
        }                                                                               \
        _Pragma("unroll") for (int q = 0; q < NW; q++) {                                \
            const int i = lid + q * LS;                                                 \
            if (i < CB * ROWS) WF(b)[WADDR(W_R(i), W_CC(i))] = gw[q];                   \
        }                                                                               \
    } while (0)

#endif
