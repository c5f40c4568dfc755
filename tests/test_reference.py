"""The NumPy references are right: finite differences, the adjoint identity, a plain-loop version."""
import numpy as np
import pytest

from helpers.ops import reference as ref

RNG = np.random.default_rng(42)


def random_layer(rng):
    n, c, k = (int(v) for v in rng.integers(1, 4, 3))
    kernel = int(rng.choice([1, 2, 3, 5]))
    stride = int(rng.integers(1, 4))
    pad = int(rng.integers(0, kernel))
    h, w = (int(v) for v in rng.integers(kernel, kernel + 7, 2))
    return n, c, h, w, k, kernel, stride, pad


def dgrad_loops(dy, weight, input_shape, stride, pad):
    """Independent implementation: scatter each output's gradient back along the forward reads."""
    n_, c_, h_, w_ = input_shape
    dx = np.zeros(input_shape)
    _, k_, kh, kw = weight.shape
    for n in range(n_):
        for k in range(k_):
            for oh in range(dy.shape[2]):
                for ow in range(dy.shape[3]):
                    for c in range(c_):
                        for r in range(kh):
                            for s in range(kw):
                                h, w = oh * stride + r - pad, ow * stride + s - pad
                                if 0 <= h < h_ and 0 <= w < w_:
                                    dx[n, c, h, w] += dy[n, k, oh, ow] * weight[c, k, r, s]
    return dx


@pytest.mark.parametrize("seed", range(6))
def test_dgrad_matches_plain_loops(seed):
    rng = np.random.default_rng(seed)
    n, c, h, w, k, kernel, stride, pad = random_layer(rng)
    oh, ow = ref.output_size(h, kernel, stride, pad), ref.output_size(w, kernel, stride, pad)
    dy = rng.standard_normal((n, k, oh, ow))
    wt = rng.standard_normal((c, k, kernel, kernel))
    np.testing.assert_allclose(ref.conv2d_dgrad(dy, wt, (n, c, h, w), stride, pad),
                               dgrad_loops(dy, wt, (n, c, h, w), stride, pad), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_adjoint_identity(seed):
    """<dY, conv(X)> = <conv_dgrad(dY), X>: the input gradient is the forward pass's adjoint."""
    rng = np.random.default_rng(100 + seed)
    n, c, h, w, k, kernel, stride, pad = random_layer(rng)
    x = rng.standard_normal((n, c, h, w))
    wt = rng.standard_normal((c, k, kernel, kernel))
    y = ref.conv2d_forward(x, wt, stride, pad)
    dy = rng.standard_normal(y.shape)
    lhs = np.sum(dy * y)
    rhs = np.sum(ref.conv2d_dgrad(dy, wt, x.shape, stride, pad) * x)
    assert lhs == pytest.approx(rhs, rel=1e-10)
    # and the weight gradient is the adjoint with respect to the weights
    assert lhs == pytest.approx(np.sum(ref.conv2d_wgrad(x, dy, wt.shape, stride, pad) * wt), rel=1e-10)


@pytest.mark.parametrize("act", ref.ACTIVATIONS)
def test_finite_differences(act):
    """Loss = sum(g * act(conv(x))); its numerical gradient w.r.t. x and w matches the references."""
    rng = np.random.default_rng(7)
    n, c, h, w, k, kernel, stride, pad = 2, 2, 6, 5, 3, 3, 2, 1
    x = rng.standard_normal((n, c, h, w))
    wt = rng.standard_normal((c, k, kernel, kernel))
    y = ref.activation(act, ref.conv2d_forward(x, wt, stride, pad))
    g = rng.standard_normal(y.shape)

    def loss(x_, w_):
        return np.sum(g * ref.activation(act, ref.conv2d_forward(x_, w_, stride, pad)))

    dx = ref.conv2d_dgrad(g, wt, x.shape, stride, pad, act, y)
    dw = ref.conv2d_wgrad(x, g, wt.shape, stride, pad, act, y)
    eps = 1e-6
    relu_mask = lambda: ref.conv2d_forward(x, wt, stride, pad) > 0
    checked = 0
    for arr, grad in ((x, dx), (wt, dw)):
        for idx in [tuple(int(rng.integers(0, s)) for s in arr.shape) for _ in range(12)]:
            old = arr[idx]
            arr[idx] = old + eps
            up, mask_up = loss(x, wt), relu_mask()
            arr[idx] = old - eps
            down, mask_down = loss(x, wt), relu_mask()
            arr[idx] = old
            if act == "relu" and not np.array_equal(mask_up, mask_down):
                continue  # the step crosses relu's kink, where the derivative is undefined
            assert (up - down) / (2 * eps) == pytest.approx(grad[idx], rel=1e-5, abs=1e-6)
            checked += 1
    assert checked >= 20  # crossing a kink with a 1e-6 step is rare: nearly every point is compared


def test_activation_derivatives_in_terms_of_output():
    pre = np.linspace(-3, 3, 61)
    for act in ref.ACTIVATIONS:
        eps = 1e-6
        numeric = (ref.activation(act, pre + eps) - ref.activation(act, pre - eps)) / (2 * eps)
        analytic = ref.activation_derivative(act, ref.activation(act, pre))
        mask = np.abs(pre) > 1e-3
        np.testing.assert_allclose(analytic[mask], numeric[mask], rtol=1e-6, atol=1e-8)
