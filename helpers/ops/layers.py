"""Named layer sets for the benchmark and the notebooks. All 3x3 convolutions unless stated.

A layer is a dict of conv_dgrad's shape arguments; ``args(layer, activation)`` makes random,
reproducible tensors for it (helpers/ops/conv_dgrad.py: random_problem_args). The convolutions of
any shape (chapter 16: depthwise, grouped, dilated, 3-D and 4-D) are a kind of their own,
``nd_layer``: each carries its ConvShape's arguments, and each convolution's ``layer_args`` makes
its tensors (helpers/ops/shape.py: layer_args).
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


def nd_layer(name, n, c, size, k, kernel, stride=1, padding=0, dilation=1, groups=1):
    """A convolution of any shape (helpers/ops/shape.py): ``size`` and ``kernel`` per spatial axis
    (their length is the rank, 1 to 4); ``stride``, ``padding`` and ``dilation`` as the three
    convolutions take them (one integer, or one per axis); the weight is (C, K/groups, *kernel)."""
    return {"name": name, "n": n, "c": c, "k": k, "size": tuple(size), "kernel": tuple(kernel), "stride": stride,
            "padding": padding, "dilation": dilation, "groups": groups}


def depthwise(name, n, c, size, kernel, stride=1):
    """A 2-D depthwise layer (groups = C = K), padded to keep the size at stride 1."""
    return nd_layer(name, n, c, (size, size), c, (kernel, kernel), stride, kernel // 2, groups=c)


LAYER_SETS.update({
    # MobileNetV2's depthwise 3x3 layers at batch 64 (channels @ input size, /s2: stride 2)
    "mobilenetv2_dw": [depthwise(f"dw{c}@{s}{'/s2' if st == 2 else ''}", 64, c, s, 3, st) for c, s, st in
                       ((32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (192, 28, 2),
                        (384, 14, 1), (576, 14, 1), (576, 14, 2), (960, 7, 1))],
    # ConvNeXt's depthwise 7x7 layers (padding 3) at batch 64
    "convnext_dw": [depthwise(f"dw7x7_{c}@{s}", 64, c, s, 7) for c, s in ((96, 56), (192, 28), (384, 14), (768, 7))],
    # ResNeXt-50 32x4d's grouped 3x3 layers (32 groups, C = K) at batch 64
    "resnext_grouped": [nd_layer(f"g32_{c}@{s}{'/s2' if st == 2 else ''}", 64, c, (s, s), c, (3, 3), st, 1, groups=32)
                        for c, s, st in ((128, 56, 1), (256, 56, 2), (256, 28, 1), (512, 28, 2), (512, 14, 1),
                                         (1024, 14, 2), (1024, 7, 1))],
    # DeepLabv3 at output stride 16 (33x33 at batch 16): layer4's dilated 3x3, ASPP's three atrous
    # 3x3 branches; padding = dilation keeps the size
    "deeplab_dilated": [nd_layer(f"{name}_d{d}", 16, c, (33, 33), k, (3, 3), 1, d, d) for name, c, k, d in
                        (("layer4", 512, 512, 2), ("aspp", 2048, 256, 6), ("aspp", 2048, 256, 12),
                         ("aspp", 2048, 256, 18))],
    # a 3-D ResNet-18's 3x3x3 layers on video clips (frames x height x width) at batch 8
    "video3d": [nd_layer(f"v{c}@{d}x{s}x{s}", 8, c, (d, s, s), c, (3, 3, 3), 1, 1) for c, d, s in
                ((64, 16, 56), (128, 8, 28), (256, 4, 14), (512, 2, 7))]
               + [nd_layer("v64to128@16x56x56/s2", 8, 64, (16, 56, 56), 128, (3, 3, 3), 2, 1)],
    # 4-D: 3x3x3x3 convolutions (padding 1, C = K) at batch 2
    "conv4d": [nd_layer(f"c4d{c}@{a}x{s}x{s}x{s}", 2, c, (a, s, s, s), c, (3, 3, 3, 3), 1, 1)
               for c, a, s in ((16, 8, 16), (32, 8, 8))],
    # 4-D layers that run in seconds on a CPU through PoCL
    "conv4d_small": [nd_layer("c4d4@4x6x6x6", 1, 4, (4, 6, 6, 6), 4, (3, 3, 3, 3), 1, 1),
                     nd_layer("c4d8@4x6x6x6/s2", 2, 8, (4, 6, 6, 6), 8, (3, 3, 3, 3), 2, 1)],
    # one small layer of each shape above, and a 1-D one: what CI and a CPU run in seconds
    "anyshape_ci": [depthwise("dw16@12/s2", 2, 16, 12, 3, 2), depthwise("dw7x7_8@9", 1, 8, 9, 7),
                    nd_layer("g4_16@10", 2, 16, (10, 10), 16, (3, 3), 1, 1, groups=4),
                    nd_layer("layer_d2", 1, 8, (11, 11), 4, (3, 3), 1, 2, 2),
                    nd_layer("v4@4x6x6", 1, 4, (4, 6, 6), 4, (3, 3, 3), 1, 1),
                    nd_layer("c4d2@3x4x4x4", 1, 2, (3, 4, 4, 4), 2, (3, 3, 3, 3), 1, 1),
                    nd_layer("dw1d16@50", 2, 16, (50,), 16, (5,), 1, 2, groups=16)],
})



def zoo_layer(name, n, c, size, k, kernel=3, stride=1, padding=None):
    """A layer of the zoo: a 2-D convolution named by its network and place, ``size`` and ``kernel``
    an integer (square) or (height, width); padding keeps the size at stride 1 unless given."""
    size = (size, size) if isinstance(size, int) else tuple(size)
    kernel = (kernel, kernel) if isinstance(kernel, int) else tuple(kernel)
    if padding is None:
        padding = kernel[0] // 2 if kernel[0] == kernel[1] else tuple(r // 2 for r in kernel)
    return nd_layer(name, n, c, size, k, kernel, stride, padding)


LAYER_SETS.update({
    # Real layers from many networks, none of them in the sets above (the chooser was never tuned
    # on them): ResNet-18/34/50 (3x3, 1x1 and stride-2 layers), VGG-16, U-Net at 128x128 and 64x64,
    # Inception-v3 (5x5, 1x7 and 7x1), DenseNet-121 (growth 32), MobileNetV2's pointwise layers and
    # YOLOv3's heads at 13, 26 and 52; batches 1 to 64; channels and sizes off multiples of 16
    "zoo": [
        zoo_layer("resnet18.conv1(7x7/s2)", 32, 3, 224, 64, 7, 2, 3),
        zoo_layer("resnet18.layer1.0.conv1", 32, 64, 56, 64),
        zoo_layer("resnet18.layer1.0.conv1/n64", 64, 64, 56, 64),
        zoo_layer("resnet18.layer2.0.conv1/s2", 32, 64, 56, 128, 3, 2, 1),
        zoo_layer("resnet18.layer2.0.downsample(1x1/s2)", 32, 64, 56, 128, 1, 2, 0),
        zoo_layer("resnet34.layer3.1.conv1/n8", 8, 256, 14, 256),
        zoo_layer("resnet34.layer4.1.conv1/n4", 4, 512, 7, 512),
        zoo_layer("resnet50.layer1.0.conv1(1x1)", 32, 64, 56, 64, 1),
        zoo_layer("resnet50.layer1.0.conv3(1x1)", 32, 64, 56, 256, 1),
        zoo_layer("resnet50.layer3.0.conv1(1x1)", 32, 512, 28, 256, 1),
        zoo_layer("resnet50.layer3.1.conv2/n1", 1, 256, 14, 256),
        zoo_layer("resnet50.layer4.0.conv3(1x1)", 32, 512, 7, 2048, 1),
        zoo_layer("vgg16.conv1_2/n8", 8, 64, 224, 64),
        zoo_layer("vgg16.conv3_3/n8", 8, 256, 56, 256),
        zoo_layer("unet128.enc1.conv1", 4, 3, 128, 64),
        zoo_layer("unet128.dec1.conv1", 4, 128, 128, 64),
        zoo_layer("unet64.enc2.conv1", 4, 64, 64, 128),
        zoo_layer("unet64.dec2.conv2", 4, 128, 64, 128),
        zoo_layer("inception3.mixed5b.branch5x5_2(5x5)", 32, 48, 35, 64, 5),
        zoo_layer("inception3.mixed5b.branch3x3dbl_3", 32, 96, 35, 96),
        zoo_layer("inception3.mixed6b.branch7x7_2(1x7)", 32, 128, 17, 128, (1, 7)),
        zoo_layer("inception3.mixed6b.branch7x7_3(7x1)", 32, 128, 17, 192, (7, 1)),
        zoo_layer("densenet121.block1.layer3.conv1(1x1)", 16, 128, 56, 128, 1),
        zoo_layer("densenet121.block1.layer3.conv2(k32)", 16, 128, 56, 32),
        zoo_layer("densenet121.block3.layer5.conv2(k32)", 16, 128, 14, 32),
        zoo_layer("mobilenetv2.block3.expand(1x1)", 32, 24, 56, 144, 1),
        zoo_layer("mobilenetv2.block3.project(1x1)", 32, 144, 56, 24, 1),
        zoo_layer("mobilenetv2.block16.project(1x1)", 32, 960, 7, 160, 1),
        zoo_layer("yolov3.head13(1x1)", 8, 1024, 13, 255, 1),
        zoo_layer("yolov3.head26(1x1)", 8, 512, 26, 255, 1),
        zoo_layer("yolov3.head52(1x1)", 8, 256, 52, 255, 1),
        zoo_layer("yolov3.neck13", 8, 512, 13, 1024),
    ],
    # the zoo's kinds of layer at sizes a CPU runs in seconds (tests, CI)
    "zoo_ci": [
        zoo_layer("stem(7x7/s2)", 1, 3, 19, 8, 7, 2, 3),
        zoo_layer("basic3x3", 2, 24, 9, 24),
        zoo_layer("down3x3/s2", 1, 16, 10, 32, 3, 2, 1),
        zoo_layer("pointwise(1x1)", 2, 24, 7, 40, 1),
        zoo_layer("pointwise(1x1/s2)", 1, 16, 9, 24, 1, 2, 0),
        zoo_layer("five(5x5)", 1, 12, 9, 16, 5),
        zoo_layer("row(1x7)", 1, 8, 9, 12, (1, 7)),
        zoo_layer("column(7x1)", 1, 8, 9, 12, (7, 1)),
        zoo_layer("growth(k32)", 1, 20, 8, 32),
        zoo_layer("head(1x1,k255)", 1, 32, 5, 255, 1),
    ],
})
# the zoo's 1x1 layers (a run of 2026-11-29 searched the forward implicit GEMM's tile on them; the
# search now runs on "bottleneck", and the chooser's model reads no zoo run)
LAYER_SETS["zoo_pointwise"] = [lay for lay in LAYER_SETS["zoo"] if set(lay["kernel"]) == {1}]
# ResNet-50's bottleneck 1x1 layers that the zoo does not hold, at batch 32 and at small batches: where
# the 1x1 stages' tiles and split-K are searched and the chooser's model learns the 1x1 layers, so
# that the zoo stays a set nobody tuned for
LAYER_SETS["bottleneck"] = [
    zoo_layer("resnet50.layer1.1.conv1(1x1)", 32, 256, 56, 64, 1),
    zoo_layer("resnet50.layer2.0.conv3(1x1)", 32, 128, 28, 512, 1),
    zoo_layer("resnet50.layer2.1.conv1(1x1)", 32, 512, 28, 128, 1),
    zoo_layer("resnet50.layer3.0.conv3(1x1)", 32, 256, 14, 1024, 1),
    zoo_layer("resnet50.layer3.1.conv1(1x1)", 32, 1024, 14, 256, 1),
    zoo_layer("resnet50.layer4.1.conv1(1x1)", 32, 2048, 7, 512, 1),
    zoo_layer("resnet50.layer3.0.downsample(1x1/s2)", 32, 512, 28, 1024, 1, 2, 0),
    zoo_layer("resnet50.layer2.1.conv1(1x1)/n1", 1, 512, 28, 128, 1),
    zoo_layer("resnet50.layer3.1.conv1(1x1)/n4", 4, 1024, 14, 256, 1),
    zoo_layer("resnet50.layer4.1.conv1(1x1)/n8", 8, 2048, 7, 512, 1),
]
# Inception-v3's factorized layers (1x7 and 7x1, 1x3 and 3x1) that the zoo does not hold: where the
# implicit GEMM of any shape (16_igemm_nd) has its tile searched and the model learns these kinds
LAYER_SETS["asymmetric"] = [
    zoo_layer("inception3.mixed6c.branch7x7_2(1x7)", 32, 160, 17, 160, (1, 7)),
    zoo_layer("inception3.mixed6c.branch7x7_3(7x1)", 32, 160, 17, 192, (7, 1)),
    zoo_layer("inception3.mixed6e.branch7x7_2(1x7)", 32, 192, 17, 192, (1, 7)),
    zoo_layer("inception3.mixed6e.branch7x7dbl_2(7x1)", 32, 192, 17, 192, (7, 1)),
    zoo_layer("inception3.mixed7b.branch3x3_2a(1x3)", 32, 384, 8, 384, (1, 3)),
    zoo_layer("inception3.mixed7b.branch3x3_2b(3x1)", 32, 384, 8, 384, (3, 1)),
    zoo_layer("inception3.mixed6c.branch7x7dbl_2(7x1)/n8", 8, 160, 17, 160, (7, 1)),
]
# first layers (three input channels, large planes, wide or strided kernels) of networks the zoo does
# not hold: where the model learns what runs a stem
LAYER_SETS["stems"] = [
    zoo_layer("alexnet.conv1(11x11/s4)", 32, 3, 224, 64, 11, 4, 2),
    zoo_layer("googlenet.conv1(7x7/s2)/n8", 8, 3, 224, 64, 7, 2, 3),
    zoo_layer("inception3.conv1(3x3/s2)", 32, 3, 299, 32, 3, 2, 0),
    zoo_layer("mobilenetv2.conv1(3x3/s2)", 32, 3, 224, 32, 3, 2, 1),
    zoo_layer("vgg16.conv1_1/n8", 8, 3, 224, 64),
]

# What each kind of layer describes, by the keys its layers carry: an op takes the sets of one kind
# (its module's LAYERS: the kind, and the small set its benchmark runs when none is named), and
# the kinds ALSO names beside it: the convolutions take layers of any shape too
KINDS = {"conv": ("n", "c", "h", "w", "k", "kernel", "stride", "padding"),
         "gemm": ("m", "n", "k"),
         "batchnorm": ("n", "c", "h", "w"),
         "anyshape": ("n", "c", "k", "size", "kernel", "stride", "padding", "dilation", "groups")}
ALSO = {"conv": ("anyshape",)}


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
        kinds = (kind, *ALSO.get(kind, ()))
        if kind_of(name) not in kinds:
            raise ValueError(f"layer set {name!r} holds {kind_of(name)} layers, but {op} takes "
                             f"{' or '.join(kinds)} layers: choose from {', '.join(n for k in kinds for n in sets_of(k))}")
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
