// The sizes of chapter 10's stages (conv_dgrad/10_transposed, 10_padded, 10_swizzle, 10_hoisted and
// their CUDA twins): the tile, its work-items, the dy patch and the weight slab that a chunk of KC
// output channels copies into local memory. A stage includes this first, then states its layouts
// (the dy patch's: DYW, DY_AT(i); the weight slab's: WROW, WADDR(R, cc), and the copy's order
// W_CC(i), W_R(i)), then its copy (dgrad_slab_copy.h, or 10_hoisted's own), then the kernel
// (dgrad_slab_kernel.h). What each stage changes, why, and the layouts: the stage files' headers;
// chapter 10 shows their diffs with these headers inlined.
// JIT parameters: KH, KW (default 3), TX, TY, XPW, CPW, CB, KC (constraints: 10_transposed.cl).
#ifndef DGRAD_SLAB_H
#define DGRAD_SLAB_H

#include "course.h"

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#define TAPS (KH * KW)
#define PH (TY + KH - 1)             // rows of dy the tile needs
#define PW (TX + KW - 1)             // columns of dy the tile needs
#define PWQ ((PW + 3) / 4)           // float4s per stored row of the patch
#define TXG (TX / XPW)               // work-items along a tile row
#define CG (CB / CPW)                // work-items along the channels
#define NUQ ((XPW + KW + 2) / 4)     // float4s one row of a work-item's window spans
#define LS (TXG * TY * CG)           // work-items per group
#define ROWS (KC * TAPS)             // rows of the weight slab: (depth, tap)
#define NDY ((KC * PH * DYW + LS - 1) / LS)     // dy floats each work-item copies per chunk
#define NW ((CB * ROWS + LS - 1) / LS)          // weights each work-item copies per chunk

// The halves seen as floats (for the copy's scalar stores and the weights' addresses).
#define DYF(b) ((LOCAL_PTR float*)dyt[b])
#define WF(b) ((LOCAL_PTR float*)wt[b])

#endif
