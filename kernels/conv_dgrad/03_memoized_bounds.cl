// Stage 03: memoized bounds checks.
//
// What changed since stage 02: the padding and stride checks no longer run inside the loop over
// output channels. Whether weight (r, s) meets an output position depends only on where the
// work-item sits (h, x), never on the output channel k. So each work-item evaluates the checks
// once, before the k loop, into a small table valid[KH][KW], and the k loop only looks entries
// up. The naive kernel repeated the same checks for every k: K times as many.
//
// Why the output-channel loop is not yet innermost (which would also evaluate each check once):
// both tensors the loop reads are laid out spatially. Weights are IOHW, so the KH*KW weights of
// one (c, k) pair are adjacent in memory; dy is NCHW, so neighbouring ow are adjacent. Keeping
// (r, s) innermost keeps the reads of one k together, which stages 04 and 05 turn into vector
// loads. Stage 06 moves k inside, 16 channels at a time.
//
// The table is a private array with sizes known at build time; the loops that index it are fully
// unrolled, so the compiler can keep it in registers instead of private (stack) memory.
//
// Measured: the ladder in notebooks/03_memoized_bounds.ipynb
// (this device, and the GPU runs recorded in results/).
//
// Layouts: dy, y (N,K,OH,OW); w IOHW (C,K,KH,KW); dx (N,C,H,W), all row-major.
// NDRange: dim 0 = h*W + w (padded to WG), dim 1 = c, dim 2 = n (as stage 02).
// JIT parameters: KH, KW (kernel size, >= 1), STRIDE (>= 1), ACT (activation), WG (host side:
// work-group size, a multiple of the device's SIMD width works best).

#include "dgrad.h"

#include "dgrad_memoized.h"        // the kernel: one text with the CUDA twin, 03_memoized_bounds.cu
