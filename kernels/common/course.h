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
#else                                      // OpenCL C
#define KERNEL __kernel
#define GLOBAL __global
#define DEVICE_FN inline
#define GLOBAL_ID(d) ((int)get_global_id(d))
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
