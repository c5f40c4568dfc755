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
# Convolutions of any shape: 1 to 4 spatial axes (x is (N, C, *size)), a stride and a dilation
# per axis, a (begin, end) padding per axis, groups. The weight is (C, K/groups, *kernel): input
# channel c belongs to group g = c // (C/groups), whose output channels are g*K/groups ..
# (g+1)*K/groups - 1. With one axis pair of each and groups = 1 these are the functions above.
# Up to 3-D each function sums over the kernel's taps directly; a 4-D convolution is computed by
# recursion over 3-D ones (below: _by_recursion), as a framework whose convolutions stop at 3-D
# computes it.

def per_axis(value, rank: int) -> tuple:
    """An int for every axis, or a tuple of one per axis."""
    return tuple(value) if isinstance(value, (tuple, list)) else (int(value),) * rank


def per_side(padding, rank: int) -> tuple:
    """((begin, end), ...) from an int, one int per axis, or a (begin, end) pair per axis."""
    return tuple(p if isinstance(p, (tuple, list)) else (p, p) for p in per_axis(padding, rank))


def output_sizes(size, kernel, stride, padding, dilation=1) -> tuple:
    """floor((size + begin + end - dilation*(kernel-1) - 1) / stride) + 1 on every axis."""
    rank = len(size)
    return tuple((n + b + e - d * (k - 1) - 1) // s + 1 for n, k, s, (b, e), d in
                 zip(size, kernel, per_axis(stride, rank), per_side(padding, rank), per_axis(dilation, rank)))


def _tap_window(t: np.ndarray, tap, out, stride, dilation) -> np.ndarray:
    """The view of a padded (..., *padded) tensor that kernel tap ``tap`` reads for every output
    position: on each axis, start dilation*tap, step stride, ``out`` values."""
    return t[(Ellipsis, *(slice(d * i, d * i + s * (o - 1) + 1, s) for i, o, s, d in zip(tap, out, stride, dilation)))]


def _channels_first(t: np.ndarray, groups: int) -> np.ndarray:
    """(N, C, ...) -> (G, C/G, N, ...), contiguous: each tap's product below is then one matrix
    product per group with the whole batch in its columns (BLAS at full width, not N*G small ones)."""
    moved = np.ascontiguousarray(np.moveaxis(t, 0, 1))
    return moved.reshape(groups, t.shape[1] // groups, *moved.shape[1:])


def _batch_first(t: np.ndarray) -> np.ndarray:
    """(G, C/G, N, ...) -> (N, C, ...)."""
    return np.moveaxis(t.reshape(-1, *t.shape[2:]), 1, 0)


def conv_forward_nd(x, weight, stride=1, padding=0, dilation=1, groups: int = 1) -> np.ndarray:
    """The convolution of any shape (no activation): (N, C, *size) x (C, K/groups, *kernel) -> (N, K, *out)."""
    x, weight = np.asarray(x, dtype=np.float64), np.asarray(weight, dtype=np.float64)
    rank = x.ndim - 2
    stride, dilation, pads = per_axis(stride, rank), per_axis(dilation, rank), per_side(padding, rank)
    if rank > 3:
        return _forward_by_recursion(x, weight, stride, pads, dilation, groups)
    kernel, kg, n = weight.shape[2:], weight.shape[1], x.shape[0]
    out = output_sizes(x.shape[2:], kernel, stride, pads, dilation)
    xp = _channels_first(np.pad(x, ((0, 0), (0, 0), *pads)), groups)       # (G, C/G, N, *padded)
    wg = weight.reshape(groups, -1, kg, *kernel)                            # (G, C/G, K/G, *kernel)
    y = np.zeros((groups, kg, n * int(np.prod(out))))
    for tap in np.ndindex(*kernel):
        window = _tap_window(xp, tap, out, stride, dilation).reshape(*xp.shape[:2], -1)   # (G, C/G, N*P)
        y += np.matmul(wg[(Ellipsis, *tap)].swapaxes(1, 2), window)          # per group: (K/G, C/G) @ (C/G, N*P)
    return _batch_first(y.reshape(groups, kg, n, *out))


def conv_dgrad_nd(grad_output, weight, input_shape, stride=1, padding=0, dilation=1, groups: int = 1,
                  activation: str = "none", output=None) -> np.ndarray:
    """The input gradient of conv_forward_nd: every tap sends dy' back to the inputs it read."""
    dy = np.asarray(grad_output, dtype=np.float64)
    if activation != "none":
        dy = dy * activation_derivative(activation, output)
    weight = np.asarray(weight, dtype=np.float64)
    rank = len(input_shape) - 2
    stride, dilation, pads = per_axis(stride, rank), per_axis(dilation, rank), per_side(padding, rank)
    if rank > 3:
        return _dgrad_by_recursion(dy, weight, tuple(input_shape), stride, pads, dilation, groups)
    kernel, kg, out = weight.shape[2:], weight.shape[1], dy.shape[2:]
    n, c = input_shape[:2]
    dxp = np.zeros((groups, c // groups, n, *(v + b + e for v, (b, e) in zip(input_shape[2:], pads))))
    wg = weight.reshape(groups, -1, kg, *kernel)                            # (G, C/G, K/G, *kernel)
    dyc = _channels_first(dy, groups).reshape(groups, kg, -1)               # (G, K/G, N*P)
    for tap in np.ndindex(*kernel):
        window = _tap_window(dxp, tap, out, stride, dilation)
        window += np.matmul(wg[(Ellipsis, *tap)], dyc).reshape(window.shape)   # per group: (C/G, K/G) @ (K/G, N*P)
    inside = tuple(slice(b, b + v) for v, (b, _) in zip(input_shape[2:], pads))
    return _batch_first(dxp[(Ellipsis, *inside)])


def conv_wgrad_nd(x, grad_output, weight_shape, stride=1, padding=0, dilation=1, groups: int = 1,
                  activation: str = "none", output=None) -> np.ndarray:
    """The weight gradient of conv_forward_nd, (C, K/groups, *kernel): each tap's window of x
    against dy', within each group."""
    dy = np.asarray(grad_output, dtype=np.float64)
    if activation != "none":
        dy = dy * activation_derivative(activation, output)
    x = np.asarray(x, dtype=np.float64)
    rank = x.ndim - 2
    stride, dilation, pads = per_axis(stride, rank), per_axis(dilation, rank), per_side(padding, rank)
    if rank > 3:
        return _wgrad_by_recursion(x, dy, tuple(weight_shape), stride, pads, dilation, groups)
    kernel, out = tuple(weight_shape[2:]), dy.shape[2:]
    xp = _channels_first(np.pad(x, ((0, 0), (0, 0), *pads)), groups)       # (G, C/G, N, *padded)
    # (G, N*P, K/G) laid out as such: OpenBLAS takes a transposed view of it at a twentieth of the speed
    dyt = np.ascontiguousarray(_channels_first(dy, groups).reshape(groups, weight_shape[1], -1).swapaxes(1, 2))
    dw = np.zeros((*xp.shape[:2], weight_shape[1], *kernel))
    for tap in np.ndindex(*kernel):
        window = _tap_window(xp, tap, out, stride, dilation).reshape(*xp.shape[:2], -1)   # (G, C/G, N*P)
        dw[(Ellipsis, *tap)] = np.matmul(window, dyt)                       # per group: (C/G, N*P) @ (N*P, K/G)
    return dw.reshape(weight_shape)


# A convolution of rank R > 3 as a sum of convolutions of rank R - 1. Output slice oa of the
# first axis reads input slice oa*stride + q*dilation - padding through tap q of that axis, so
# for each tap q the slices oa = 0 .. OA-1 it reads (a strided window of the padded first axis)
# are moved into the batch, (N, C, OA, ...) -> (N*OA, C, ...), and convolved by the rank R - 1
# convolution with the weight's slice w[:, :, q]; the sum over q is the convolution. The input
# gradient sends each tap's (R - 1)-D gradient back into its window of the first axis; the weight
# gradient of tap q is the (R - 1)-D weight gradient of its window against dy.

def first_axis_windows(kernel: int, out: int, stride: int, dilation: int) -> list:
    """(q, the slice of the padded first axis that tap q reads for outputs 0 .. out-1)."""
    return [(q, slice(dilation * q, dilation * q + stride * (out - 1) + 1, stride)) for q in range(kernel)]


def into_batch(t: np.ndarray) -> np.ndarray:
    """(N, C, A, ...) -> (N*A, C, ...): the first spatial axis moved into the batch (a NumPy array or
    a torch tensor: helpers/ops/vendor_nd.py recurses the same way)."""
    return t.swapaxes(1, 2).reshape(t.shape[0] * t.shape[2], t.shape[1], *t.shape[3:])


def _out_of_batch(t: np.ndarray, n: int) -> np.ndarray:
    """(N*A, C, ...) -> (N, C, A, ...)."""
    return t.reshape(n, -1, *t.shape[1:]).swapaxes(1, 2)


def _pad_first_axis(t: np.ndarray, pair) -> np.ndarray:
    return np.pad(t, ((0, 0), (0, 0), tuple(pair)) + ((0, 0),) * (t.ndim - 3))


def _forward_by_recursion(x, weight, stride, pads, dilation, groups):
    xp = _pad_first_axis(x, pads[0])
    out = (xp.shape[2] - dilation[0] * (weight.shape[2] - 1) - 1) // stride[0] + 1
    rest = (stride[1:], pads[1:], dilation[1:], groups)
    return sum(_out_of_batch(conv_forward_nd(into_batch(xp[:, :, window]), weight[:, :, q], *rest), x.shape[0])
               for q, window in first_axis_windows(weight.shape[2], out, stride[0], dilation[0]))


def _dgrad_by_recursion(dy, weight, input_shape, stride, pads, dilation, groups):
    (n, c, a), (b, e) = input_shape[:3], pads[0]
    dxp = np.zeros((n, c, a + b + e, *input_shape[3:]))
    batch = (n * dy.shape[2], c, *input_shape[3:])
    for q, window in first_axis_windows(weight.shape[2], dy.shape[2], stride[0], dilation[0]):
        dxp[:, :, window] += _out_of_batch(conv_dgrad_nd(into_batch(dy), weight[:, :, q], batch, stride[1:],
                                                         pads[1:], dilation[1:], groups), n)
    return dxp[:, :, b:b + a]


def _wgrad_by_recursion(x, dy, weight_shape, stride, pads, dilation, groups):
    xp, dyb = _pad_first_axis(x, pads[0]), into_batch(dy)
    dw = np.zeros(weight_shape)
    for q, window in first_axis_windows(weight_shape[2], dy.shape[2], stride[0], dilation[0]):
        dw[:, :, q] = conv_wgrad_nd(into_batch(xp[:, :, window]), dyb, weight_shape[:2] + weight_shape[3:],
                                    stride[1:], pads[1:], dilation[1:], groups)
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
