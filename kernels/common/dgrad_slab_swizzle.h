// The layouts of conv_dgrad/10_swizzle and its CUDA twin, for dgrad_slab_copy.h and
// dgrad_slab_kernel.h: the weight slab's float4s XOR-swizzled within each row of WROW = CB floats,
// copied 4 channels x 8 rows per warp, and with ROWCOPY=1 the dy copy walking whole stored rows.
// What they are and why: 10_swizzle.cl's header; chapter 10 shows them inlined. Included after
// dgrad_slab.h (its sizes PH, PW, PWQ, CB, ROWS).
#ifndef DGRAD_SLAB_SWIZZLE_H
#define DGRAD_SLAB_SWIZZLE_H

#ifndef ROWCOPY
#define ROWCOPY 0                    // 1: the dy copy walks whole stored rows (below)
#endif

// Element i of a chunk's dy copy is (depth, row, column) of the patch walked in rows of DYW
// floats; it is stored at float DY_AT(i) of a half, whose rows hold 4*PWQ floats.
#if ROWCOPY
#define DYW (4 * PWQ)                // whole stored rows, the pad columns included
#define DY_AT(i) (i)                 // so element i is float i
#else
#define DYW PW                       // the patch's own rows of PW floats
#define DY_AT(i) (((i) / (PH * PW) * PH + (i) / PW % PH) * 4 * PWQ + (i) % PW)
#endif

// Where weight (row R = depth*TAPS + tap, channel cc) lives in a half of the slab, in floats.
#define WROW CB
#define WADDR(R, cc) ((R) * WROW + ((((cc) / 4) ^ ((R) & (CB / 4 - 1))) * 4) + (cc) % 4)
// The copy's order: element i is channel 4*(i / (4*ROWS)) + i % 4 (4 channels of one float4),
// row i / 4 % ROWS: a warp stores 8 rows x 4 channels.
#define W_CC(i) ((i) / (4 * ROWS) * 4 + (i) % 4)
#define W_R(i) ((i) / 4 % ROWS)

#endif
