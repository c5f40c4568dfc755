"""PyTorch's convolutions of any shape as the benchmark times them (helpers/ops/vendor_nd.py)
compute the right thing: run here on the CPU in float64, against the float64 references, for
1-D to 3-D (PyTorch's own convolution and backward) and 4-D (the recursion over conv3d that the
vendor row of a 4-D layer times). CI installs PyTorch; elsewhere its absence is a skip."""
import numpy as np
import pytest

from helpers.ops import reference as ref
from helpers.ops import vendor_nd

from test_reference_nd import require_torch, tensors

# (x shape, weight shape, stride, padding per side (both sides alike: PyTorch's), dilation, groups)
CASES = [
    ((2, 4, 11), (4, 1, 5), (2,), ((2, 2),), (1,), 4),
    ((2, 6, 9, 8), (6, 2, 3, 3), (1, 2), ((2, 2), (1, 1)), (2, 1), 3),
    ((1, 4, 5, 6, 7), (4, 3, 3, 3, 3), (2, 1, 1), ((1, 1), (1, 1), (0, 0)), (1, 1, 2), 1),
    ((2, 4, 5, 4, 5, 3), (4, 1, 3, 3, 2, 3), (2, 1, 2, 1), ((1, 1), (1, 1), (0, 0), (1, 1)), (1, 1, 1, 1), 4),
    ((1, 6, 6, 3, 4, 4), (6, 2, 3, 3, 1, 3), (1, 1, 2, 1), ((2, 2), (1, 1), (0, 0), (1, 1)), (2, 1, 1, 1), 2),
    ((1, 2, 7, 3, 3, 3), (2, 3, 3, 3, 3, 3), (3, 1, 1, 1), ((1, 1), (1, 1), (1, 1), (1, 1)), (1, 1, 1, 1), 1),
]


def ids(case):
    return f"{len(case[0]) - 2}d_g{case[5]}_s{case[2]}_d{case[4]}"


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_the_vendor_computes_the_three_references(case):
    torch = require_torch()
    x, w, dy, (stride, pads, dilation, groups) = tensors(case, 11)
    padding = tuple(b for b, _ in pads)
    geometry = (stride, padding, dilation, groups)
    t = torch.from_numpy
    wt = vendor_nd.torch_weight(t(w).reshape(groups, w.shape[0] // groups, *w.shape[1:]))
    bias = np.arange(wt.shape[0], dtype=np.float64)
    y = vendor_nd.forward(torch, t(x), wt, *geometry, bias=t(bias)).numpy()
    expected = ref.conv_forward_nd(x, w, stride, pads, dilation, groups) + bias.reshape(1, -1, *(1,) * (x.ndim - 2))
    np.testing.assert_allclose(y, expected, rtol=1e-10, atol=1e-10)
    dx = vendor_nd.dgrad(torch, t(dy), wt, x.shape, *geometry).numpy()
    np.testing.assert_allclose(dx, ref.conv_dgrad_nd(dy, w, x.shape, stride, pads, dilation, groups),
                               rtol=1e-10, atol=1e-10)
    dwt = vendor_nd.wgrad(torch, t(x), t(dy), tuple(wt.shape), *geometry)
    kg, cg = w.shape[1], w.shape[0] // groups
    dw = dwt.reshape(groups, kg, cg, *w.shape[2:]).transpose(1, 2).reshape(w.shape).numpy()   # back to (C, K/G, ...)
    np.testing.assert_allclose(dw, ref.conv_wgrad_nd(x, dy, w.shape, stride, pads, dilation, groups),
                               rtol=1e-10, atol=1e-10)


def test_the_check_catches_a_recursion_that_skips_the_stride(monkeypatch):
    """The comparison can fail: the recursion's windows of the first axis taken at stride 1 (the
    4-D case strided along it) no longer give the forward pass."""
    torch = require_torch()
    x, w, _, (stride, pads, dilation, groups) = tensors(CASES[3], 12)
    windows = vendor_nd.first_axis_windows
    monkeypatch.setattr(vendor_nd, "first_axis_windows", lambda kernel, out, s, d: windows(kernel, out, 1, d))
    wt = vendor_nd.torch_weight(torch.from_numpy(w).reshape(groups, w.shape[0] // groups, *w.shape[1:]))
    y = vendor_nd.forward(torch, torch.from_numpy(x), wt, stride, tuple(b for b, _ in pads), dilation, groups)
    assert not np.allclose(y.numpy(), ref.conv_forward_nd(x, w, stride, pads, dilation, groups))


def test_the_vendor_row_names_what_ran():
    assert vendor_nd.method(4, "conv_dgrad") == ("the recursion over conv3d: one torch.nn.grad.conv3d_input call per "
                                                 "tap of the first kernel axis, summed")
    assert vendor_nd.method(2, "conv_wgrad") == "torch.nn.grad.conv2d_weight (PyTorch's backward)"
    assert vendor_nd.dispatched(["conv_depthwise2d_backward_kernel"]) == "PyTorch's own kernels"
    assert vendor_nd.dispatched(["sm90_xmma_fprop_implicit_gemm"]) == "cuDNN"
