"""Chapter 00's exercise checks (devices and timing)."""
from __future__ import annotations

import numpy as np

from .verdict import _verdict, exercise, _compare, named_mistake

CASES = [(64, 64, 56, 64, 3, 1, 1), (1, 512, 7, 512, 3, 1, 1), (8, 128, 56, 128, 3, 2, 1)]


def _parts(n, c, size, k, r, st, p, o=None):
    """FLOPs and minimal bytes of the input gradient; ``o`` overrides the output size (a mistake)."""
    from ...ops.reference import output_size
    o = output_size(size, r, st, p) if o is None else o
    return 2 * n * k * o * o * c * r * r, 4 * (n * k * o * o + c * k * r * r + n * c * size * size)


def _right(*a):
    flops, nbytes = _parts(*a)
    return flops / nbytes


MISTAKES = [
    ("half the FLOPs: a multiply-add is 2", lambda *a: _right(*a) / 2),
    ("4 times too many: count bytes (4 per float), not floats", lambda *a: _right(*a) * 4),
    ("the FLOPs of the stride-2 layer use the input's H x W positions; the multiply-adds follow the "
     "output gradient's OH x OW", lambda *a: _parts(*a, o=a[2])[0] / _parts(*a)[1]),
    ("the stride-2 layer's grad_output is counted as H x W; it has OH x OW positions",
     lambda *a: np.divide(*_parts(*a, o=a[2]))),
]


@exercise(closes=("runner:prepare", "runner:plan_stage", "ops.conv_dgrad:prepare", "ops.problem:Problem.bytes_moved",
                   "chapters.exercises.ch00:_parts", "chapters.exercises.ch00:_right"))
def check_intensity(answer_fn) -> bool:
    """Chapter 00: FLOPs per minimal byte of the input gradient of a layer (no activation)."""
    for n, c, size, k, r, st, p in CASES:
        want, got = _right(n, c, size, k, r, st, p), answer_fn(n, c, size, k, r, st, p)
        if not np.isclose(got, want, rtol=1e-6):
            why = named_mistake(answer_fn, CASES, MISTAKES) or (
                "the stride-2 layer differs: grad_output has OH x OW positions, the input H x W" if st == 2 else
                f"{_compare(got, want)}; FLOPs = 2·N·K·OH·OW·C·R·S, bytes = 4·(|dy| + |w| + |dx|)")
            return _verdict(False, "", f"for N={n} C={c} {size}x{size} K={k} {r}x{r} stride {st} you give "
                            f"{got:.4g}: {why}")
    return _verdict(True, "FLOPs divided by the bytes of grad_output, weights and grad_input", "")
