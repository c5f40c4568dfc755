// The CUDA files' name for course.h (kernels/*/*.cu, tc.cuh): its CUDA branch spells the words the
// two languages spell differently, and its activations (act_derivative, act_forward, GRAD_IN) are
// the ones every CUDA kernel applies, in one text with the OpenCL kernels'.
#ifndef COURSE_CUH
#define COURSE_CUH

#include "course.h"

#endif
