"""Op "batchnorm_forward": batch normalization of an NCHW tensor, per channel over (N, H, W).

Training (the batch's own statistics, biased variance):
    y, mean, inv_std = run_stage("batchnorm_forward", stage, x=(N,C,H,W), gamma=(C,), beta=(C,),
                                 eps=1e-5, training=True)
    inv_std = 1 / sqrt(var + eps), var = mean of (x - mean)^2 over N*H*W values
Training with the momentum update of the running statistics: pass ``momentum`` together with
``running_mean`` and ``running_var``; the call then also returns the updated statistics (new
arrays; the ones passed in are not modified):
    y, mean, inv_std, new_running_mean, new_running_var = run_stage(..., training=True,
        momentum=0.1, running_mean=rm, running_var=rv)
    new_running_mean = (1 - momentum) * rm + momentum * mean
    new_running_var  = (1 - momentum) * rv + momentum * var * M / (M - 1)   (M = N*H*W; unbiased,
                                                                             as PyTorch does)
Inference (running statistics): y = run_stage(..., training=False, running_mean=rm, running_var=rv)

Every stage's kernels take ``(x, gamma, beta, running_mean, running_var, y, mean, inv_std,
running_mean_out, running_var_out, N, C, HW, eps, momentum)`` for training and ``(x, gamma, beta,
running_mean, running_var, y, N, C, HW, eps)`` for inference; eps and momentum are float32
kernel arguments taken from the problem by the launch steps (helpers/launch/batchnorm.py), never
literals in the registry. Built with -DUPDATE_RUNNING=0/1.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from . import reference as ref
from ..engine.check import rtol_for_sum
from .problem import Problem, reject_unknown, tensor

OP = "batchnorm_forward"
NAME = "batch norm forward"  # the name tables and prose give it (helpers/analysis/compare.py)
# the layer sets the benchmark takes (helpers/ops/layers.py: their kind, the small default set)
LAYERS = ("batchnorm", "bn_ci")
ARGS = ("x", "gamma", "beta", "eps", "training", "running_mean", "running_var", "momentum")
VENDOR = "PyTorch"       # the vendor the benchmark times beside (helpers/ops/vendor_batchnorm.py)
MAX_COUNT = 2**24          # per-channel counts are carried as float32: exact up to 2^24
MAX_ELEMENTS = 2**31 - 4   # 32-bit indices, rounded up to a multiple of 4 in the kernels


def real(op: str, name: str, value, low: float, high: float, low_open: bool = False) -> float:
    """A finite real number in [low, high] (or (low, high]), or a clear error."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}: {name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < low or v > high or (low_open and v == low):
        bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise ValueError(f"{op}: {name} must be a finite number in {bound}, got {value!r}")
    return v


def channel_vector(op: str, name: str, value, c: int) -> np.ndarray:
    v = tensor(op, name, value, 1)
    if v.shape != (c,):
        raise ValueError(f"{op}: {name} must have shape (C,) = ({c},) to match x's {c} channels, "
                         f"got {v.shape}")
    return v


def check_x(op: str, name: str, value) -> np.ndarray:
    x = tensor(op, name, value, 4)
    n, c, h, w = x.shape
    if x.size > MAX_ELEMENTS:
        raise ValueError(f"{op}: {name} has {x.size:,} elements; the kernels index with 32-bit "
                         f"integers, so at most {MAX_ELEMENTS:,}")
    if n * h * w > MAX_COUNT:
        raise ValueError(f"{op}: each channel holds N*H*W = {n * h * w:,} values; the kernels count "
                         f"them in float32, exact only up to {MAX_COUNT:,}; use a smaller batch")
    return x


def prepare(**kwargs) -> Problem:
    reject_unknown(OP, kwargs, ARGS)
    x = check_x(OP, "x", kwargs.get("x"))
    n, c, h, w = x.shape
    gamma = channel_vector(OP, "gamma", kwargs.get("gamma"), c)
    beta = channel_vector(OP, "beta", kwargs.get("beta"), c)
    eps = real(OP, "eps", kwargs.get("eps", 1e-5), 0.0, 1.0, low_open=True)
    training = kwargs.get("training", True)
    if not isinstance(training, (bool, np.bool_)):
        raise TypeError(f"{OP}: training must be True or False, got {training!r}")
    training = bool(training)
    rm, rv, momentum = kwargs.get("running_mean"), kwargs.get("running_var"), kwargs.get("momentum")
    m = n * h * w
    update = False
    if training:
        if m < 2:
            raise ValueError(f"{OP}: training needs at least 2 values per channel to estimate a "
                             f"variance, but N*H*W = {n}*{h}*{w} = {m}; use training=False with "
                             f"running statistics, or a larger batch")
        if momentum is not None:
            momentum = real(OP, "momentum", momentum, 0.0, 1.0)
            if rm is None or rv is None:
                raise TypeError(f"{OP}: momentum={momentum} updates the running statistics, so "
                                f"running_mean and running_var are required")
            update = True
        elif rm is not None or rv is not None:
            raise ValueError(f"{OP}: running_mean/running_var in training are only used to update "
                             f"them; pass momentum (e.g. momentum=0.1) too, or leave them out")
    else:
        if momentum is not None:
            raise ValueError(f"{OP}: momentum only applies in training (training=True)")
        if rm is None or rv is None:
            raise TypeError(f"{OP}: training=False normalizes with running_mean and running_var; "
                            f"both are required")
    if rm is not None:
        rm = channel_vector(OP, "running_mean", rm, c)
    if rv is not None:
        rv = channel_vector(OP, "running_var", rv, c)
        if (rv < 0).any() or not np.isfinite(rv).all():
            raise ValueError(f"{OP}: running_var must be finite and >= 0")

    inputs = {"x": x, "gamma": gamma, "beta": beta,
              "running_mean": rm if rm is not None else gamma,
              "running_var": rv if rv is not None else gamma}
    aliases = {} if rm is not None else {"running_mean": "gamma", "running_var": "gamma"}
    if training:
        outputs = {"y": x.shape, "mean": (c,), "inv_std": (c,)}
        if update:
            outputs.update(running_mean_out=(c,), running_var_out=(c,))
        passes, what = 3, "x read twice (statistics, then normalize) and y written once"
    else:
        outputs = {"y": x.shape}
        passes, what = 2, "x read once and y written once"
    vectors = 2 * c + (2 * c if rm is not None else 0) + c * (len(outputs) - 1)  # gamma, beta, ...
    mode = ("train" + (f" momentum {momentum:g}" if update else "")) if training else "infer"
    return Problem(
        op=OP, inputs=inputs, outputs=outputs, scalars={"N": n, "C": c, "HW": h * w},
        defines={"UPDATE_RUNNING": int(update)},
        dims={"N": n, "C": c, "H": h, "W": w, "HW": h * w, "M": m, "eps": eps, "training": training,
              "momentum": momentum if update else 0.0, "update": update},
        aliases=aliases,
        flops=(7 if training else 2) * x.size,
        min_bytes=4 * (passes * x.size + vectors),
        flops_formula=("7·|x|: 4 for the statistics (Welford), 3 to normalize" if training
                       else "2·|x|: one subtraction and one multiply-add per value"),
        bytes_formula=(f"4 bytes · ({passes}·|x| + per-channel vectors): {passes} tensor passes, {what}"
                       + ("; the statistics must be complete before the first y, and a tensor "
                          "larger than the caches cannot stay on chip in between" if training else "")),
        returns=None,
        label=f"N{n} C{c} {h}x{w} {mode}",
    )


def _c4(v):
    return np.asarray(v, dtype=np.float64)[None, :, None, None]


def reference(p: Problem):
    d, a = p.dims, p.inputs
    x = a["x"].astype(np.float64)
    gamma, beta, eps = a["gamma"], a["beta"], d["eps"]
    if not d["training"]:
        y = ref.batchnorm_forward(x, gamma, beta, eps, False, a["running_mean"], a["running_var"])
        inv = 1.0 / np.sqrt(a["running_var"].astype(np.float64) + eps)
        mag = np.abs(_c4(gamma)) * _c4(inv) * (np.abs(x) + np.abs(_c4(a["running_mean"]))) + np.abs(_c4(beta))
        return {"y": y}, {"y": mag}
    if d["update"]:
        y, mean, inv_std, rm, rv = ref.batchnorm_forward(x, gamma, beta, eps, True, a["running_mean"],
                                                         a["running_var"], d["momentum"])
    else:
        y, mean, inv_std = ref.batchnorm_forward(x, gamma, beta, eps, True)
    # What rounding scales with: the mean with the mean of |x|; the variance (two passes or
    # Welford) with var * (1 + kappa), kappa = mean|x| / std, the condition number of the data.
    abs_mean = np.abs(x).mean(axis=(0, 2, 3))
    kappa = abs_mean * inv_std
    expected = {"y": y, "mean": mean, "inv_std": inv_std}
    mag = {"mean": abs_mean, "inv_std": inv_std * (1 + kappa),
           "y": (np.abs(_c4(gamma)) * _c4(inv_std) * (np.abs(x - _c4(mean)) * _c4(1 + kappa) + _c4(abs_mean))
                 + np.abs(_c4(beta)))}
    if d["update"]:
        mom, m = d["momentum"], d["M"]
        var_u = ref.batchnorm_stats(x, eps)[2] * m / (m - 1)
        expected.update(running_mean_out=rm, running_var_out=rv)
        mag.update(running_mean_out=(1 - mom) * np.abs(a["running_mean"]) + mom * abs_mean,
                   running_var_out=(1 - mom) * np.abs(a["running_var"]) + mom * np.abs(var_u) * (1 + kappa) ** 2)
    return expected, mag


def terms(p: Problem) -> int:
    """Training: the statistics sum the M = N*H*W values of a channel; inference: no sum."""
    return p.dims["M"] if p.dims["training"] else 1


# An error in a channel's mean or variance moves every normalized value of the channel together,
# by an amount that follows the condition number kappa, not the value: these outputs are checked
# as a whole against their magnitude, which carries the (1 + kappa) (helpers/engine/check.py).
CONDITIONED = ("y", "inv_std", "running_var_out")


def rtol(p: Problem) -> float:
    return rtol_for_sum(terms(p))


def random_args(n, c, h, w, *, offset=0.0, scale=1.0, training=True, momentum=None, seed=0) -> dict:
    """Random, reproducible arguments: x = offset + per-channel shift + scale * noise."""
    rng = np.random.default_rng(seed)
    shift = rng.uniform(-1, 1, (1, c, 1, 1))
    x = (offset + shift + scale * rng.standard_normal((n, c, h, w))).astype(np.float32)
    args = dict(x=x, gamma=rng.uniform(0.5, 1.5, c).astype(np.float32),
                beta=rng.uniform(-0.5, 0.5, c).astype(np.float32), eps=1e-5, training=training)
    if momentum is not None or not training:
        args["running_mean"] = rng.uniform(-0.5, 0.5, c).astype(np.float32)
        args["running_var"] = rng.uniform(0.5, 2.0, c).astype(np.float32)
    if momentum is not None:
        args["momentum"] = momentum
    return args


def layer_args(layer: dict, activation: str = "none", seed: int = 0) -> dict:
    """A training forward pass with the momentum update, as a framework runs it in training."""
    if activation != "none":
        raise ValueError(f"{OP} has no activation (the backward pass fuses the ReLU's derivative)")
    training = layer.get("training", True)
    return dict(_layer_args(layer["n"], layer["c"], layer["h"], layer["w"], training, seed))


@functools.lru_cache(maxsize=12)
def _layer_args(n, c, h, w, training, seed):
    # the benchmark's parameter search asks for the same layers again for every candidate
    return random_args(n, c, h, w, training=training, momentum=0.1 if training else None, seed=seed)


def vendor_time(problem: Problem, warmup: int, repeats: int, flush_bytes: int):
    """PyTorch's batch norm (torch.nn.functional.batch_norm) on an NVIDIA GPU, or None."""
    from .vendor_batchnorm import torch_batchnorm_forward
    return torch_batchnorm_forward(problem, warmup=warmup, repeats=repeats, flush_bytes=flush_bytes)
