// The phases of a strided input gradient (kernels/conv_dgrad/11_igemm_phases.cl explains them),
// shared by the phase-split implicit-GEMM stages. Needs KH, KW, STRIDE.
#ifndef DGRAD_PHASES_H
#define DGRAD_PHASES_H

#include "course.h"

// The filter rows of phase row ph (r = ph, ph + STRIDE, ...) and the columns of phase column pw.
#define PHASE_ROWS(ph) max(0, CEIL_DIV(KH - (ph), STRIDE))
#define PHASE_COLS(pw) max(0, CEIL_DIV(KW - (pw), STRIDE))

// One phase of the problem: its taps and where its positions start.
typedef struct {
    int ph, pw;       // phase: (h + PAD) % STRIDE, (w + PAD) % STRIDE
    int rp, sp, taps; // taps r = ph + STRIDE*j (j < rp), s = pw + STRIDE*l (l < sp); taps = rp*sp
    int h0, w0;       // first input row / column of the phase
    int hp, wp;       // its number of rows / columns
    int bh, bw;       // dy row of (i = 0, j = 0): oh = bh + i - j
} phase_t;

inline phase_t make_phase(const int phase, const int H, const int W, const int PAD) {
    phase_t q;
    q.ph = phase / STRIDE;
    q.pw = phase % STRIDE;
    q.rp = STRIDE == 1 ? KH : PHASE_ROWS(q.ph);                      // constants when STRIDE == 1
    q.sp = STRIDE == 1 ? KW : PHASE_COLS(q.pw);
    q.taps = q.rp * q.sp;
    q.h0 = ((q.ph - PAD) % STRIDE + STRIDE) % STRIDE;
    q.w0 = ((q.pw - PAD) % STRIDE + STRIDE) % STRIDE;
    q.hp = max(0, CEIL_DIV(H - q.h0, STRIDE));
    q.wp = max(0, CEIL_DIV(W - q.w0, STRIDE));
    q.bh = (q.h0 + PAD - q.ph) / STRIDE;                              // exact, >= 0
    q.bw = (q.w0 + PAD - q.pw) / STRIDE;
    return q;
}

// Taps of the largest phase (phase 0): the reduction of phase p is K * taps <= K * MAX_TAPS.
#define MAX_TAPS (CEIL_DIV(KH, STRIDE) * CEIL_DIV(KW, STRIDE))

// A work-item's WM x WN results of phase q's tile (m0, n0) written to dx from its registers: column
// n is position n % PHW of image n / PHW, row (h0 + STRIDE*(pos / wp), w0 + STRIDE*(pos % wp)) of
// the input; row a of the tile is channel m0 + GEMM_ROW(a). A macro, expanded where gemm_core.h
// has defined GEMM_ROW and GEMM_COL.
#define PHASE_STORE(dx, acc, q, m0, n0, NP, PHW, C, HW, W)                                        \
    for (int b = 0; b < WN; b++) {                                                             \
        const int n = (n0) + GEMM_COL(b);                                                      \
        if (n >= (NP)) continue;                                                               \
        const int pos = n % (PHW);                                                             \
        const int out = (n / (PHW)) * (C) * (HW) + ((q).h0 + STRIDE * (pos / (q).wp)) * (W)    \
                        + (q).w0 + STRIDE * (pos % (q).wp);                                    \
        for (int a = 0; a < WM; a++) {                                                         \
            const int c = (m0) + GEMM_ROW(a);                                                  \
            if (c < (C)) (dx)[out + c * (HW)] = (acc)[a][b];                                   \
        }                                                                                      \
    }

#endif
