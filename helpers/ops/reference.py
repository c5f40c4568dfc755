"""Plain NumPy references: the ground truth of every test. Written to be read, not to be fast.

Conventions of the course (those of the source article):
- tensors are NCHW; a layer's weights are IOHW: ``weight[c, k, r, s]`` connects input channel
  ``c`` to output channel ``k`` at kernel offset ``(r, s)``;
- the forward convolution is ``y[n,k,oh,ow] = sum_{c,r,s} x[n,c,oh*stride+r-pad, ow*stride+s-pad]
  * weight[c,k,r,s]`` (zero outside the input), then an activation ``out = act(y)``;
- every activation derivative is written in terms of the activation's *output*, which is what a
  training framework keeps from the forward pass.

All functions compute in float64 and return float64.
"""
from __future__ import annotations

import numpy as np

ACTIVATIONS = ("none", "relu", "sigmoid", "tanh")


def output_size(size: int, kernel: int, stride: int, padding: int) -> int:
    """Spatial size of a convolution's output: floor((size + 2*pad - kernel) / stride) + 1."""
    return (size + 2 * padding - kernel) // stride + 1


def activation(name: str, y: np.ndarray) -> np.ndarray:
    """act(y) for the course's activations."""
    y = np.asarray(y, dtype=np.float64)
    if name == "none":
        return y
    if name == "relu":
        return np.maximum(y, 0.0)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-y))
    if name == "tanh":
        return np.tanh(y)
    raise ValueError(f"unknown activation {name!r}; expected one of {ACTIVATIONS}")


def activation_derivative(name: str, out: np.ndarray) -> np.ndarray:
    """d act / d y, written in terms of ``out = act(y)``."""
    out = np.asarray(out, dtype=np.float64)
    if name == "none":
        return np.ones_like(out)
    if name == "relu":
        return (out > 0).astype(np.float64)
    if name == "sigmoid":
        return out * (1.0 - out)
    if name == "tanh":
        return 1.0 - out * out
    raise ValueError(f"unknown activation {name!r}; expected one of {ACTIVATIONS}")


def _window(t: np.ndarray, r: int, s: int, oh: int, ow: int, stride: int) -> np.ndarray:
    """The strided slice of a padded tensor that kernel offset (r, s) touches: [..., oh, ow]."""
    return t[:, :, r:r + stride * (oh - 1) + 1:stride, s:s + stride * (ow - 1) + 1:stride]


def conv2d_forward(x: np.ndarray, weight: np.ndarray, stride: int = 1, padding: int = 0) -> np.ndarray:
    """The convolution itself (no activation): (N,C,H,W) x (C,K,R,S) -> (N,K,OH,OW)."""
    x = np.asarray(x, dtype=np.float64)
    weight = np.asarray(weight, dtype=np.float64)
    n, c, h, w = x.shape
    _, k, kh, kw = weight.shape
    oh, ow = output_size(h, kh, stride, padding), output_size(w, kw, stride, padding)
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    y = np.zeros((n, k, oh, ow))
    for r in range(kh):
        for s in range(kw):
            # every output position reads input (oh*stride + r, ow*stride + s) of the padded input
            y += np.einsum("nchw,ck->nkhw", _window(xp, r, s, oh, ow, stride), weight[:, :, r, s], optimize=True)
    return y


def conv2d_dgrad(grad_output: np.ndarray, weight: np.ndarray, input_shape, stride: int = 1,
                 padding: int = 0, activation: str = "none", output: np.ndarray | None = None) -> np.ndarray:
    """Gradient of the loss with respect to the layer's input.

    ``grad_output`` is the gradient with respect to the layer's output *after* its activation;
    it is first scaled by the activation's derivative (computed from ``output``). Each output
    position then sends its gradient back along every weight to the input it came from: the
    exact reverse of :func:`conv2d_forward`'s reads.
    """
    dy = np.asarray(grad_output, dtype=np.float64)
    if activation != "none":
        dy = dy * activation_derivative(activation, output)
    weight = np.asarray(weight, dtype=np.float64)
    n, c, h, w = input_shape
    _, _, kh, kw = weight.shape
    oh, ow = dy.shape[2], dy.shape[3]
    dxp = np.zeros((n, c, h + 2 * padding, w + 2 * padding))
    for r in range(kh):
        for s in range(kw):
            _window(dxp, r, s, oh, ow, stride)[...] += np.einsum("nkhw,ck->nchw", dy, weight[:, :, r, s], optimize=True)
    return dxp[:, :, padding:padding + h, padding:padding + w]


def conv2d_wgrad(x: np.ndarray, grad_output: np.ndarray, weight_shape, stride: int = 1, padding: int = 0,
                 activation: str = "none", output: np.ndarray | None = None) -> np.ndarray:
    """Gradient of the loss with respect to the weights (C,K,R,S): also a convolution."""
    dy = np.asarray(grad_output, dtype=np.float64)
    if activation != "none":
        dy = dy * activation_derivative(activation, output)
    x = np.asarray(x, dtype=np.float64)
    _, _, kh, kw = weight_shape
    oh, ow = dy.shape[2], dy.shape[3]
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    dw = np.zeros(weight_shape)
    for r in range(kh):
        for s in range(kw):
            dw[:, :, r, s] = np.einsum("nchw,nkhw->ck", _window(xp, r, s, oh, ow, stride), dy, optimize=True)
    return dw


# ---------------------------------------------------------------------------------------------
# Batch normalization (chapter 14): per channel c, over the N*H*W values x[:, c, :, :].

def batchnorm_stats(x: np.ndarray, eps: float):
    """Per-channel mean and inv_std = 1/sqrt(var + eps), with the biased variance (divide by N*H*W)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=(0, 2, 3))
    var = ((x - mean[None, :, None, None]) ** 2).mean(axis=(0, 2, 3))   # two passes: exact enough
    return mean, 1.0 / np.sqrt(var + eps), var


def batchnorm_forward(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5,
                      training: bool = True, running_mean=None, running_var=None, momentum=None):
    """Batch normalization of an NCHW tensor.

    Training: y = gamma * (x - mean) * inv_std + beta with the batch's own statistics; returns
    (y, mean, inv_std), and with ``momentum`` also the updated running statistics
    (1 - momentum) * running + momentum * batch, where the running variance takes the unbiased
    variance var * M / (M - 1), M = N*H*W (PyTorch's convention).
    Inference: the same formula with ``running_mean`` and ``running_var``; returns y.
    """
    x = np.asarray(x, dtype=np.float64)
    g = np.asarray(gamma, dtype=np.float64)[None, :, None, None]
    b = np.asarray(beta, dtype=np.float64)[None, :, None, None]
    if not training:
        rm = np.asarray(running_mean, dtype=np.float64)
        inv = 1.0 / np.sqrt(np.asarray(running_var, dtype=np.float64) + eps)
        return g * (x - rm[None, :, None, None]) * inv[None, :, None, None] + b
    mean, inv_std, var = batchnorm_stats(x, eps)
    y = g * (x - mean[None, :, None, None]) * inv_std[None, :, None, None] + b
    if momentum is None:
        return y, mean, inv_std
    m = x.shape[0] * x.shape[2] * x.shape[3]
    new_mean = (1 - momentum) * np.asarray(running_mean, np.float64) + momentum * mean
    new_var = (1 - momentum) * np.asarray(running_var, np.float64) + momentum * var * m / (m - 1)
    return y, mean, inv_std, new_mean, new_var


def batchnorm_backward(grad_output: np.ndarray, x: np.ndarray, gamma: np.ndarray, mean: np.ndarray,
                       inv_std: np.ndarray, activation: str = "none", output: np.ndarray | None = None):
    """Gradients of a training-mode batch norm (optionally followed by an activation).

    ``grad_output`` is the gradient after the activation; it is first scaled by the activation's
    derivative computed from ``output`` (the post-activation forward output). With g that
    gradient, x_hat = (x - mean) * inv_std and M = N*H*W, per channel:
        grad_beta  = sum g
        grad_gamma = sum g * x_hat
        grad_input = gamma * inv_std / M * (M * g - grad_beta - x_hat * grad_gamma)
    (the last line is the chain rule through mean and variance, which both depend on x).
    """
    g = np.asarray(grad_output, dtype=np.float64)
    if activation != "none":
        g = g * activation_derivative(activation, output)
    x = np.asarray(x, dtype=np.float64)
    m = x.shape[0] * x.shape[2] * x.shape[3]
    c4 = lambda v: np.asarray(v, dtype=np.float64)[None, :, None, None]
    xhat = (x - c4(mean)) * c4(inv_std)
    grad_beta = g.sum(axis=(0, 2, 3))
    grad_gamma = (g * xhat).sum(axis=(0, 2, 3))
    grad_input = c4(gamma) * c4(inv_std) / m * (m * g - c4(grad_beta) - xhat * c4(grad_gamma))
    return grad_input, grad_gamma, grad_beta
