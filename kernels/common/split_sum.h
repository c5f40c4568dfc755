// The second kernel of a split-K stage that keeps each run's sums apart: out[i] is the sum of
// the SPLITS slices partials[j * count + i], added in slice order (the same result on every run,
// where atomic adds would make the order, and the last bits, vary). Neighbouring work-items read
// neighbouring words: coalesced. NDRange: count padded to the work-group.
#ifndef SPLIT_SUM_H
#define SPLIT_SUM_H

__kernel void split_sum(__global const float* restrict partials, __global float* restrict out,
                        const int count) {
    const int i = get_global_id(0);
    if (i >= count) return;
    float sum = 0.0f;
    for (int j = 0; j < SPLITS; j++) sum += partials[j * count + i];
    out[i] = sum;
}

#endif
