// The second kernel of the split weight-gradient stages (conv_wgrad 02 and 03): each weight's
// SPLITS slice sums, added in slice order (a fixed order: the same result on every run, where
// atomic adds into dw would make the order, and the last bits, vary from run to run).
// partials (SPLITS, C*K*KH*KW): slice j's sums in IOHW order; dw IOHW (C,K,KH,KW).
// NDRange: C*K*KH*KW padded to the work-group. Include after defining KH and KW.
#ifndef WGRAD_SUM_H
#define WGRAD_SUM_H

__kernel void wgrad_sum(__global const float* restrict partials, __global float* restrict dw,
                        const int C, const int K, const int SPLITS) {
    const int i = get_global_id(0), weights = C * K * KH * KW;
    if (i >= weights) return;
    float grad = 0.0f;
    for (int j = 0; j < SPLITS; j++) grad += partials[j * weights + i];   // neighbours: coalesced
    dw[i] = grad;
}

#endif
