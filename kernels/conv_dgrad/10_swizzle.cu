// CUDA twin of 10_swizzle.cl, for NVIDIA's profiler (ncu counts its shared-memory bank
// conflicts): the same layouts, stated here as there, and the same copy (dgrad_slab_copy.h) and
// kernel (dgrad_slab_kernel.h), whose one text course.h's macros spell in CUDA here
// (__shared__, threadIdx/blockIdx, __syncthreads). Launch: grid (dim 0 / LS, dim 1) blocks of
// LS threads (the OpenCL NDRange divided by the work-group). What it computes and why, and the
// switch ROWCOPY: 10_swizzle.cl.

#include "dgrad_slab.h"

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

#include "dgrad_slab_copy.h"

#include "dgrad_slab_kernel.h"
