// Stage 10: the weight slab transposed, 16-byte reads from local memory.
//
// What changed since 09_prefetch: the inner loop reads local memory 16 bytes at a time. A
// work-item's CPW weights of one tap are CPW different channels; in 09's slab (w's own order,
// [channel][depth][tap]) they lie KC*KH*KW floats apart, so each is its own 4-byte read. Here the
// slab is stored transposed, [depth*tap][channel], so the CPW weights are adjacent: CPW/4 float4
// reads. The rows of the dy patch are padded to whole float4s (PWQ of them) and a work-item's
// XPW + KW - 1 columns arrive as float4s too. Per (depth, tap row) 09 issued XPW + KW - 1 +
// KW*CPW reads (22 at XPW = 8, CPW = 4); here ceil((XPW+KW-1)/4) + KW*CPW/4 (6).
//
// The copy is still 09's: consecutive work-items take consecutive weights of w (coalesced global
// reads, one channel's KC*KH*KW floats after another). But now they store them down a column of
// the transposed slab: addresses CB floats apart. With CB = 32 every one of those stores lands in
// the same bank of local memory (32 banks of 4 bytes): a warp's store is replayed up to 32 times.
// Chapter 10 measures those conflicts and removes them (10_padded, 10_swizzle).
//
// Memory safety: as 09_local_tile. The float4 row reads may read up to 3 padding columns past a
// row's PW columns (never used); the slab's columns are whole float4s (CB % 4 == 0).
//
// Measured: notebooks/10_bank_conflicts.ipynb (this device, and the GPU runs recorded in results/).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// Local: dyt[2][KC][PH][PWQ] float4s; wt[2][KC*KH*KW][WROW] floats, WROW = CB, read as float4s.
// NDRange: dim 0 = tile (n, tile row, tile column) x LS work-items, dim 1 = block of CB channels.
// JIT parameters: as 09_prefetch, and XPW % 4 == 0, CPW % 4 == 0 (float4 reads)
// (host: helpers/launch/local.py checks them and the limits).

#include "dgrad_slab.h"

#include "dgrad_slab_transposed.h"

#include "dgrad_slab_copy.h"

#include "dgrad_slab_kernel.h"
