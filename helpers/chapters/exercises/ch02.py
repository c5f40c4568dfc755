"""Chapter 02's exercise checks (the naive kernel)."""
from __future__ import annotations

from .verdict import _verdict, exercise, _compare


@exercise
def check_flops(answer_fn) -> bool:
    """Chapter 02: FLOPs of the input gradient for (N, C, H, W, K, R, S, stride, padding)."""
    from ...ops.reference import output_size
    # the last case has R != S and H != W, so swapping the kernel's or the image's two sides is caught
    for n, c, h, w, k, r, s, st, p in [(1, 3, 8, 8, 4, 3, 3, 1, 1), (2, 16, 7, 5, 32, 5, 5, 2, 2),
                                       (1, 2, 9, 6, 3, 3, 1, 2, 1)]:
        oh, ow = output_size(h, r, st, p), output_size(w, s, st, p)
        want = 2 * n * k * oh * ow * c * r * s
        got = answer_fn(n, c, h, w, k, r, s, st, p)
        if got != want:
            why = ("half the count: a multiply-add is 2 FLOPs" if got * 2 == want else
                   "OH comes from H with the kernel's height R, OW from W with its width S"
                   if got == 2 * n * k * output_size(h, s, st, p) * output_size(w, r, st, p) * c * r * s else
                   "the work follows the output positions (OH, OW), not the input's H and W"
                   if got == 2 * n * k * h * w * c * r * s else
                   f"{_compare(got, want)}; one multiply-add per (output position, weight) pair")
            return _verdict(False, "", f"for N={n} C={c} {h}x{w} K={k} {r}x{s} stride {st} pad {p} you "
                            f"give {got}: {why}")
    return _verdict(True, "2·N·K·OH·OW·C·R·S: one multiply and one add per (output, weight) pair", "")
