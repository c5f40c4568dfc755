// SGD with momentum for every parameter of the network in one launch (helpers/train/course.py):
// the weights, batch norm's gamma and beta and the head live in one buffer, their gradients and
// velocities in two more of the same layout, so one elementwise pass updates them all. Before, the
// update ran in host NumPy after the gradients were read back (results/training_nvidia-h200.json:
// 7 reads per step). PyTorch's form (torch.optim.SGD, dampening 0): v = momentum * v + g, then
// p -= lr * v; a velocity of zero makes the first step's v = g, as PyTorch's first step does.
// One work-item per value; the padding between parameters (sub-buffer alignment) holds zeros and
// stays zero. Arguments: params, grads, velocity, count, lr, momentum.

#include "course.h"

KERNEL void sgd(GLOBAL float* p, GLOBAL const float* g, GLOBAL float* v, const int count, const float lr,
                const float momentum)
{
    const int i = GLOBAL_ID(0);
    if (i >= count) return;
    const float vi = momentum * v[i] + g[i];
    v[i] = vi;
    p[i] -= lr * vi;
}
