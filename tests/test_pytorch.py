"""Every conv_dgrad and conv_wgrad stage against PyTorch's autograd on random shapes nobody
picked by hand.

PyTorch is independent of the course's NumPy reference. It is not one of the course's packages
(a CPU build is a large download for a learner); CI installs it, and where it is absent these
tests say so as skipped.
"""
import numpy as np
import pytest

import helpers
from helpers.engine.check import rtol_for_sum

torch = pytest.importorskip("torch")

ACTS = {"none": lambda t: t, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}


def random_case(rng):
    kernel = int(rng.choice([1, 3, 5]))
    stride = int(rng.integers(1, 3))
    pad = int(rng.integers(0, kernel))
    h, w = (int(v) for v in rng.integers(max(1, kernel - 2 * pad), 40, 2))
    return dict(n=int(rng.integers(1, 5)), c=int(rng.integers(1, 70)), k=int(rng.integers(1, 70)), h=h, w=w,
                kernel=kernel, stride=stride, pad=pad, act=str(rng.choice(list(ACTS))))


CASES = [random_case(np.random.default_rng(2026 + i)) for i in range(12)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "n{n}c{c}k{k}_{h}x{w}_r{kernel}s{stride}p{pad}_{act}".format(**c))
def test_stages_match_pytorch_autograd(ctx, case):
    c = case
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.standard_normal((c["n"], c["c"], c["h"], c["w"])), dtype=torch.float64, requires_grad=True)
    w_iohw = rng.standard_normal((c["c"], c["k"], c["kernel"], c["kernel"])) / np.sqrt(c["c"] * c["kernel"] ** 2)
    w = torch.tensor(w_iohw.transpose(1, 0, 2, 3).copy(), dtype=torch.float64)      # PyTorch wants OIHW
    out = ACTS[c["act"]](torch.nn.functional.conv2d(x, w, stride=c["stride"], padding=c["pad"]))
    g = torch.tensor(rng.standard_normal(out.shape), dtype=torch.float64)
    out.backward(g)
    expected = x.grad.numpy()
    args = dict(grad_output=g.numpy().astype(np.float32), weight=w_iohw.astype(np.float32),
                input_shape=tuple(x.shape), stride=c["stride"], padding=c["pad"], activation=c["act"])
    if c["act"] != "none":
        args["output"] = out.detach().numpy().astype(np.float32)
    # magnitude: the same gradient through |weights| and |incoming gradient|
    mag = torch.nn.grad.conv2d_input(tuple(x.shape), w.abs(), g.abs(), stride=c["stride"], padding=c["pad"]).numpy()
    for stage in helpers.stage_names("conv_dgrad"):
        if helpers.get_stage("conv_dgrad", stage).precision != "fp32":
            continue    # fp16 storage: checked against its rounded inputs (tests/test_conv_dgrad.py)
        got = helpers.run_stage("conv_dgrad", stage, ctx=ctx, **args)
        # inputs rounded to float32 add their own error: a little more room than check_stage gives
        helpers.check_close(got, expected, magnitude=mag, rtol=4 * rtol_for_sum(c["k"] * c["kernel"] ** 2),
                            name=f"{stage} vs PyTorch")


@pytest.mark.parametrize("case", CASES, ids=lambda c: "n{n}c{c}k{k}_{h}x{w}_r{kernel}s{stride}p{pad}_{act}".format(**c))
def test_wgrad_stages_match_pytorch_autograd(ctx, case):
    c = case
    rng = np.random.default_rng(2)
    x = torch.tensor(rng.standard_normal((c["n"], c["c"], c["h"], c["w"])), dtype=torch.float64)
    w = torch.tensor(rng.standard_normal((c["k"], c["c"], c["kernel"], c["kernel"])) / np.sqrt(c["c"] * c["kernel"] ** 2),
                     dtype=torch.float64, requires_grad=True)                        # OIHW
    out = ACTS[c["act"]](torch.nn.functional.conv2d(x, w, stride=c["stride"], padding=c["pad"]))
    g = torch.tensor(rng.standard_normal(out.shape), dtype=torch.float64)
    out.backward(g)
    expected = w.grad.numpy().transpose(1, 0, 2, 3)                                  # OIHW -> IOHW
    args = dict(input=x.numpy().astype(np.float32), grad_output=g.numpy().astype(np.float32),
                weight_shape=(c["c"], c["k"], c["kernel"], c["kernel"]), stride=c["stride"],
                padding=c["pad"], activation=c["act"])
    if c["act"] != "none":
        args["output"] = out.detach().numpy().astype(np.float32)
    # magnitude: the same gradient through |input| and |incoming gradient|
    mag = torch.nn.grad.conv2d_weight(x.abs(), tuple(w.shape), g.abs(), stride=c["stride"],
                                      padding=c["pad"]).numpy().transpose(1, 0, 2, 3)
    terms = c["n"] * out.shape[2] * out.shape[3]
    for stage in helpers.stage_names("conv_wgrad"):
        got = helpers.run_stage("conv_wgrad", stage, ctx=ctx, **args)
        helpers.check_close(got, expected, magnitude=mag, rtol=4 * rtol_for_sum(terms),
                            name=f"{stage} vs PyTorch")
