"""Op "batchnorm_backward": the gradients of a training-mode batch norm (chapter 14).

    grad_input, grad_gamma, grad_beta = run_stage("batchnorm_backward", stage,
        grad_output=(N,C,H,W), x=(N,C,H,W), gamma=(C,), mean=(C,), inv_std=(C,),
        activation="none" | "relu", output=None | (N,C,H,W))

``mean`` and ``inv_std`` are what the training forward pass returned. With activation "relu",
``output`` is the post-ReLU forward output and the ReLU's derivative (output > 0) is fused on the
read of grad_output. See helpers/ops/reference.py: batchnorm_backward for the formulas.

Every stage's kernels take ``(grad_output, output, x, gamma, mean, inv_std, grad_input,
grad_gamma, grad_beta, N, C, HW)``, built with -DACT (kernels/common/course.h).
"""
from __future__ import annotations

import functools
import numpy as np

from . import reference as ref
from ..engine.check import rtol_for_sum
from .problem import Problem, activation_output, reject_unknown
from .problem import ACT_CODES as PROBLEM_ACT_CODES
from .batchnorm_forward import VENDOR, channel_vector, check_x, random_args  # noqa: F401 (VENDOR: the benchmark's label)

OP = "batchnorm_backward"
NAME = "batch norm backward"  # the name tables and prose give it (helpers/analysis/compare.py)
# the layer sets the benchmark takes (helpers/ops/layers.py: their kind, the small default set)
LAYERS = ("batchnorm", "bn_ci")
# the backward pass fuses the ReLU's derivative only
ACT_CODES = {a: PROBLEM_ACT_CODES[a] for a in ("none", "relu")}
ARGS = ("grad_output", "x", "gamma", "mean", "inv_std", "activation", "output")


def prepare(**kwargs) -> Problem:
    reject_unknown(OP, kwargs, ARGS)
    dy = check_x(OP, "grad_output", kwargs.get("grad_output"))
    x = check_x(OP, "x", kwargs.get("x"))
    if x.shape != dy.shape:
        raise ValueError(f"{OP}: x must have grad_output's shape {dy.shape}, got {x.shape}")
    n, c, h, w = x.shape
    gamma = channel_vector(OP, "gamma", kwargs.get("gamma"), c)
    mean = channel_vector(OP, "mean", kwargs.get("mean"), c)
    inv_std = channel_vector(OP, "inv_std", kwargs.get("inv_std"), c)
    act, y = activation_output(OP, kwargs.get("activation", "none"), kwargs.get("output"), ACT_CODES, dy)
    big = 3 if y is None else 4      # dy, x (, output) read twice; dx written once
    passes = 2 * (big - 1) + 1
    return Problem(
        op=OP,
        inputs={"grad_output": dy, "output": y if y is not None else dy, "x": x, "gamma": gamma,
                "mean": mean, "inv_std": inv_std},
        outputs={"grad_input": x.shape, "grad_gamma": (c,), "grad_beta": (c,)},
        scalars={"N": n, "C": c, "HW": h * w},
        defines={"ACT": ACT_CODES[act]},
        dims={"N": n, "C": c, "H": h, "W": w, "HW": h * w, "M": n * h * w, "activation": act},
        aliases={} if y is not None else {"output": "grad_output"},
        flops=(9 if y is None else 11) * x.size,
        min_bytes=4 * (passes * x.size + 5 * c),
        flops_formula="9·|x| (11 with ReLU): 3 for the two sums, 6 for the input gradient",
        bytes_formula=(f"4 bytes · ({passes}·|x| + 5·C): {passes} tensor passes, grad_output and x"
                       + (" and output" if y is not None else "")
                       + " read twice (the sums, then the input gradient) and grad_input written once"),
        label=f"N{n} C{c} {h}x{w} {act}",
    )


def _c4(v):
    return np.asarray(v, dtype=np.float64)[None, :, None, None]


def reference(p: Problem):
    a, act = p.inputs, p.dims["activation"]
    out = a["output"] if act != "none" else None
    dx, dgamma, dbeta = ref.batchnorm_backward(a["grad_output"], a["x"], a["gamma"], a["mean"],
                                               a["inv_std"], act, out)
    g = np.abs(a["grad_output"].astype(np.float64))
    if act != "none":
        g = g * ref.activation_derivative(act, out)
    xhat = np.abs(a["x"].astype(np.float64) - _c4(a["mean"])) * _c4(a["inv_std"])
    sum_g, sum_gx = g.sum(axis=(0, 2, 3)), (g * xhat).sum(axis=(0, 2, 3))
    m = p.dims["M"]
    mag_dx = np.abs(_c4(a["gamma"])) * _c4(a["inv_std"]) * (g + (_c4(sum_g) + xhat * _c4(sum_gx)) / m)
    return ({"grad_input": dx, "grad_gamma": dgamma, "grad_beta": dbeta},
            {"grad_input": mag_dx, "grad_gamma": sum_gx, "grad_beta": sum_g})


def terms(p: Problem) -> int:
    """The two sums of a channel add its M = N*H*W values."""
    return p.dims["M"]


def rtol(p: Problem) -> float:
    return rtol_for_sum(terms(p))


def random_backward_args(n, c, h, w, *, activation="none", offset=0.0, scale=1.0, seed=0) -> dict:
    """Arguments of a consistent backward pass: mean, inv_std (and the ReLU output) come from the
    reference forward pass on the same x, rounded to float32 as a kernel would return them."""
    f = random_args(n, c, h, w, offset=offset, scale=scale, seed=seed)
    y, mean, inv_std = ref.batchnorm_forward(f["x"], f["gamma"], f["beta"], f["eps"])
    rng = np.random.default_rng(seed + 1)
    args = dict(grad_output=rng.standard_normal((n, c, h, w), dtype=np.float32), x=f["x"],
                gamma=f["gamma"], mean=mean.astype(np.float32), inv_std=inv_std.astype(np.float32),
                activation=activation)
    if activation != "none":
        args["output"] = ref.activation(activation, y).astype(np.float32)
    return args


def layer_args(layer: dict, activation: str = "none", seed: int = 0) -> dict:
    return dict(_layer_args(layer["n"], layer["c"], layer["h"], layer["w"], activation, seed))


@functools.lru_cache(maxsize=12)
def _layer_args(n, c, h, w, activation, seed):
    # the benchmark's parameter search asks for the same layers again for every candidate
    return random_backward_args(n, c, h, w, activation=activation, seed=seed)


def vendor_time(problem: Problem, warmup: int, repeats: int, flush_bytes: int):
    """PyTorch's batch-norm backward (autograd through torch.nn.functional.batch_norm, and the
    ReLU's own backward kernel with activation 'relu') on an NVIDIA GPU, or None."""
    from .vendor_batchnorm import torch_batchnorm_backward
    return torch_batchnorm_backward(problem, warmup=warmup, repeats=repeats, flush_bytes=flush_bytes)
