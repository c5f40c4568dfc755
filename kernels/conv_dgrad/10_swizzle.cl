// Stage 10: the transposed weight slab, XOR-swizzled.
//
// What changed since 10_padded: no padding. The slab's rows hold CB floats again, but within a
// row the float4 holding channels 4u .. 4u+3 is stored at float4 position u XOR (R mod CB/4) (R:
// the row). The reads apply the same XOR: a work-item's CPW weights are still whole float4s. And
// the copy's order changes so that a warp's 32 stores cover 4 channels x 8 rows: lanes 4m .. 4m+3
// take the 4 channels of one float4, rows m = 0..7 (the global reads: 8 consecutive floats of w
// for each of 4 channels, 32 bytes: one sector or two, by alignment). In row R those 4 channels
// land in float4 u XOR (R mod 8); 8 consecutive rows put them in 8 different float4s: 32
// different banks, one pass.
//
// Why: padding can only move a whole row; with float4 reads it can move it by 4 banks at least,
// which leaves 4 stores per bank. Swizzling moves pieces of a row, so the same 32 banks can be
// handed out one per store. It is how fast GEMM and convolution kernels store tiles that are
// read along the other direction ("crosswise" layouts). It costs no local memory; it needs CB/4
// to be a power of two (the XOR must stay inside the row).
//
// ROWCOPY=1 (a switch, default 0): the dy copy walks whole stored rows. The patch's rows hold PW
// floats (34 at TX = 32) but are stored in rows of 4*PWQ (36); with ROWCOPY=0 a warp whose 32
// elements cross a row end jumps 2 floats, so 2 of its stores share banks: a second pass. With
// ROWCOPY=1 element i runs over the stored rows, pad columns included, so it is float i of the
// half: a warp stores 32 consecutive floats, one pass. The pad columns receive the dy values to
// the right of the patch, or zeros outside dy: never used by the sums; each row's global read
// stays one run of 4*PWQ floats (at TX = 32, 3x3, padding 1 and dy rows a multiple of 8 floats,
// the 2 extra floats lie in a 32-byte sector the row reads anyway). It copies 36/34 of the
// floats, and at some tiles one more float per work-item (NDY).
//
// Memory safety: as 10_transposed (u XOR m < CB/4 for m < CB/4 with CB/4 a power of two); with
// ROWCOPY=1 the pad columns' global reads pass the same bounds checks as every dy read.
//
// Measured: notebooks/10_bank_conflicts.ipynb (this device, and the GPU runs recorded in results/).
//
// Layouts: as 10_transposed (WROW = CB), float4 u of row R at u ^ (R & (CB/4 - 1)).
// NDRange and JIT parameters: as 10_transposed, and CB/4 a power of two; ROWCOPY 0 or 1.

#include "dgrad_slab.h"

#include "dgrad_slab_swizzle.h"

#include "dgrad_slab_copy.h"

#include "dgrad_slab_kernel.h"
