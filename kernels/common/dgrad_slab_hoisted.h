// The copy of conv_dgrad/10_hoisted and its CUDA twin, for the kernel of dgrad_slab_kernel.h: what
// dgrad_slab_copy.h's FETCH and STORE compute again for every chunk (each copied element's
// position in dy or w, its bounds checks, its local address) is the same in every chunk but for
// the chunk's first output channel k0, so COPY_ONCE computes it once before the chunk loop and
// FETCH and STORE only add k0. It reads the stage's layouts (DYW, DY_AT, WADDR, W_CC, W_R) and
// dgrad_slab.h's sizes; JIT parameters: those of dgrad_slab.h.
#ifndef DGRAD_SLAB_HOISTED_H
#define DGRAD_SLAB_HOISTED_H

// Each copied element once, before the chunk loop: its offset at k0 = 0, its limit on k0, its
// local address.
#define COPY_ONCE                                                                                      \
    int doff[NDY], dlim[NDY], dat[NDY], woff[NW], wlim[NW], wat[NW];                                   \
    _Pragma("unroll") for (int q = 0; q < NDY; q++) {                                                  \
        const int i = lid + q * LS;                                                                    \
        const int kk = i / (PH * DYW), py = i / DYW % PH, px = i % DYW, oh = oh0 + py, ow = ow0 + px;  \
        const bool inside = i < KC * PH * DYW && oh >= 0 && oh < OH && ow >= 0 && ow < OW;             \
        doff[q] = ((n * K + kk) * OH + oh) * OW + ow;                                                  \
        dlim[q] = inside ? K - kk : 0;                                                                 \
        dat[q] = DY_AT(i);                                                                             \
    }                                                                                                  \
    _Pragma("unroll") for (int q = 0; q < NW; q++) {                                                   \
        const int i = lid + q * LS, cc = W_CC(i), R = W_R(i);                                          \
        const bool inside = i < CB * ROWS && cb0 + cc < C;                                             \
        woff[q] = (cb0 + cc) * K * TAPS + R;                                                           \
        wlim[q] = inside ? K - R / TAPS : 0;                                                           \
        wat[q] = WADDR(R, cc);                                                                         \
    }

// Per chunk: an element is read if k0 is below its limit (set once, COPY_ONCE), at its offset + k0
// channels; it is stored at its local address.
#define FETCH(k0) do {                                                                  \
        _Pragma("unroll") for (int q = 0; q < NDY; q++)                                 \
            gdy[q] = (k0) < dlim[q] ? GRAD_IN(dy, y, doff[q] + (k0) * OH * OW) : 0.0f;  \
        _Pragma("unroll") for (int q = 0; q < NW; q++)                                  \
            gw[q] = (k0) < wlim[q] ? w[woff[q] + (k0) * TAPS] : 0.0f;                   \
    } while (0)
#define STORE(b) do {                                                                   \
        _Pragma("unroll") for (int q = 0; q < NDY; q++)                                 \
            if (lid + q * LS < KC * PH * DYW) DYF(b)[dat[q]] = gdy[q];                  \
        _Pragma("unroll") for (int q = 0; q < NW; q++)                                  \
            if (lid + q * LS < CB * ROWS) WF(b)[wat[q]] = gw[q];                        \
    } while (0)

#endif
