// Device code shared by every kernel of the course. Included with -I kernels/common.
#ifndef COURSE_H
#define COURSE_H

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
inline float act_derivative(float y) {
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
#if ACT == ACT_NONE
#define GRAD_IN(dy, y, i) ((dy)[i])
#else
#define GRAD_IN(dy, y, i) ((dy)[i] * act_derivative((y)[i]))
#endif

#endif
