// CUDA twin of 09_prefetch.cl, for NVIDIA's profiler (ncu counts its shared-memory bank
// conflicts): the same kernel, dgrad_prefetch.h, whose one text course.h's macros spell in CUDA
// here (__shared__, threadIdx/blockIdx, __syncthreads). Launch: grid (dim 0 / LS, dim 1) blocks of
// LS threads (the OpenCL NDRange divided by the work-group). What it computes and why:
// 09_prefetch.cl.

#include "dgrad_prefetch.h"
