// Device code shared by the direct input-gradient kernels (kernels/conv_dgrad/03_* and later).
#ifndef DGRAD_H
#define DGRAD_H

#include "course.h"

// The 9 weights of one (input channel, output channel) pair of a 3x3 kernel, fetched as one
// 8-wide load and one scalar and read back by index: s[r * 3 + col].
typedef union {
    float s[9];
    struct {
        float8 lo;   // weights 0..7: vload8
        float hi;    // weight 8: one scalar load
    } v;
} weights3x3;

// Fill a weights3x3 from the 9 consecutive floats at p. Reads exactly p[0] .. p[8]; vload8 only
// needs p to be float-aligned (4 bytes), which every element address of a float tensor is.
inline weights3x3 load_weights3x3(__global const float* p) {
    weights3x3 u;
    u.v.lo = vload8(0, p);
    u.v.hi = p[8];
    return u;
}

// Three consecutive values of the incoming gradient, dy[i .. i+2], each scaled by the
// activation's derivative (the 3-wide form of GRAD_IN in course.h). Reads only i .. i+2.
#if ACT == ACT_NONE
#define GRAD_IN3(dy, y, i) vload3(0, (dy) + (i))
#else
inline float3 act_derivative3(float3 a) {
    return (float3)(act_derivative(a.x), act_derivative(a.y), act_derivative(a.z));
}
#define GRAD_IN3(dy, y, i) (vload3(0, (dy) + (i)) * act_derivative3(vload3(0, (y) + (i))))
#endif

#endif
