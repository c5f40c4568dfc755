"""Chapter 15's exercise checks (the weight gradient and training)."""
from __future__ import annotations

import numpy as np

from .verdict import _verdict, _compare, exercise, named_mistake


@exercise(closes=("runner:prepare", "runner:plan_stage", "runner:run_stage", "ops.conv_forward:prepare",
                  "ops.conv_wgrad:prepare", "ops.conv_dgrad:prepare"))
def check_step_flops(answer_fn) -> bool:
    """Chapter 15: FLOPs of the convolution ops in one training step of a model.Config, as the ops
    count them (2 per multiply-add): forward and weight gradient of every layer, input gradient of
    every layer but the first."""
    from ...runner import prepare
    from ...train import model
    configs = [model.SMALL, model.FULL, model.Config(scale=1, batch=4, channels=(3, 5))]
    for cfg in configs:
        forward = backward = 0
        for i, layer in enumerate(cfg.layers()):
            x, w = np.zeros(layer["input"], np.float32), np.zeros(layer["weight"], np.float32)
            y = np.zeros((x.shape[0], w.shape[1]) + x.shape[2:], np.float32)
            forward += prepare("conv_forward", input=x, weight=w, stride=1, padding=1).flops
            backward += prepare("conv_wgrad", input=x, grad_output=y, weight_shape=w.shape, stride=1, padding=1).flops
            if i > 0:
                backward += prepare("conv_dgrad", grad_output=y, weight=w, input_shape=x.shape, stride=1, padding=1).flops
        want, got = forward + backward, answer_fn(cfg)
        if got != want:
            why = ("half the count: a multiply-add is 2 FLOPs" if got * 2 == want else
                   "the first layer needs no input gradient: its input is the image" if got == 3 * forward else
                   "the backward pass computes two gradients, the input's and the weights'" if got == forward else
                   f"{_compare(got, want)}; each gradient costs as many multiply-adds as the forward pass")
            return _verdict(False, "", f"for batch {cfg.batch}, {cfg.side}x{cfg.side}, channels {cfg.channels} "
                            f"you give {got:,}: {why}")
    return _verdict(True, "forward and weight gradient for both layers, input gradient for conv2 only: "
                    "the backward pass costs about twice the forward", "")


@exercise(closes=("launch.wgrad:steps", "launch.wgrad:workspace", "launch.wgrad:igemm_steps", "launch.wgrad:splits",
                  "launch.wgrad:positions", "launch.wgrad:weights", "launch.wgrad:partial_steps",
                  "launch.gemm:blocked", "runner:prepare", "runner:plan_stage", "runner:workspace_bytes"))
def check_igemm_launch(answer_fn) -> bool:
    """Chapter 15: (layer, TM, TN, SLICE) -> (work-groups of wgrad_igemm, floats in its workspace)
    for conv_wgrad stage 03, against its launcher (helpers/launch/wgrad.py)."""
    from ...launch import wgrad
    from ...ops.layers import layer
    from ...runner import prepare
    from ...stages import get_stage
    stage = get_stage("conv_wgrad", "igemm")
    # "e" is strided and large enough that the slices of the reduction N*OH*OW differ from those
    # of the input's N*H*W for every slice length tried: the input's size in place of the output's
    # is refused there (on "c" the two round up to the same number of slices)
    layers = [layer("a", 2, 17, 13, 19), layer("b", 4, 64, 14, 64), layer("c", 1, 3, 9, 32, stride=2),
              layer("d", 8, 32, 28, 16, kernel=1, padding=0), layer("e", 8, 16, 56, 24, stride=2)]
    for lay in layers:
        oh = (lay["h"] + 2 * lay["padding"] - lay["kernel"]) // lay["stride"] + 1
        taps = lay["c"] * lay["kernel"] ** 2
        for tm, tn, sl in [(64, 64, 1024), (128, 64, 4096), (64, 128, 256)]:
            x = np.zeros((lay["n"], lay["c"], lay["h"], lay["w"]), np.float32)
            p = prepare("conv_wgrad", input=x, grad_output=np.zeros((lay["n"], lay["k"], oh, oh), np.float32),
                        weight_shape=(lay["c"], lay["k"], lay["kernel"], lay["kernel"]), stride=lay["stride"],
                        padding=lay["padding"])
            d = {**stage.defines, "TM": tm, "TN": tn, "SLICE": sl}
            first = wgrad.steps(stage, p, d)[0]                 # wgrad_igemm; then wgrad_sum
            groups = int(np.prod([a // b for a, b in zip(first.global_size, first.local_size)]))
            want = (groups, wgrad.workspace(stage, p, d)["partials"].count)
            got = tuple(answer_fn(dict(lay), tm, tn, sl))
            if got == want:
                continue
            case = f"for {p.label} with TM={tm}, TN={tn}, SLICE={sl}: "
            tiles = -(-lay["k"] // tm) * -(-taps // tn)
            slices = want[0] // tiles
            in_slices = -(-(lay["n"] * lay["h"] * lay["w"]) // sl)      # the input's positions, not dy's
            if got[0] != want[0]:
                why = ("the reduction runs over dy's positions, N*OH*OW; N*H*W counts the input's, which a "
                       "stride makes larger" if got[0] == tiles * in_slices else
                       "the slices are missing: each slice of the reduction has its own work-groups"
                       if got[0] == tiles else
                       "the result's columns are the taps C*R*S, not the channels C"
                       if got[0] == -(-lay["k"] // tm) * -(-lay["c"] // tn) * slices else
                       "a partial tile or a partial slice still needs its work-group: round up"
                       if got[0] < want[0] else f"{_compare(got[0], want[0])}")
                return _verdict(False, "", case + f"you give {got[0]:,} work-groups: {why}")
            why = ("the slices are counted over the input's N*H*W positions; the reduction runs over dy's, N*OH*OW"
                   if got[1] == in_slices * taps * lay["k"] else
                   f"{_compare(got[1], want[1])}: one partial sum per weight (C*K*R*S) and slice")
            return _verdict(False, "", case + f"you give {got[1]:,} floats of workspace, {why}")
    return _verdict(True, "tiles of the K x C*R*S result times the slices of the N*OH*OW reduction, "
                    "and one partial sum per weight and slice, as the launcher computes them", "")


def _layout(shapes: dict, align_floats: int, last_padded: bool = True) -> tuple[dict, int]:
    """A model of an arena's layout with the alignment in float32 values (the check's mistakes)."""
    offsets, at, end = {}, 0, 0
    for name, shape in shapes.items():
        offsets[name] = at
        end = at + int(np.prod(shape))
        at += -(-int(np.prod(shape)) // align_floats) * align_floats
    return offsets, (at if last_padded else end)


def _as_layout(answer) -> tuple[dict, int]:
    offsets, size = answer
    return {k: int(v) for k, v in dict(offsets).items()}, int(size)


@exercise(closes=("train.kernels:arena_layout", "train.kernels:Arena", "chapters.exercises.ch15:_layout"))
def check_arena_layout(answer_fn) -> bool:
    """Chapter 15: (shapes, MEM_BASE_ADDR_ALIGN in bits) -> ({name: offset}, size) in float32 values,
    against the layout the training step's arena uses (helpers/train/kernels.py: arena_layout)."""
    from ...train import model
    from ...train.kernels import arena_layout
    odd = {"a": (4, 8), "b": (1,), "c": (3, 3), "d": (64,), "e": (2, 5, 3, 3)}   # a size of 1, exact multiples
    cases = [(model.parameter_shapes(model.SMALL), 1024), (model.parameter_shapes(model.FULL), 4096),
             (odd, 1024), (odd, 4096), (model.parameter_shapes(model.SMALL), 32)]
    for shapes, bits in cases:
        layout, size = arena_layout(shapes, bits)
        want = ({k: off for k, (off, _) in layout.items()}, size)
        got = _as_layout(answer_fn(dict(shapes), bits))
        if got == want:
            continue
        if sorted(got[0]) != sorted(shapes):
            return _verdict(False, "", f"give one offset per parameter, named as in the dict "
                            f"(for {len(shapes)} parameters you give {len(got[0])})")
        same = lambda a, b: _as_layout(a) == _as_layout(b)
        mistake = named_mistake(lambda sh, b: _as_layout(answer_fn(dict(sh), b)), cases, [
            ("the offsets count float32 values, not bytes",
             lambda sh, b: ({k: 4 * v for k, v in _layout(sh, b // 32)[0].items()}, 4 * _layout(sh, b // 32)[1])),
            ("the offsets count float32 values, not bytes",
             lambda sh, b: ({k: 4 * v for k, v in _layout(sh, b // 32)[0].items()}, _layout(sh, b // 32)[1])),
            ("the alignment is given in bits: a float32 value is 32 of them, not 8",
             lambda sh, b: _layout(sh, b // 8)),
            ("the alignment is given in bits, not in float32 values: divide by 32",
             lambda sh, b: _layout(sh, b)),
            ("each parameter must start at a multiple of the alignment (a sub-buffer elsewhere is refused): "
             "round each size up before the next one starts", lambda sh, b: _layout(sh, 1)),
            ("the offsets are right; the size is where one more parameter would start, so the last "
             "parameter is rounded up too", lambda sh, b: _layout(sh, b // 32, last_padded=False)),
        ], same=same)
        where = f"for {len(shapes)} parameters and an alignment of {bits} bits: "
        if mistake:
            return _verdict(False, "", where + mistake)
        bad = next((k for k in shapes if got[0][k] != want[0][k]), None)
        what = (f"the offset of {bad} is {_compare(got[0][bad], want[0][bad])}" if bad is not None else
                f"the offsets are right, the size is {_compare(got[1], want[1])}")
        return _verdict(False, "", where + what)
    return _verdict(True, "every parameter starts at a multiple of the alignment, counted in float32 values, "
                    "as the arena lays them out", "")
