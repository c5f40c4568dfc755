// The index arithmetic of chapter 16's implicit GEMM for convolutions of any shape (conv_forward,
// conv_dgrad, conv_wgrad 16_igemm_nd): what an element of a GEMM operand is, for every shape the
// course accepts (1 to 4 spatial axes, groups, dilation, a stride per axis, a padding per side),
// gathered from the tensors as chapter 11's implicit GEMM gathers a 2-D layer's.
//
// Every convolution is seen as 4-D (one of lower rank has unit extents in front), and an int4
// holds one value per axis in the order A, D, H, W (.x = A, .y = D, .z = H, .w = W). A kernel
// tap is (q, t, r, s); tap index ((q*KD + t)*KH + r)*KW + s, as the weight (C, K/G, KA, KD, KH,
// KW) lies. Groups are the GEMM's batch: group g is its own product over its own channel slices
// (input channels g*C/G .., output channels g*K/G ..), dim 2 of the NDRange.
//
//   forward  y_g (K/G x N*OV)  = w_g (K/G x C/G*taps) . cols (C/G*taps x N*OV), gathered from x
//   dgrad    dx_g (C/G x N*V)  = w_g (C/G x K/G*taps) . cols (K/G*taps x N*V), gathered from dy'
//   wgrad    dw_g (K/G x C/G*taps) = dy'_g (K/G x N*OV) . cols (N*OV x C/G*taps), gathered from x
// (V, OV: the input's and output's spatial volumes.) The forward pass and the weight gradient
// read input position o*STRIDE - pad + tap*DIL for output position o, per axis, zero outside
// the input. The input gradient is split into phases (below).
//
// JIT parameters (helpers/launch/igemm_nd.py: jit, derived from the problem; the extents and the
// paddings are int arguments, ND_ARGS, so one build serves every layer with the same taps):
//   RANK              1-4: the spatial axes; those in front of it (unit extents) are left out of
//                     every bounds test and index
//   KA, KD, KH, KW    the kernel's extent per axis (1 in front of the rank)
//   SA, SD, SH, SW    the stride per axis (>= 1)
//   DA, DD, DH, DW    the dilation per axis (>= 1)
// and for the input gradient's phases, per axis X (helpers/launch/igemm_nd.py: geometry):
//   TSX = SX / gcd(SX, DX)    the step between the taps that reach one phase
//   NTX = ceil(KX / TSX)      the most taps of one phase
//   OSX = DX / gcd(SX, DX)    how far apart (in output positions) those taps read
#ifndef IGEMM_ND_H
#define IGEMM_ND_H

#include "course.h"

#ifndef RANK
#define RANK 2
#endif
#ifndef KA
#define KA 1
#endif
#ifndef KD
#define KD 1
#endif
#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef SA
#define SA 1
#endif
#ifndef SD
#define SD 1
#endif
#ifndef SH
#define SH 1
#endif
#ifndef SW
#define SW 1
#endif
#ifndef DA
#define DA 1
#endif
#ifndef DD
#define DD 1
#endif
#ifndef DH
#define DH 1
#endif
#ifndef DW
#define DW 1
#endif
#ifndef TSA
#define TSA SA
#endif
#ifndef TSD
#define TSD SD
#endif
#ifndef TSH
#define TSH SH
#endif
#ifndef TSW
#define TSW SW
#endif
#ifndef NTA
#define NTA CEIL_DIV(KA, TSA)
#endif
#ifndef NTD
#define NTD CEIL_DIV(KD, TSD)
#endif
#ifndef NTH
#define NTH CEIL_DIV(KH, TSH)
#endif
#ifndef NTW
#define NTW CEIL_DIV(KW, TSW)
#endif
#ifndef OSA
#define OSA DA
#endif
#ifndef OSD
#define OSD DD
#endif
#ifndef OSH
#define OSH DH
#endif
#ifndef OSW
#define OSW DW
#endif

#define TAPS (KA * KD * KH * KW)                  // taps of the kernel
#define STRIDE4 ((int4)(SA, SD, SH, SW))
#define DIL4 ((int4)(DA, DD, DH, DW))

// The extents every 16_igemm_nd kernel takes after its tensors: batch, channels, groups, the
// input's extent per axis, the output's (1 in front of the rank), and the padding before each
// axis (0 in front; the padding after is in the output extents).
#define ND_ARGS const int N, const int C, const int K, const int G,                            \
                const int A, const int D, const int H, const int W,                            \
                const int OA, const int OD, const int OH, const int OW,                        \
                const int PA, const int PD, const int PH, const int PW

// (q, t, r, s) of tap index i (divisions by constants)
inline int4 nd_tap(const int i) {
    return (int4)(i / (KD * KH * KW), (i / (KH * KW)) % KD, (i / KW) % KH, i % KW);
}

// The position (a, d, h, w) of flat index i in a volume of extents e, and back: ((a*D + d)*H + h)*W
// + w. Only the axes of the rank take part (in front of them every position is 0). nd_flat is
// linear, so an offset of a sum is the sum of the offsets, whatever their signs.
inline int4 nd_unflat(int i, const int4 e) {
    int4 p = (int4)(0);
    p.w = i % e.w;
#if RANK >= 2
    i /= e.w;
    p.z = i % e.z;
#endif
#if RANK >= 3
    i /= e.z;
    p.y = i % e.y;
#endif
#if RANK >= 4
    p.x = i / e.y;
#endif
    return p;
}

inline int nd_flat(const int4 p, const int4 e) {
    int o = 0;
#if RANK >= 4
    o = p.x;
#endif
#if RANK >= 3
    o = o * e.y + p.y;
#endif
#if RANK >= 2
    o = o * e.z + p.z;
#endif
    return o * e.w + p.w;
}

// p inside [0, e) on every axis of the rank (one unsigned comparison per axis)
inline bool nd_inside(const int4 p, const int4 e) {
    bool in = (uint)p.w < (uint)e.w;
#if RANK >= 2
    in = in && (uint)p.z < (uint)e.z;
#endif
#if RANK >= 3
    in = in && (uint)p.y < (uint)e.y;
#endif
#if RANK >= 4
    in = in && (uint)p.x < (uint)e.x;
#endif
    return in;
}

// ---- forward and weight gradient: which input position a tap reads --------------------------
// Output position o reads input o*STRIDE - pad + tap*DIL through a tap: the first term is the
// position's (nd_origin, decoded once per column or step), the second the tap's (nd_shift).
inline int4 nd_origin(const int4 o, const int4 pad) { return o * STRIDE4 - pad; }
inline int4 nd_shift(const int tap) { return nd_tap(tap) * DIL4; }

// ---- input gradient: the phases ---------------------------------------------------------------
// Input position h (one axis) receives from output position oh through tap r where
// oh*S + r*DIL - P = h, so (h + P - r*DIL) must be a multiple of the stride: at stride 2 three
// taps in four of a 3x3 kernel multiply zeros in a plain implicit GEMM (chapter 11's analytic
// stage), seven in eight of a 3x3x3 one. Chapter 11's answer, generalised: the input positions
// fall into phases by rho = (h + P) mod S, per axis, and phase rho receives only from the taps
// with r*DIL = rho (mod S): r = r0, r0 + TS, r0 + 2*TS, ... (TS = S / gcd(S, DIL); none when
// gcd(S, DIL) does not divide rho). Its positions are h = h0 + i*S (h0 = (rho - P) mod S), and
// tap r0 + j*TS of position h0 + i*S reads output position out0 + i - j*OS, out0 = (h0 + P -
// r0*DIL) / S (exact), OS = DIL / gcd(S, DIL): no division, no multiplied zero but the taps a
// phase has fewer than NT. One phase per axis at stride 1: the whole input, every tap.
typedef struct {
    int4 first;         // h0 per axis: the phase's first input position
    int4 count;         // its input positions per axis: h0, h0 + S, ... < the input's extent
    int4 tap0;          // r0 per axis: its first tap (the kernel's extent: none)
    int4 taps;          // its taps per axis, r0 + j*TS for j < taps (0: none reach it)
    int4 out0;          // the output position tap r0 reads from position h0
} nd_phase;

// One axis of phase rho: (h0, positions, r0, taps); out0 follows from them.
inline int4 nd_phase_axis(const int rho, const int in, const int k, const int s, const int p,
                          const int dil, const int ts) {
    const int first = ((rho - p) % s + s) % s;
    const int count = first < in ? (in - first + s - 1) / s : 0;
    int tap0 = k;
    for (int r = ts - 1; r >= 0; r--)
        if ((r * dil - rho) % s == 0) tap0 = r;
    return (int4)(first, count, tap0, tap0 < k ? (k - tap0 + ts - 1) / ts : 0);
}

// Phase ph (0 .. SA*SD*SH*SW - 1, W fastest) of an input of extents e padded by pad before.
inline nd_phase nd_phase_of(const int ph, const int4 e, const int4 pad) {
    const int4 a = nd_phase_axis(ph / (SD * SH * SW), e.x, KA, SA, pad.x, DA, TSA);
    const int4 d = nd_phase_axis((ph / (SH * SW)) % SD, e.y, KD, SD, pad.y, DD, TSD);
    const int4 h = nd_phase_axis((ph / SW) % SH, e.z, KH, SH, pad.z, DH, TSH);
    const int4 w = nd_phase_axis(ph % SW, e.w, KW, SW, pad.w, DW, TSW);
    nd_phase f;
    f.first = (int4)(a.x, d.x, h.x, w.x);
    f.count = (int4)(a.y, d.y, h.y, w.y);
    f.tap0 = (int4)(a.z, d.z, h.z, w.z);
    f.taps = (int4)(a.w, d.w, h.w, w.w);
    f.out0 = (f.first + pad - f.tap0 * DIL4) / STRIDE4;   // exact where the phase has taps
    return f;
}

#define PHASES (SA * SD * SH * SW)                 // phases of the input
#define PHASE_TAPS (NTA * NTD * NTH * NTW)         // a phase's taps at most (its reduction: K/G of each)

// (j_q, j_t, j_r, j_s) of a phase's tap index j < PHASE_TAPS (divisions by constants)
inline int4 nd_phase_tap(const int j) {
    return (int4)(j / (NTD * NTH * NTW), (j / (NTH * NTW)) % NTD, (j / NTW) % NTH, j % NTW);
}

// j's taps all exist in the phase (on the axes of the rank; in front of it, j = 0 and one tap)
inline bool nd_has_tap(const int4 j, const int4 taps) {
    bool in = j.w < taps.w;
#if RANK >= 2
    in = in && j.z < taps.z;
#endif
#if RANK >= 3
    in = in && j.y < taps.y;
#endif
#if RANK >= 4
    in = in && j.x < taps.x;
#endif
    return in;
}

// The weight's tap index of phase tap j: r = r0 + j*TS per axis
inline int nd_phase_weight_tap(const int4 j, const nd_phase* f) {
    const int4 r = f->tap0 + j * (int4)(TSA, TSD, TSH, TSW);
    return ((r.x * KD + r.y) * KH + r.z) * KW + r.w;
}

// The output position phase tap j reads from the phase's input position out0 + i (per axis)
inline int4 nd_phase_read(const int4 from, const int4 j) {
    return from - j * (int4)(OSA, OSD, OSH, OSW);
}

#endif
