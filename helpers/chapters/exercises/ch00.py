"""Chapter 00's exercise checks (devices and timing)."""
from __future__ import annotations

import numpy as np

from .verdict import _verdict, exercise, _compare


@exercise
def check_intensity(answer_fn) -> bool:
    """Chapter 00: FLOPs per minimal byte of the input gradient of a layer (no activation)."""
    from ...ops.reference import output_size
    for n, c, size, k, r, st, p in [(64, 64, 56, 64, 3, 1, 1), (1, 512, 7, 512, 3, 1, 1), (8, 128, 56, 128, 3, 2, 1)]:
        o = output_size(size, r, st, p)
        flops = 2 * n * k * o * o * c * r * r
        nbytes = 4 * (n * k * o * o + c * k * r * r + n * c * size * size)
        want = flops / nbytes
        got = answer_fn(n, c, size, k, r, st, p)
        if not np.isclose(got, want, rtol=1e-6):
            ratio = got / want if want else float("inf")
            why = ("half the FLOPs: a multiply-add is 2" if np.isclose(ratio, 0.5) else
                   "4 times too many: count bytes (4 per float), not floats" if np.isclose(ratio, 4) else
                   "the stride-2 layer differs: grad_output has OH x OW positions, the input H x W" if st == 2 else
                   f"{_compare(got, want)}; FLOPs = 2·N·K·OH·OW·C·R·S, bytes = 4·(|dy| + |w| + |dx|)")
            return _verdict(False, "", f"for N={n} C={c} {size}x{size} K={k} {r}x{r} stride {st} you give "
                            f"{got:.4g}: {why}")
    return _verdict(True, "FLOPs divided by the bytes of grad_output, weights and grad_input", "")
