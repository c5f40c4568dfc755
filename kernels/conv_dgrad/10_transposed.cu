// CUDA twin of 10_transposed.cl, for NVIDIA's profiler (ncu counts its shared-memory bank
// conflicts): the same layouts (dgrad_slab_transposed.h) and the same copy (dgrad_slab_copy.h) and
// kernel (dgrad_slab_kernel.h), whose one text course.h's macros spell in CUDA here
// (__shared__, threadIdx/blockIdx, __syncthreads). Launch: grid (dim 0 / LS, dim 1) blocks of
// LS threads (the OpenCL NDRange divided by the work-group). What it computes and why: 10_transposed.cl.

#include "dgrad_slab.h"

#include "dgrad_slab_transposed.h"

#include "dgrad_slab_copy.h"

#include "dgrad_slab_kernel.h"
