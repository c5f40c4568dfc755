// Stage 10: the padded slab, the copy's index arithmetic done once.
//
// What changed since 10_padded: where each work-item's copy elements come from and go to. Per
// chunk 10_padded decomposed every element's index again (depth, row and column of the dy patch;
// channel and row of the weight slab: divisions by constants), tested it against the tensor's
// bounds and built its global and local addresses, though an element differs from one chunk to
// the next only by the chunk's first output channel k0. Here each element's offset at k0 = 0,
// its local address and a limit on k0 are computed once, before the chunk loop; a chunk adds
// k0 * OH * OW (dy) or k0 * KH * KW (w) to the offset and compares k0 with the limit (K - the
// element's depth, or 0 for an element outside the tensor: never read).
//
// Why: Nsight Compute on 10_padded's CUDA twin (chapter 10; results/local/ncu_limits_*) finds the
// issue slots busy 71 % of the cycles and 23 % of the issued instructions not multiply-adds: per
// warp and chunk 346 of them beside 1,152 multiply-adds, of which only 72 read local memory. At
// the same tile this stage issues 292. It keeps 3 integers per copied element live across the
// loop; ncu reports 127 registers per work-item against 10_padded's 128 at that tile.
//
// Memory safety: as 10_transposed; an element's offset may lie outside dy or w, but then its
// limit is 0 and it is never read (k0 >= 0).
//
// Measured: notebooks/10_bank_conflicts.ipynb (this device, and the GPU runs recorded in results/).
//
// Layouts: as 10_padded.
// NDRange and JIT parameters: as 10_transposed.

#include "dgrad_slab.h"

#include "dgrad_slab_padded.h"

#include "dgrad_slab_hoisted.h"

#include "dgrad_slab_kernel.h"
