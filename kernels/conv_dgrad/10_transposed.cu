// CUDA twin of 10_transposed.cl, for NVIDIA's profiler (ncu counts its shared-memory bank
// conflicts): the same layouts, stated here as there, and the same copy (dgrad_slab_copy.h) and
// kernel (dgrad_slab_kernel.h), whose one text course.h's macros spell in CUDA here
// (__shared__, threadIdx/blockIdx, __syncthreads). Launch: grid (dim 0 / LS, dim 1) blocks of
// LS threads (the OpenCL NDRange divided by the work-group). What it computes and why: 10_transposed.cl.

#include "dgrad_slab.h"

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

#include "dgrad_slab_copy.h"

#include "dgrad_slab_kernel.h"
