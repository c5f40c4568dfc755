"""Pictures of what kernels read: drawn with matplotlib from the same index arithmetic the
kernels use, so a picture can be tested by calling the function that computes it.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from ..ops.reference import output_size


def touched_outputs(h: int, w: int, size: int, kernel: int, stride: int, padding: int) -> list[tuple]:
    """Output positions (oh, ow) whose forward window contains input (h, w), with the weight
    offset (r, s) that connects them: the terms of the input gradient at (h, w)."""
    out = output_size(size, kernel, stride, padding)
    found = []
    for oh in range(out):
        for ow in range(out):
            r, s = h + padding - oh * stride, w + padding - ow * stride
            if 0 <= r < kernel and 0 <= s < kernel:
                found.append((oh, ow, r, s))
    return found


def _grid(ax, n, origin, cell, color="white", label=None):
    x0, y0 = origin
    for i in range(n):
        for j in range(n):
            ax.add_patch(Rectangle((x0 + j * cell, y0 - (i + 1) * cell), cell, cell, fc=color, ec="0.6", lw=0.6))
    if label:
        ax.text(x0 + n * cell / 2, y0 + 0.3, label, ha="center", va="bottom", fontsize=9)


def draw_touch_map(h: int, w: int, size: int = 7, kernel: int = 3, stride: int = 1, padding: int = 1, ax=None):
    """Left: the padded input with input (h, w) marked. Right: the output gradient, with the
    outputs that input (h, w) influenced in the forward pass, each labelled with the weight
    offset (r, s) it used. The input gradient at (h, w) sums exactly these terms."""
    out = output_size(size, kernel, stride, padding)
    terms = touched_outputs(h, w, size, kernel, stride, padding)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 4.2))
    cell = 1.0
    padded = size + 2 * padding
    _grid(ax, padded, (0, padded), cell, "0.92", f"input {size}x{size} with padding {padding} (grey)")
    for i in range(size):
        for j in range(size):
            ax.add_patch(Rectangle(((j + padding) * cell, padded - (i + padding + 1) * cell), cell, cell,
                                   fc="white", ec="0.6", lw=0.6))
    ax.add_patch(Rectangle(((w + padding) * cell, padded - (h + padding + 1) * cell), cell, cell, fc="tab:red", alpha=0.8))
    x_out = padded + 2
    _grid(ax, out, (x_out, padded), cell, "white", f"output gradient {out}x{out} (stride {stride})")
    for oh, ow, r, s in terms:
        ax.add_patch(Rectangle((x_out + ow * cell, padded - (oh + 1) * cell), cell, cell, fc="tab:blue", alpha=0.5))
        ax.text(x_out + (ow + 0.5) * cell, padded - (oh + 0.5) * cell, f"{r},{s}", ha="center", va="center", fontsize=7)
    ax.set_xlim(-0.5, x_out + out + 0.5)
    ax.set_ylim(-0.5, padded + 1.5)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"input ({h},{w}) receives {len(terms)} gradient terms (labels: weight offset r,s)", fontsize=10)
    return terms


def draw_naive_reads(c: int, h: int, w: int, C: int = 4, K: int = 6, size: int = 6, kernel: int = 3,
                     stride: int = 1, padding: int = 1, ax=None):
    """What one naive work-item (c, h, w) reads: for every output channel k, the few dy values
    around it (top), and the kernel-size block of weights w[c, k, :, :] (bottom), both drawn as
    the flat memory they live in. Returns the flat indices read, in loop order."""
    out = output_size(size, kernel, stride, padding)
    terms = touched_outputs(h, w, size, kernel, stride, padding)
    dy_idx = [(k * out + oh) * out + ow for k in range(K) for oh, ow, _, _ in terms]
    w_idx = [((c * K + k) * kernel + r) * kernel + s for k in range(K) for _, _, r, s in terms]
    if ax is None:
        _, ax = plt.subplots(2, 1, figsize=(10, 2.6))
    for a, n, idx, name in ((ax[0], K * out * out, dy_idx, "grad_output (one image, K x OH x OW)"),
                            (ax[1], C * K * kernel * kernel, w_idx, "weights (IOHW: C x K x R x S)")):
        mem = np.zeros(n)
        mem[idx] = 1
        a.imshow(mem[None, :], aspect="auto", cmap="Blues", vmin=0, vmax=1.3, interpolation="nearest")
        a.set_yticks([])
        a.set_title(f"{name}: {len(set(idx))} of {n} floats read", fontsize=9)
    ax[1].set_xlabel("flat memory index (float32)")
    plt.tight_layout()
    return dy_idx, w_idx
