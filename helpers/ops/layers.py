"""Named layer sets for the benchmark and the notebooks. All 3x3 convolutions unless stated.

A layer is a dict of conv_dgrad's shape arguments; ``args(layer, activation)`` makes random,
reproducible tensors for it (helpers/ops/conv_dgrad.py: random_problem_args).
"""
from __future__ import annotations


def layer(name, n, c, size, k, kernel=3, stride=1, padding=1):
    return {"name": name, "n": n, "c": c, "h": size, "w": size, "k": k,
            "kernel": kernel, "stride": stride, "padding": padding}


def _resnet50(n):
    return [layer(f"res{c}@{s}", n, c, s, c) for c, s in ((64, 56), (128, 28), (256, 14), (512, 7))] + [
        layer("res128@56/s2", n, 128, 56, 128, stride=2)]


LAYER_SETS = {
    # ResNet-50's 3x3 layers at batch 64 (the stride-2 layer halves 56 -> 28)
    "resnet50": _resnet50(64),
    # VGG-16 layers at batch 32
    "vgg16": [layer(f"vgg{c}@{s}", 32, c, s, k) for c, s, k in
              ((64, 224, 64), (256, 56, 256), (512, 28, 512), (512, 14, 512))],
    # the six (N, C, size, K) shapes of chapter 12's Winograd table (stride 1, padding 1)
    "winograd6": [layer(f"w{c}@{s}k{k}", n, c, s, k) for n, c, s, k in
                  ((1, 64, 224, 64), (1, 128, 122, 128), (1, 128, 128, 128), (1, 64, 56, 64),
                   (1, 64, 64, 32), (1, 64, 112, 128))],
    # small 3x3 stride-1 layers that run in seconds on a CPU (chapter 12's default); 30 and 32 give
    # 15x15 and 16x16 output tiles: one misses every work-group block of the products, one fits
    "winograd_small": [layer("ws32@30", 1, 32, 30, 32), layer("ws32@32", 1, 32, 32, 32),
                       layer("ws64@14", 2, 64, 14, 64)],
    # small batches, as in fine-tuning on an edge device
    "edge": [dict(l, name=f"{l['name']}/n{n}") for n in (1, 8) for l in _resnet50(n)],
    # tiny shapes that run in seconds on a CPU through PoCL (CI, notebooks' default)
    "ci": [layer("tiny16@12", 2, 16, 12, 16), layer("tiny32@9/s2", 1, 32, 9, 32, stride=2),
           layer("tiny17@7", 1, 17, 7, 33)],
    # what notebooks time on a CPU by default: small enough for a laptop, big enough to measure
    "small": [layer("small32@28", 1, 32, 28, 32), layer("small64@14", 2, 64, 14, 64)],
}


def gemm_shape(name, m, n, k):
    """A matrix product C (m x n) = A (m x k) . B (k x n) for op gemm."""
    return {"name": name, "m": m, "n": n, "k": k}


LAYER_SETS.update({
    # chapter 11: square products up to 4096 (the target size), and the awkward Triton-style shape
    "gemm": [gemm_shape(f"sq{s}", s, s, s) for s in (1024, 2048, 4096)] + [gemm_shape("odd1823x781", 1823, 781, 1023)],
    # what chapter 11 times on a CPU, and CI
    "gemm_small": [gemm_shape("sq256", 256, 256, 256), gemm_shape("odd181x77", 181, 77, 131)],
})


def bn_layer(name, n, c, size):
    """A batch-norm layer: the activation tensor (N, C, size, size) it normalizes."""
    return {"name": name, "n": n, "c": c, "h": size, "w": size}


# ResNet-50's batch-norm inputs (channels @ size), each once: the stem, then the four stages
_RESNET50_BN = ((64, 112), (64, 56), (256, 56), (128, 56), (128, 28), (512, 28), (256, 14),
                (1024, 14), (512, 7), (2048, 7))

LAYER_SETS.update({
    # chapter 14: the headline layer N32 C256 56x56 first, then ResNet-50's other batch-norm
    # activations at batch 32
    "bn": [bn_layer(f"bn{c}@{s}", 32, c, s) for c, s in _RESNET50_BN if (c, s) == (256, 56)]
          + [bn_layer(f"bn{c}@{s}", 32, c, s) for c, s in _RESNET50_BN if (c, s) != (256, 56)],
    # tiny shapes for CI and CPUs (H*W = 144, 49, 99: multiples of 4 and not)
    "bn_ci": [bn_layer("bn16@12", 2, 16, 12), bn_layer("bn32@7", 2, 32, 7),
              {"name": "bn5@9x11", "n": 3, "c": 5, "h": 9, "w": 11}],
    # what chapter 14 times on a CPU by default
    "bn_small": [bn_layer("bn64@28", 8, 64, 28), bn_layer("bn128@14", 8, 128, 14), bn_layer("bn256@7", 8, 256, 7)],
})


# What each kind of layer describes, by the keys its layers carry: an op takes the sets of one kind
# (its module's LAYERS: the kind, and the small set its benchmark runs when none is named)
KINDS = {"conv": ("n", "c", "h", "w", "k", "kernel", "stride", "padding"),
         "gemm": ("m", "n", "k"),
         "batchnorm": ("n", "c", "h", "w")}


def kind_of(name: str) -> str:
    """The kind of a layer set ('conv', 'gemm', 'batchnorm'): the first kind whose keys its layers all have."""
    keys = set.intersection(*(set(lay) for lay in layer_set(name)))
    return next(k for k, need in KINDS.items() if set(need) <= keys)


def sets_of(kind: str) -> list[str]:
    """The names of the layer sets of one kind."""
    return [name for name in LAYER_SETS if kind_of(name) == kind]


def layer_set(name: str, op: str | None = None) -> list[dict]:
    """A named layer set; with ``op``, refused unless its layers are of the kind the op takes."""
    if name not in LAYER_SETS:
        raise ValueError(f"unknown layer set {name!r}; choose from {', '.join(LAYER_SETS)}")
    if op is not None:
        from . import op_module
        kind, _ = op_layers(op_module(op))
        if kind_of(name) != kind:
            raise ValueError(f"layer set {name!r} holds {kind_of(name)} layers, but {op} takes {kind} layers: "
                             f"choose from {', '.join(sets_of(kind))}")
    return LAYER_SETS[name]


def op_layers(mod) -> tuple[str, str]:
    """(kind, default set) of an op module, or a ValueError for an op the benchmark has no layers for."""
    if getattr(mod, "LAYERS", None) is None:
        raise ValueError(f"{mod.OP} has no layer sets to benchmark; run its stages from Python "
                         f"(run_stage('{mod.OP}', ...)) or benchmark one of the ops that has them")
    return mod.LAYERS


def args(lay: dict, activation: str = "none", seed: int = 0) -> dict:
    """conv_dgrad arguments (random tensors, fixed seed) for a layer of a set."""
    from .conv_dgrad import random_problem_args
    return random_problem_args(lay["n"], lay["c"], lay["h"], lay["w"], lay["k"], lay["kernel"],
                               lay["stride"], lay["padding"], activation, seed)
