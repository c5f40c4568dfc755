// Stage 09: prefetch and double buffering.
//
// What changed since 09_register_block: the copy of chunk i+1 overlaps the arithmetic of chunk i.
// Each work-item first issues its global loads of the next chunk into registers (gdy, gw: its
// share of the copy, a fixed number of floats known at build time), then computes the current
// chunk from local memory, then stores the registers into the other half of a double local
// buffer. One barrier per chunk instead of two: the half being written was last read before the
// previous barrier, the half being read was completed before it.
//
// Why: in 09_register_block a group waits at each chunk for its global loads (hundreds of cycles)
// with nothing to do; other groups on the compute unit can fill the gap only if enough of them
// fit (local memory and registers limit that). Here the loads are in flight while the group
// computes. The price: twice the local memory and NDY + NW more registers per work-item.
//
// Memory safety: as 09_local_tile; the staged loads use the same checks.
//
// Measured: notebooks/09_local_memory.ipynb (this device, and the GPU runs recorded in results/).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// Local: dyt[2][KC][PH][PW], wt[2][CB][KC][KH*KW] (two halves: the one computed on, the one filled).
// NDRange: dim 0 = tile (n, tile row, tile column) x LS work-items, dim 1 = block of CB channels.
// JIT parameters: as 09_register_block (host: helpers/launch/local.py checks them and the limits).

#include "dgrad_prefetch.h"          // the kernel: one text with the CUDA twin, 09_prefetch.cu
