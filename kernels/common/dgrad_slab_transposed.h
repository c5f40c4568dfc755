// The layouts of conv_dgrad/10_transposed and its CUDA twin, for dgrad_slab_copy.h and
// dgrad_slab_kernel.h: the dy patch in rows of PW floats stored in rows of 4*PWQ, and the weight
// slab transposed ([depth*tap][channel], rows of WROW = CB floats), copied in w's order. What they
// are and why: 10_transposed.cl's header; chapter 10 shows them inlined. Included after
// dgrad_slab.h (its sizes PH, PW, PWQ, CB, ROWS).
#ifndef DGRAD_SLAB_TRANSPOSED_H
#define DGRAD_SLAB_TRANSPOSED_H

// Element i of a chunk's dy copy is (depth, row, column) of the patch walked in rows of DYW
// floats; it is stored at float DY_AT(i) of a half, whose rows hold 4*PWQ floats.
#define DYW PW                       // the patch's own rows of PW floats
#define DY_AT(i) (((i) / (PH * PW) * PH + (i) / PW % PH) * 4 * PWQ + (i) % PW)

// Where weight (row R = depth*TAPS + tap, channel cc) lives in a half of the slab, in floats.
#define WROW CB
#define WADDR(R, cc) ((R) * WROW + (cc))
// The copy's order: element i of a chunk's weights is channel i / ROWS, row i % ROWS (w's order).
#define W_CC(i) ((i) / ROWS)
#define W_R(i) ((i) % ROWS)

#endif
