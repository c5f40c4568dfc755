"""Chapter 16's exercise check (convolutions of any shape): a 3-D convolution as a sum of 2-D ones,
naming the mistake made by what the whole answer does. The chapter's kernel exercise (groups and
dilation in the input gradient's kernel) is a gap of helpers/chapters/kernel_exercises.py."""
from __future__ import annotations

import numpy as np

from .verdict import _verdict, exercise


def _conv3d(x, w, stride, padding):
    from ...ops.reference import conv_forward_nd
    return conv_forward_nd(x, w, stride, padding)


TWIST = 0.375


def _twisted(w):
    """The weights the check's conv2d convolves with in place of the slice it is given: the slice
    plus TWIST times the slice turned round (a 2-D convolution all the same, so every correct way of
    building the 3-D result from conv2d's results gives the 3-D convolution with these weights,
    and a result computed any other way gives the plain one). Works on a 2-D slice and a 3-D weight."""
    return w + TWIST * w[..., ::-1, ::-1]


class _Conv2d:
    """The 2-D convolution a learner's 3-D answer may call: refuses anything but 2-D, counts, and
    convolves with ``_twisted`` weights, so that only a result built from its results matches.
    ``answer``: the closed answer, whose references this convolution opens while it runs."""
    def __init__(self, c, k, kernel2, answer):
        self.calls, self.shape, self.answer = 0, (c, k, *kernel2), answer

    def __call__(self, x, weight, stride=1, padding=0):
        from ...ops.reference import conv_forward_nd
        x, weight = np.asarray(x), np.asarray(weight)
        if x.ndim != 4 or weight.ndim != 4:
            raise ValueError(f"conv2d takes x (N, C, H, W) and weight (C, K, R, S); got {x.shape} and {weight.shape}")
        if weight.shape != self.shape:
            raise _NotATap(weight.shape)
        self.calls += 1
        with self.answer.opened():
            return conv_forward_nd(x, _twisted(weight), stride, padding)


class _NotATap(Exception):
    pass


def _by_planes(x, w, stride, padding, plane):
    """A model of an answer: output plane o adds, for each tap t, the 2-D convolution of the input
    plane ``plane(o, t, stride, pad, T)`` (skipped outside the input) with the weight's slice t."""
    from ...ops.reference import conv_forward_nd, output_sizes
    out = output_sizes(x.shape[2:], w.shape[2:], stride, padding)
    parts = []
    for o in range(out[0]):
        acc = np.zeros((x.shape[0], w.shape[1], *out[1:]))
        for t in range(w.shape[2]):
            i = plane(o, t, stride[0], padding[0], w.shape[2])
            if (0 <= i or plane is _wraps) and i < x.shape[2]:     # _wraps: a negative index read as NumPy does
                acc = acc + conv_forward_nd(x[:, :, i], w[:, :, t], stride[1:], padding[1:])
        parts.append(acc)
    return np.stack(parts, axis=2)


def _wraps(o, t, s, p, T):
    return o * s - p + t


def _answers_like(answer_fn, plane, data) -> bool:
    """Whether the answer gives what the model of a mistake gives, on every case."""
    for x, w, stride, padding in data:
        model = _by_planes(x, _twisted(w), stride, padding, plane)
        try:
            got = np.asarray(answer_fn(x, w, stride, padding, _Conv2d(w.shape[0], w.shape[1], w.shape[3:], answer_fn)))
        except Exception:     # noqa: BLE001 (an answer that fails elsewhere is not this mistake)
            return False
        if got.shape != model.shape or not np.allclose(got, model):
            return False
    return True


@exercise(closes=("ops.reference:conv_forward_nd", "ops.reference:conv2d_forward", "ops.reference:_forward_by_recursion",
                  "chapters.any_shape:by_columns", "chapters.any_shape:by_implicit_gemm",
                  "chapters.any_shape:by_recursion", "chapters.winograd:direct_conv2d", "chapters.winograd:conv2d",
                  "runner:run_stage", "runner:plan_stage", "runner:prepare", "stages.validate:check_stage",
                  "chapters.exercises.ch16:_conv3d", "chapters.exercises.ch16:_by_planes"))
def check_conv3d_by_2d(answer_fn) -> bool:
    """(x, w, stride, padding, conv2d) -> the 3-D convolution (N, K, OD, OH, OW), written with the
    given 2-D convolution ``conv2d(x2, w2, stride=(sh, sw), padding=(ph, pw))`` only; stride and
    padding are (depth, height, width) tuples. The conv2d handed in is the check's own (_Conv2d): a
    2-D convolution, but not with the plain slice of the weight, so only a result built from what
    it returns matches (an answer that computes the 3-D result another way and calls conv2d for
    show is refused), and the course's convolutions are closed while the answer runs."""
    rng = np.random.default_rng(16)
    cases = [((2, 3, 5, 6, 7), (3, 2, 3, 3, 3), (1, 1, 1), (1, 1, 1)),
             ((1, 2, 7, 5, 5), (2, 3, 3, 3, 2), (2, 1, 2), (1, 0, 1)),
             ((1, 1, 6, 4, 4), (1, 2, 2, 1, 3), (2, 2, 1), (0, 0, 1)),
             ((2, 2, 4, 3, 3), (2, 1, 3, 1, 1), (1, 1, 1), (2, 0, 0))]
    data = [(rng.standard_normal(xs), rng.standard_normal(ws), st, p) for xs, ws, st, p in cases]
    mistakes = [
        ("a negative input plane index wraps around to the last planes in NumPy: skip the taps whose input "
         "plane lies in the depth padding", _wraps),
        ("the depth stride is missing: output plane o's window starts at o*stride - padding",
         lambda o, t, s, p, T: o - p + t),
        ("the depth padding is missing: output plane o's first tap reads plane o*stride - padding",
         lambda o, t, s, p, T: o * s + t),
        ("the taps are read from the far end: a convolution layer correlates, tap t pairs with plane "
         "o*stride - padding + t", lambda o, t, s, p, T: o * s - p + (T - 1 - t)),
    ]
    for x, w, stride, padding in data:
        conv2d = _Conv2d(w.shape[0], w.shape[1], w.shape[3:], answer_fn)
        case = f"x {x.shape}, weight {w.shape}, stride {stride}, padding {padding}"
        try:
            got = np.asarray(answer_fn(x, w, stride, padding, conv2d), dtype=np.float64)
        except _NotATap as err:
            return _verdict(False, "", f"{case}: conv2d was given a weight of shape {err.args[0]}: pass it one depth "
                            f"tap of the 3-D weight, w[:, :, t], of shape {tuple(conv2d.shape)}")
        except IndexError as err:
            return _verdict(False, "", f"{case}: your code read past the input's last plane ({err}): skip the taps "
                            f"whose input plane lies in the depth padding, at either end")
        want = _conv3d(x, _twisted(w), stride, padding)
        if conv2d.calls == 0:
            return _verdict(False, "", f"{case}: conv2d was never called: build the 3-D result from 2-D convolutions")
        if got.shape != want.shape:
            return _verdict(False, "", f"{case}: your result has shape {got.shape}; a 3-D convolution of this input "
                            f"has as many output planes as depth windows fit (N, K, OD, OH, OW)")
        if not np.allclose(got, want, rtol=1e-9, atol=1e-9):
            if np.allclose(got, _conv3d(x, w, stride, padding), rtol=1e-9, atol=1e-9):
                return _verdict(False, "", f"{case}: your result is the 3-D convolution, but it was not built from "
                                f"conv2d's results (the check's conv2d is a 2-D convolution of its own, and only a "
                                f"sum of what it returns matches): build each output plane from conv2d calls")
            why = next((msg for msg, plane in mistakes if _answers_like(answer_fn, plane, data)), None)
            return _verdict(False, "", f"{case}: " + (why or "some output planes differ: which input plane does "
                                                              "each (output plane, tap) pair read?"))
    return _verdict(True, "each output plane is the sum, over the depth taps that land inside the input, of "
                    "2-D convolutions of one input plane with one slice of the weight", "")
