"""Chapter 12a's exercise checks (Winograd F(4x4,3x3))."""
from __future__ import annotations

from .verdict import _verdict, exercise, _compare


@exercise(closes=("chapters.winograd:layer_tiles", "launch.winograd:wino_view", "launch.winograd:wino_padded",
                   "launch.winograd:wino_blocks"))
def check_wino_products(answer_fn) -> bool:
    """Chapter 12a: (n, c, h, w, k, m) -> multiplications of the products step of Winograd
    F(m x m, 3 x 3) over a layer (3x3 kernel, stride 1, padding 1, so the output is h x w): each
    of the n * ceil(h/m) * ceil(w/m) tiles takes (m + 2)^2 points, each a product over c input
    and k output channels."""
    shapes = [(1, 64, 56, 56, 64), (2, 3, 14, 14, 5), (1, 4, 7, 9, 2), (3, 2, 1, 1, 1), (1, 8, 28, 13, 16)]
    for n, c, h, w, k in shapes:
        for m in (2, 4):
            tiles = n * -(-h // m) * -(-w // m)
            want, got = tiles * (m + 2) ** 2 * c * k, answer_fn(n, c, h, w, k, m)
            if got == want:
                continue
            exact = n * h * w / (m * m) * (m + 2) ** 2 * c * k
            why = ("a tile that overhangs the right or bottom edge still costs all its products" if got == exact else
                   "count multiplications, not FLOPs" if got == 2 * want else
                   "a tile has (m + 2) x (m + 2) transformed points, not m x m" if got == tiles * m * m * c * k else
                   f"{_compare(got, want)}; how many tiles cover the layer, and how many points has each?")
            return _verdict(False, "", f"n={n} c={c} {h}x{w} k={k}, F({m}x{m}): {got:,}: {why}")
    return _verdict(True, "where m divides the layer F(4x4) takes 2.25/4 of F(2x2)'s multiplications; on 14x14 "
                    "and 7x7 its tiles overhang the edge and it saves less", "")
