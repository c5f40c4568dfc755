"""scikit-learn's digits: 1797 images of 8x8 pixels (0-16), shipped inside the wheel, so nothing
is downloaded. Upsampled (nearest neighbour) so that the convolutions have work to do."""
from __future__ import annotations

import numpy as np


def digits(scale: int = 2, test_fraction: float = 0.25, seed: int = 0):
    """(x_train, y_train, x_test, y_test): float32 images (N, 1, 8*scale, 8*scale) scaled to
    [0, 1], int64 labels; a fixed, shuffled split."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    x = np.repeat(np.repeat(x, scale, axis=2), scale, axis=3)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def batches(n: int, batch: int, epoch: int, seed: int = 0):
    """Index arrays of the full batches of one epoch, shuffled by (seed, epoch); the last partial
    batch is dropped so every step has the same shapes (the plans are built once)."""
    order = np.random.default_rng([seed, epoch]).permutation(n)
    return [order[i:i + batch] for i in range(0, n - batch + 1, batch)]
