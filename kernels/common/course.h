// Device code shared by every kernel of the course, OpenCL C and CUDA alike. Included with
// -I kernels/common. The few words the two languages spell differently are macros here; kernels
// that differ on purpose (vector types, local memory, launch bounds) use their own language.
#ifndef COURSE_H
#define COURSE_H

#ifdef __CUDACC__                          // CUDA (NVRTC defines __CUDACC__)
#define KERNEL extern "C" __global__       // unmangled, so the host finds it by name
#define GLOBAL                             // one address space for pointers
#define DEVICE_FN __device__ inline
#define GLOBAL_ID(d) ((int)((d) == 0 ? blockIdx.x * blockDim.x + threadIdx.x \
                          : (d) == 1 ? blockIdx.y * blockDim.y + threadIdx.y \
                                     : blockIdx.z * blockDim.z + threadIdx.z))
// A work-item's index along dimension d of a launch whose work-groups are (WG, 1, 1): beyond
// dimension 0 a group holds one work-item, so CUDA reads the block's index alone (conv_dgrad/03).
#define GLOBAL_ID_1D(d) ((d) == 0 ? blockIdx.x * blockDim.x + threadIdx.x : (d) == 1 ? blockIdx.y : blockIdx.z)
// For a kernel whose one text serves both languages (conv_dgrad/10_*: dgrad_slab.h):
#define KERNEL_LS(n) extern "C" __global__ __launch_bounds__(n)   // a kernel of work-groups of n
#define RESTRICT __restrict__
#define LOCAL_MEM __shared__               // a local-memory array's declaration
#define LOCAL_PTR                          // a pointer into local memory
#define LOCAL_ID(d) ((d) == 0 ? threadIdx.x : (d) == 1 ? threadIdx.y : threadIdx.z)
#define GROUP_ID(d) ((d) == 0 ? blockIdx.x : (d) == 1 ? blockIdx.y : blockIdx.z)
#define BARRIER() __syncthreads()
#else                                      // OpenCL C
#define KERNEL __kernel
#define GLOBAL __global
#define DEVICE_FN inline
#define GLOBAL_ID(d) ((int)get_global_id(d))
#define GLOBAL_ID_1D(d) get_global_id(d)
#define KERNEL_LS(n) __kernel __attribute__((reqd_work_group_size(n, 1, 1)))
#define RESTRICT restrict
#define LOCAL_MEM __local
#define LOCAL_PTR __local
#define LOCAL_ID(d) get_local_id(d)
#define GROUP_ID(d) get_group_id(d)
#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#endif

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

// Activations, selected at build time with -DACT=<code> (helpers/ops/conv_dgrad.py: ACT_CODES).
#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_SIGMOID 2
#define ACT_TANH 3
#ifndef ACT
#define ACT ACT_NONE
#endif

// Derivative of the activation, written in terms of its output y = act(pre-activation):
// relu' = (y > 0), sigmoid' = y (1 - y), tanh' = 1 - y^2.
DEVICE_FN float act_derivative(float y) {
#if ACT == ACT_NONE
    return 1.0f;
#elif ACT == ACT_RELU
    return y > 0.0f ? 1.0f : 0.0f;
#elif ACT == ACT_SIGMOID
    return y * (1.0f - y);
#elif ACT == ACT_TANH
    return 1.0f - y * y;
#else
#error "unknown ACT"
#endif
}

// The gradient that enters the convolution: dy scaled by the activation's derivative.
// With ACT_NONE the compiler drops the read of y entirely.
// The activation itself, of a pre-activation z: the forward pass's epilogue (conv_forward with an
// activation: y = act(convolution + bias)).
DEVICE_FN float act_forward(float z) {
#if ACT == ACT_NONE
    return z;
#elif ACT == ACT_RELU
    return fmax(z, 0.0f);
#elif ACT == ACT_SIGMOID
    return 1.0f / (1.0f + exp(-z));
#elif ACT == ACT_TANH
    return tanh(z);
#endif
}

#if ACT == ACT_NONE
#define GRAD_IN(dy, y, i) ((dy)[i])
#else
#define GRAD_IN(dy, y, i) ((dy)[i] * act_derivative((y)[i]))
#endif

#endif
