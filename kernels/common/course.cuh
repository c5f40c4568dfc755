// Device code shared by the course's CUDA twins (kernels/*/*.cu): course.h's activations for
// CUDA. A twin runs the same algorithm with the same layouts as its OpenCL stage, so that
// NVIDIA's profiler (which cannot see OpenCL kernels) can measure it.
#ifndef COURSE_CUH
#define COURSE_CUH

#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_SIGMOID 2
#define ACT_TANH 3
#ifndef ACT
#define ACT ACT_NONE
#endif

__device__ __forceinline__ float act_derivative(float y) {
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

// The activation itself, of a pre-activation z: the forward pass's epilogue (conv_forward with an
// activation: y = act(convolution + bias)).
__device__ __forceinline__ float act_forward(float z) {
#if ACT == ACT_NONE
    return z;
#elif ACT == ACT_RELU
    return fmaxf(z, 0.0f);
#elif ACT == ACT_SIGMOID
    return 1.0f / (1.0f + expf(-z));
#elif ACT == ACT_TANH
    return tanhf(z);
#endif
}

#if ACT == ACT_NONE
#define GRAD_IN(dy, y, i) ((dy)[i])
#else
#define GRAD_IN(dy, y, i) ((dy)[i] * act_derivative((y)[i]))
#endif

#endif
