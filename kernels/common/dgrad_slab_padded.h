// The layouts of conv_dgrad/10_padded and 10_hoisted and their CUDA twins, for dgrad_slab_copy.h or
// dgrad_slab_hoisted.h and dgrad_slab_kernel.h: 10_transposed's, with rows of the weight slab
// padded to WROW = CB + 4 floats. What they are and why: 10_padded.cl's header; chapter 10 shows
// them inlined. Included after dgrad_slab.h (its sizes PH, PW, PWQ, CB, ROWS).
#ifndef DGRAD_SLAB_PADDED_H
#define DGRAD_SLAB_PADDED_H

// Element i of a chunk's dy copy is (depth, row, column) of the patch walked in rows of DYW
// floats; it is stored at float DY_AT(i) of a half, whose rows hold 4*PWQ floats.
#define DYW PW                       // the patch's own rows of PW floats
#define DY_AT(i) (((i) / (PH * PW) * PH + (i) / PW % PH) * 4 * PWQ + (i) % PW)

// Where weight (row R = depth*TAPS + tap, channel cc) lives in a half of the slab, in floats.
#define WROW (CB + 4)                // 4 floats of padding per row: rows start 4 banks apart
#define WADDR(R, cc) ((R) * WROW + (cc))
// The copy's order: element i of a chunk's weights is channel i / ROWS, row i % ROWS (w's order).
#define W_CC(i) ((i) / ROWS)
#define W_R(i) ((i) % ROWS)

#endif
