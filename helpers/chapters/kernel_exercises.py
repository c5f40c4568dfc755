"""Kernel exercises: a stage's kernel with a marked gap that the learner fills with OpenCL C.

    from helpers.chapters.kernel_exercises import kernel_gap
    gap = kernel_gap("naive_checks")
    gap.show()                       # the kernel, with the gap marked
    gap.check(my_code, ctx=nb.ctx)   # splice the code in, run it through the one checker

The learner's code is spliced into the real kernel file in place of the gap's lines and run as a
temporary copy of the stage over a few labelled shapes, with guard regions (NaN before and after
every input, canaries around every output). The verdict names the first shape that fails and
what went wrong (does not compile, reads outside a tensor, writes outside one, wrong values)
without printing the answer. In the student edition the teacher's code is replaced by nbgrader's
stub (``raise NotImplementedError()``); ``check`` then says the exercise is not answered yet.
"""
from __future__ import annotations

import dataclasses
from contextlib import contextmanager

import numpy as np

from ..engine.build import KernelBuildError, kernel_source
from ..engine.check import MismatchError
from ..runner import GuardViolation, check_plan, plan_stage
from ..stages import REGISTRY, get_stage
from .exercises import NOT_ANSWERED, _verdict
from .notebook import Source


NOT_ANSWERED_KERNEL = ("Not answered yet: replace the two stub lines inside the string with your OpenCL C "
                       "lines, then run this cell again.")


@dataclasses.dataclass(frozen=True)
class Gap:
    op: str
    stage: str
    first: str       # text of the gap's first line (unique in the kernel file)
    last: str        # text of the gap's last line (the first match after ``first``)
    task: str        # what the gap must do, one sentence
    cases: tuple     # (label, args function) pairs; each label names what the shape exercises
    hints: dict = dataclasses.field(default_factory=dict)  # label -> where to look when it fails

    def _lines(self):
        src = kernel_source(_stage(self.op, self.stage).kernel).splitlines()
        starts = [i for i, ln in enumerate(src) if self.first in ln]
        if len(starts) != 1:
            raise RuntimeError(f"gap start {self.first!r} found {len(starts)} times in the kernel")
        end = next(i for i in range(starts[0], len(src)) if self.last in src[i])
        return src, starts[0], end

    def show(self) -> Source:
        """The stage's kernel with the gap's lines replaced by a marked gap."""
        src, a, b = self._lines()
        indent = src[a][: len(src[a]) - len(src[a].lstrip())]
        marked = src[:a] + [f"{indent}/* ====== the gap: {self.task} ====== */"] + src[b + 1:]
        return Source("\n".join(marked))

    def source(self, code: str) -> str:
        src, a, b = self._lines()
        return "\n".join(src[:a] + code.strip("\n").splitlines() + src[b + 1:]) + "\n"

    def check(self, code: str, ctx=None) -> bool:
        """Run the kernel with ``code`` in the gap over every case, guarded; print one verdict."""
        if "NotImplementedError" in code or "YOUR CODE HERE" in code:
            print(NOT_ANSWERED_KERNEL)
            return False
        text = self.source(code)
        base = _stage(self.op, self.stage)
        trial = dataclasses.replace(base, source=lambda jit: text, fallback=None)
        with _substituted(base, trial):
            for label, make_args in self.cases:
                hint = self.hints.get(label, "")
                try:
                    plan = plan_stage(self.op, base.name, ctx=ctx, guard=True, **make_args())
                    plan.enqueue()
                    plan.queue.finish()
                    got = plan.outputs()
                    plan.check_guards()
                    if any(np.isnan(v).any() for v in got.values()):
                        return _verdict(False, "", f"{label}: NaN in the result. The guard zones around "
                                        f"each input hold NaN, so your code read outside a tensor: an index "
                                        f"runs past an end, or a bounds check is missing or lets one position "
                                        f"too many through. {hint}")
                    check_plan(plan)
                except KernelBuildError as err:
                    text_, _, log = str(err).partition("Compiler log:")
                    where = [ln for ln in text_.splitlines()[1:] if ln.strip()][:6]
                    errors = [ln.strip() for ln in log.splitlines() if "error" in ln][:3]
                    return _verdict(False, "", "your code does not compile:\n" + "\n".join(where + errors))
                except GuardViolation as err:
                    return _verdict(False, "", f"{label}: your code wrote outside a tensor ({err}). {hint}")
                except MismatchError:
                    return _verdict(False, "", f"{label}: the kernel runs, but its values differ from the "
                                    f"reference. {hint}")
        return _verdict(True, f"{len(self.cases)} shapes ({'; '.join(lbl for lbl, _ in self.cases)}) match "
                        f"the reference with every guard zone intact", "")


def _stage(op, name):
    return get_stage(op, name)


@contextmanager
def _substituted(base, trial):
    """The trial stage in the registry in place of ``base``, only while the check runs."""
    stages = REGISTRY[base.op]
    i = stages.index(base)
    stages[i] = trial
    try:
        yield
    finally:
        stages[i] = base


def _dgrad(*shape):
    def make():
        from ..ops.conv_dgrad import random_problem_args
        return random_problem_args(*shape, seed=len(shape))
    return make


def _fwd(*shape):
    def make():
        from ..ops.conv_forward import random_problem_args
        return random_problem_args(*shape, seed=3)
    return make


def _bn(*shape, offset=0.0):
    def make():
        from ..ops.batchnorm_forward import random_args
        return random_args(*shape, offset=offset, seed=5)
    return make


# (N, C, H, W, K, kernel, stride, padding, activation)
_DGRAD_CASES = (
    ("3x3, stride 1, padding 1", _dgrad(2, 5, 7, 6, 9, 3, 1, 1, "relu")),
    ("3x3, stride 1, no padding", _dgrad(1, 4, 6, 7, 5, 3, 1, 0, "none")),
    ("3x3, stride 2, padding 1", _dgrad(1, 3, 9, 8, 6, 3, 2, 1, "tanh")),
    ("5x5, stride 3, padding 2", _dgrad(1, 2, 11, 10, 3, 5, 3, 2, "none")),
    ("1x1 kernel on a 1x1 input", _dgrad(1, 3, 1, 1, 4, 1, 1, 0, "none")),
)
_STRIDE_HINT = {"3x3, stride 2, padding 1": "Stride 1 works: what if h + PAD - r is not a multiple of STRIDE?",
                "5x5, stride 3, padding 2": "Stride 1 works: what if h + PAD - r is not a multiple of STRIDE?",
                "3x3, stride 1, no padding": "Look at the last rows and columns: which oh, ow exist?"}

GAPS = {
    # chapter 02: the checks of the naive kernel (which output positions exist)
    "naive_checks": Gap(
        "conv_dgrad", "naive", "const int oh_s = h + PAD - r;", "if (ow >= OW) continue;",
        "for weight (r, s), find (oh, ow) and skip the offsets whose output does not exist",
        _DGRAD_CASES, _STRIDE_HINT),
    # chapter 03: the table of valid offsets, built once per work-item
    "memo_table": Gap(
        "conv_dgrad", "memoized_bounds", "const int oh_s = h + PAD - r;", "valid[r][s] = row_ok",
        "fill valid[r][s] for every (r, s): does output ((h+PAD-r)/STRIDE, (x+PAD-s)/STRIDE) exist?",
        _DGRAD_CASES, _STRIDE_HINT),
    # chapter 04: the 3x3 weights through one 8-wide load and one scalar
    "weight_load": Gap(
        "conv_dgrad", "weight_vec", "const weights3x3 wk = load_weights3x3(", "const weights3x3 wk = load_weights3x3(",
        "declare wk: the 9 weights of (c, k), loaded with load_weights3x3 from kernels/common/dgrad.h",
        _DGRAD_CASES[:3], {lbl: "Which float of w is the first weight of block (c, k) in IOHW order?"
                           for lbl, _ in _DGRAD_CASES}),
    # chapter 05: when may a work-item read its three dy columns as one 3-wide load?
    "inside_test": Gap(
        "conv_dgrad", "input_vec", "const bool inside = x + PAD - 2 >= 0", "const bool inside = x + PAD - 2 >= 0",
        "declare `const bool inside`: true only where columns x+PAD-2 .. x+PAD all lie inside 0 .. OW-1",
        _DGRAD_CASES[:3] + (("3x3, stride 1, a 2-wide input", _dgrad(1, 2, 5, 2, 3, 3, 1, 1, "none")),),
        {"3x3, stride 1, padding 1": "Check both ends of the window: the leftmost and rightmost columns.",
         "3x3, stride 1, no padding": "Check both ends of the window: the leftmost and rightmost columns.",
         "3x3, stride 1, a 2-wide input": "Check both ends of the window: the leftmost and rightmost columns."}),
    # chapter 12: the zero padding of Winograd's input tiles
    "wino_tile_padding": Gap(
        "conv_forward", "wino_naive", "const float d = (h >= 0 && h < IH", "? GRAD_IN(x, xy,",
        "declare `const float d`: the tile's input value at (h, x_), or 0 where (h, x_) lies in the padding",
        (("3x3, padding 1", _fwd(1, 3, 7, 6, 4, 3, 1, 1)), ("3x3, no padding", _fwd(2, 2, 6, 9, 3, 3, 1, 0)),
         ("3x3, padding 2, odd sizes", _fwd(1, 5, 5, 7, 2, 3, 1, 2))),
        {"3x3, no padding": "Tiles at the right and bottom edges can stick out of the input too."}),
    # chapter 14: the variance of the naive batch-norm kernel
    "bn_variance": Gap(
        "batchnorm_forward", "naive", "float m2 = 0.0f;", "const float inv_std =",
        "compute m2 (the sum of squared deviations from the mean) and inv_std = 1/sqrt(m2/count + eps)",
        (("N=2, C=3, 5x5, data around 0", _bn(2, 3, 5, 5)), ("N=1, C=2, 1x2", _bn(1, 2, 1, 2)),
         ("N=3, C=2, 4x4, data around 1000", _bn(3, 2, 4, 4, offset=1000.0))),
        {"N=3, C=2, 4x4, data around 1000": "Right near 0, wrong near 1000: is there a difference of "
         "two large, nearly equal numbers?"}),
}


def kernel_gap(name: str) -> Gap:
    if name not in GAPS:
        raise ValueError(f"no kernel exercise {name!r}; there are: {', '.join(GAPS)}")
    return GAPS[name]
