// Stage 03 in CUDA: memoized bounds, the twin of 03_memoized_bounds.cl.
//
// The same kernel, dgrad_memoized.h, whose one text course.h's macros spell in CUDA here: each
// thread evaluates the padding and stride checks once, into a KH x KW table of booleans, and the k
// loop only looks the table up. The loops over r and s have compile-time bounds (KH, KW are -D
// parameters), so `#pragma unroll` turns the table into registers in both languages. Indices and
// launch as in 02_naive.cu: grid (ceil(H*W / WG), C, N) blocks of (WG, 1, 1) threads, so a
// thread's c and n are its block's (course.h: GLOBAL_ID_1D). What it computes and why:
// 03_memoized_bounds.cl.

#include "dgrad_memoized.h"
