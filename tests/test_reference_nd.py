"""The float64 references of convolutions of any shape (helpers/ops/reference.py: conv_*_nd) are
right: against plain loops written from the definition, the 2-D references, the adjoint identity,
finite differences and PyTorch (1-D to 3-D; CI installs it, and there its absence fails).

Every shape below mixes what chapter 16 adds: 1 to 4 spatial axes, groups (depthwise among them),
dilation, a stride per axis and a padding per side. The 4-D references are computed by recursion
over the 3-D ones; the loops take every axis alike.
"""
import itertools
import os

import numpy as np
import pytest

from helpers.ops import reference as ref

# (x shape, weight shape (C, K/groups, *kernel), stride, padding per side, dilation, groups)
SHAPES = [
    ((2, 4, 11), (4, 3, 3), (2,), ((1, 2),), (2,), 2),
    ((1, 3, 9), (3, 2, 2), (3,), ((1, 0),), (3,), 3),                                   # depthwise x2
    ((2, 6, 7, 9), (6, 2, 3, 3), (1, 2), ((1, 0), (2, 1)), (1, 2), 2),
    ((1, 5, 6, 5), (5, 1, 3, 2), (2, 1), ((0, 2), (1, 0)), (1, 1), 5),                  # depthwise
    ((1, 2, 4, 5, 6), (2, 3, 3, 2, 3), (1, 2, 1), ((1, 1), (0, 1), (2, 0)), (1, 1, 2), 1),
    ((2, 6, 3, 4, 5), (6, 1, 2, 3, 1), (2, 1, 3), ((1, 0), (0, 2), (0, 0)), (2, 1, 1), 3),
    # padding past the kernel's reach: outputs that see only padding (PyTorch accepts it)
    ((2, 4, 5, 6), (4, 3, 3, 3), (1, 1), ((4, 4), (4, 4)), (1, 1), 1),
    ((1, 2, 5, 5), (2, 3, 2, 2), (1, 2), ((3, 3), (1, 1)), (2, 2), 1),
    ((2, 3, 6), (3, 2, 2), (1,), ((3, 4),), (1,), 1),
]
SHAPES_4D = [
    ((2, 4, 3, 4, 5, 3), (4, 1, 2, 3, 2, 2), (2, 1, 2, 1), ((1, 0), (0, 1), (1, 1), (0, 0)), (1, 2, 1, 1), 4),  # depthwise
    ((1, 6, 5, 3, 4, 4), (6, 2, 3, 3, 1, 3), (1, 1, 2, 1), ((1, 1), (1, 1), (0, 0), (1, 2)), (2, 1, 1, 1), 2),
    ((1, 2, 4, 3, 3, 3), (2, 3, 3, 3, 3, 3), (3, 1, 1, 1), ((2, 1), (1, 1), (1, 1), (1, 1)), (1, 1, 1, 1), 1),
]
ALL = SHAPES + SHAPES_4D


def ids(shape):
    return f"{len(shape[0]) - 2}d_g{shape[5]}_s{shape[2]}_d{shape[4]}"


def forward_loops(x, w, stride, pads, dilation, groups):
    """Independent implementation: every output element summed from its definition."""
    n_, c_ = x.shape[:2]
    kg, kernel = w.shape[1], w.shape[2:]
    cg, k_ = c_ // groups, kg * groups
    out = ref.output_sizes(x.shape[2:], kernel, stride, pads, dilation)
    y = np.zeros((n_, k_, *out))
    for n, k, o in itertools.product(range(n_), range(k_), np.ndindex(*out)):
        g = k // kg
        for c, tap in itertools.product(range(g * cg, (g + 1) * cg), np.ndindex(*kernel)):
            pos = tuple(oi * s + t * d - b for oi, s, t, d, (b, _) in zip(o, stride, tap, dilation, pads))
            if all(0 <= p < e for p, e in zip(pos, x.shape[2:])):
                y[(n, k, *o)] += x[(n, c, *pos)] * w[(c, k % kg, *tap)]
    return y


def dgrad_loops(dy, w, input_shape, stride, pads, dilation, groups):
    """Independent implementation: each output's gradient sent back along its forward reads."""
    dx = np.zeros(input_shape)
    kg, kernel, cg = w.shape[1], w.shape[2:], input_shape[1] // groups
    for n, k, o in itertools.product(range(dy.shape[0]), range(dy.shape[1]), np.ndindex(*dy.shape[2:])):
        g = k // kg
        for c, tap in itertools.product(range(g * cg, (g + 1) * cg), np.ndindex(*kernel)):
            pos = tuple(oi * s + t * d - b for oi, s, t, d, (b, _) in zip(o, stride, tap, dilation, pads))
            if all(0 <= p < e for p, e in zip(pos, input_shape[2:])):
                dx[(n, c, *pos)] += dy[(n, k, *o)] * w[(c, k % kg, *tap)]
    return dx


def wgrad_loops(x, dy, weight_shape, stride, pads, dilation, groups):
    """Independent implementation: each weight's products over every output position."""
    dw = np.zeros(weight_shape)
    kg, cg = weight_shape[1], x.shape[1] // groups
    for c, kl, tap in itertools.product(range(weight_shape[0]), range(kg), np.ndindex(*weight_shape[2:])):
        k = (c // cg) * kg + kl
        for n, o in itertools.product(range(x.shape[0]), np.ndindex(*dy.shape[2:])):
            pos = tuple(oi * s + t * d - b for oi, s, t, d, (b, _) in zip(o, stride, tap, dilation, pads))
            if all(0 <= p < e for p, e in zip(pos, x.shape[2:])):
                dw[(c, kl, *tap)] += x[(n, c, *pos)] * dy[(n, k, *o)]
    return dw


def tensors(shape, seed):
    xs, ws, stride, pads, dilation, groups = shape
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    out = ref.output_sizes(xs[2:], ws[2:], stride, pads, dilation)
    dy = rng.standard_normal((xs[0], ws[1] * groups, *out))
    return x, w, dy, (stride, pads, dilation, groups)


@pytest.mark.parametrize("shape", ALL, ids=ids)
def test_the_three_references_match_plain_loops(shape):
    x, w, dy, geometry = tensors(shape, 1)
    np.testing.assert_allclose(ref.conv_forward_nd(x, w, *geometry), forward_loops(x, w, *geometry), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ref.conv_dgrad_nd(dy, w, x.shape, *geometry), dgrad_loops(dy, w, x.shape, *geometry),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ref.conv_wgrad_nd(x, dy, w.shape, *geometry), wgrad_loops(x, dy, w.shape, *geometry),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", ALL, ids=ids)
def test_adjoint_identity(shape):
    """<conv(x, w), dy> = <x, dgrad(dy, w)> = <w, wgrad(x, dy)>."""
    x, w, dy, geometry = tensors(shape, 2)
    lhs = np.sum(ref.conv_forward_nd(x, w, *geometry) * dy)
    assert lhs == pytest.approx(np.sum(x * ref.conv_dgrad_nd(dy, w, x.shape, *geometry)), rel=1e-10)
    assert lhs == pytest.approx(np.sum(w * ref.conv_wgrad_nd(x, dy, w.shape, *geometry)), rel=1e-10)


@pytest.mark.parametrize("shape, act", list(zip(ALL, ("tanh", "sigmoid", "relu", "tanh", "sigmoid", "none", "relu",
                                                      "tanh", "sigmoid"))),
                         ids=lambda v: v if isinstance(v, str) else ids(v))
def test_finite_differences(shape, act):
    """Loss = sum(g * act(conv(x, w))): its numerical gradient matches dgrad and wgrad with the
    activation's derivative taken from the output."""
    x, w, g, geometry = tensors(shape, 3)
    y = ref.activation(act, ref.conv_forward_nd(x, w, *geometry))
    dx = ref.conv_dgrad_nd(g, w, x.shape, *geometry, act, y)
    dw = ref.conv_wgrad_nd(x, g, w.shape, *geometry, act, y)
    rng, eps, checked = np.random.default_rng(4), 1e-6, 0
    for arr, grad in ((x, dx), (w, dw)):
        for idx in [tuple(int(rng.integers(0, s)) for s in arr.shape) for _ in range(10)]:
            old, values = arr[idx], []
            for step in (eps, -eps):
                arr[idx] = old + step
                pre = ref.conv_forward_nd(x, w, *geometry)
                values.append((np.sum(g * ref.activation(act, pre)), pre > 0))
            arr[idx] = old
            if act == "relu" and not np.array_equal(values[0][1], values[1][1]):
                continue                # the step crosses relu's kink
            assert (values[0][0] - values[1][0]) / (2 * eps) == pytest.approx(grad[idx], rel=1e-5, abs=1e-6)
            checked += 1
    assert checked >= 16


@pytest.mark.parametrize("seed", range(4))
def test_plain_shapes_match_the_2d_references(seed):
    """One stride, one padding, no groups or dilation: the functions chapters 01-15 use."""
    rng = np.random.default_rng(seed)
    kernel, stride = int(rng.choice([1, 2, 3, 5])), int(rng.integers(1, 4))
    pad = int(rng.integers(0, kernel))
    x = rng.standard_normal((2, 3, kernel + 4, kernel + 2))
    w = rng.standard_normal((3, 4, kernel, kernel))
    y = ref.conv2d_forward(x, w, stride, pad)
    dy = rng.standard_normal(y.shape)
    np.testing.assert_allclose(ref.conv_forward_nd(x, w, stride, pad), y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ref.conv_dgrad_nd(dy, w, x.shape, stride, pad),
                               ref.conv2d_dgrad(dy, w, x.shape, stride, pad), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ref.conv_wgrad_nd(x, dy, w.shape, stride, pad),
                               ref.conv2d_wgrad(x, dy, w.shape, stride, pad), rtol=1e-12, atol=1e-12)


def test_a_fault_in_the_references_is_caught_by_the_loops(monkeypatch):
    """The loops can fail: the reference with its dilation dropped on the last axis of its
    windows (a fault only a dilated shape shows) differs from them."""
    x, w, dy, geometry = tensors(SHAPES[4], 5)
    window = ref._tap_window
    monkeypatch.setattr(ref, "_tap_window", lambda t, tap, out, stride, dilation:
                        window(t, tap, out, stride, (*dilation[:-1], 1)))
    assert not np.allclose(ref.conv_forward_nd(x, w, *geometry), forward_loops(x, w, *geometry))


@pytest.mark.parametrize("op", ("forward", "dgrad", "wgrad"))
def test_a_fault_in_the_4d_recursion_is_caught_by_the_loops(monkeypatch, op):
    """The 4-D checks can fail: the recursion's windows of the fourth axis taken without its
    dilation (the shape dilated along it) differ from the loops in each of the three references."""
    x, w, dy, geometry = tensors(SHAPES_4D[1], 7)
    windows = ref.first_axis_windows
    monkeypatch.setattr(ref, "first_axis_windows", lambda kernel, out, stride, dilation: windows(kernel, out, stride, 1))
    got, loops = {"forward": (lambda: ref.conv_forward_nd(x, w, *geometry), lambda: forward_loops(x, w, *geometry)),
                  "dgrad": (lambda: ref.conv_dgrad_nd(dy, w, x.shape, *geometry),
                            lambda: dgrad_loops(dy, w, x.shape, *geometry)),
                  "wgrad": (lambda: ref.conv_wgrad_nd(x, dy, w.shape, *geometry),
                            lambda: wgrad_loops(x, dy, w.shape, *geometry))}[op]
    assert not np.allclose(got(), loops())


# ---- PyTorch: CI installs it; elsewhere its absence is a skip with the reason ----------------------

def require_torch():
    if os.environ.get("COURSE_CI") == "1":
        try:
            import torch
        except ImportError:
            pytest.fail("COURSE_CI=1 but PyTorch is not installed: pip install torch (the CPU build)")
        return torch
    return pytest.importorskip("torch")


@pytest.mark.parametrize("shape", SHAPES, ids=ids)
def test_the_references_match_pytorch(shape):
    torch = require_torch()
    F = torch.nn.functional
    x, w, dy, (stride, pads, dilation, groups) = tensors(shape, 6)
    rank = x.ndim - 2
    cg, kg = w.shape[0] // groups, w.shape[1]
    # ours (C, K/G, *kernel) -> PyTorch's (K, C/G, *kernel)
    w_t = w.reshape(groups, cg, kg, *w.shape[2:]).swapaxes(1, 2).reshape(groups * kg, cg, *w.shape[2:])
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w_t, requires_grad=True)
    padded = F.pad(xt, [p for pair in reversed(pads) for p in pair])     # PyTorch pads the last axis first
    conv = (F.conv1d, F.conv2d, F.conv3d)[rank - 1]
    y = conv(padded, wt, stride=stride, dilation=dilation, groups=groups)
    y.backward(torch.tensor(dy))
    geometry = (stride, pads, dilation, groups)
    np.testing.assert_allclose(ref.conv_forward_nd(x, w, *geometry), y.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ref.conv_dgrad_nd(dy, w, x.shape, *geometry), xt.grad.numpy(), rtol=1e-10, atol=1e-10)
    dw = wt.grad.numpy().reshape(groups, kg, cg, *w.shape[2:]).swapaxes(1, 2).reshape(w.shape)
    np.testing.assert_allclose(ref.conv_wgrad_nd(x, dy, w.shape, *geometry), dw, rtol=1e-10, atol=1e-10)
