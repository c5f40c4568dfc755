"""Winograd minimal filtering F(m, r): the transform matrices derived with exact fractions.

    AT, G, BT = matrices(2, 3)          # F(2,3): 2 outputs of a 3-tap filter from 4 inputs
    y = AT @ ((G @ g) * (BT @ d))       # = correlate(d, g): 4 multiplications instead of 6

Derivation (Toom-Cook). Take alpha = m + r - 1 points: alpha - 1 finite ones a_j and "infinity".
The product p(x) = g(x) h(x) of a polynomial g of degree r-1 and h of degree m-1 has degree
alpha - 1, so it is fixed by its values at the finite points and its leading coefficient (its
"value at infinity"): p = C [(E_r g) * (E_m h)], with E_n the alpha x n evaluation matrix (rows
(1, a, a^2, ...), and (0, ..., 0, 1) for infinity) and C the interpolation matrix (column j: the
coefficients of the Lagrange polynomial L_j(x) = prod_{l!=j} (x - a_l) / f_j with
f_j = prod_{l!=j} (a_j - a_l); last column: M(x) = prod_l (x - a_l)).

The filter's *correlation* y_i = sum_k d_{i+k} g_k is the transpose of that product: sum_j d_j p_j
= sum_{i,k} d_{i+k} h_i g_k = sum_i h_i y_i, so y = E_m^T [(E_r g) * (C^T d)]. That gives
AT = E_m^T, G = E_r, BT = C^T; the divisions by f_j are moved from BT into G (each row of G is
scaled by 1/f_j and the same row of BT by f_j), so that BT holds small integers. Everything is
computed with fractions.Fraction, so the identity is checked exactly, not to rounding.

Two dimensions: Y = AT [(G g G^T) * (BT d B)] A, an m x m output tile from an alpha x alpha input
tile with alpha^2 multiplications instead of m^2 r^2.
"""
from __future__ import annotations

from fractions import Fraction
from itertools import product

import numpy as np

DEFAULT_POINTS = {  # the finite points, in the order the course uses
    (2, 3): (0, 1, -1),
    (4, 3): (0, 1, -1, 2, -2),
}
# The points of the F(4x4,3x3) kernels (chapter 12a): 1/2 and -2 instead of 2 and -2. Their
# transforms hold smaller numbers where it matters: the float32 error of the whole convolution
# is about 2-3x smaller than with (0, +-1, +-2) (chapter 12a measures it).
KERNEL_POINTS = {
    (2, 3): DEFAULT_POINTS[(2, 3)],
    (4, 3): (0, 1, -1, Fraction(1, 2), -2),
}
# The weight gradient's F(3x3,4x4) (conv_wgrad stage 04): 3 outputs (the filter taps) of a 4-tap
# "filter" (a 4x4 tile of dy) from 6 inputs (a 6x6 tile of x). The same six points as F(4x4,3x3),
# so its BT, which depends only on the points, is F(4x4,3x3)'s: the x transform is the forward
# pass's input transform, and winograd_f34.h holds only G (6x4) and AT (3x6).
KERNEL_POINTS[(3, 4)] = KERNEL_POINTS[(4, 3)]


def _poly_mul(a: list, b: list) -> list:
    out = [Fraction(0)] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i + j] += x * y
    return out


def _poly_from_roots(roots) -> list:
    """Coefficients (lowest degree first) of prod (x - root)."""
    p = [Fraction(1)]
    for a in roots:
        p = _poly_mul(p, [-Fraction(a), Fraction(1)])
    return p


def matrices(m: int, r: int, points=None):
    """(AT, G, BT) of F(m, r) as lists of rows of Fractions: m x alpha, alpha x r, alpha x alpha."""
    if m < 1 or r < 1:
        raise ValueError(f"F(m, r) needs m >= 1 and r >= 1, got m={m}, r={r}")
    alpha = m + r - 1
    pts = [Fraction(p) for p in (points if points is not None else DEFAULT_POINTS[(m, r)])]
    if len(pts) != alpha - 1:
        raise ValueError(f"F({m},{r}) needs {alpha - 1} finite points (plus infinity), got {len(pts)}")
    if len(set(pts)) != len(pts):
        raise ValueError(f"the points must be distinct, got {points}")

    def evaluation(n):  # alpha x n: row j evaluates a polynomial of n coefficients at point j
        rows = [[a ** k for k in range(n)] for a in pts]
        rows.append([Fraction(int(k == n - 1)) for k in range(n)])  # infinity: the leading coefficient
        return rows

    f = [Fraction(1)] * (alpha - 1)
    for j, a in enumerate(pts):
        for l, b in enumerate(pts):
            if l != j:
                f[j] *= a - b
    # C diag(f): column j = coefficients of prod_{l!=j}(x - a_l); last column = M(x). BT = its transpose.
    bt = [_poly_from_roots([b for l, b in enumerate(pts) if l != j]) + [Fraction(0)] for j in range(alpha - 1)]
    bt.append(_poly_from_roots(pts))
    g = evaluation(r)
    g = [[x / f[j] for x in row] for j, row in enumerate(g[:-1])] + [g[-1]]
    # sign convention: make each finite row of G start with a non-negative entry (flip BT's row too)
    for j in range(alpha - 1):
        if f[j] < 0:
            g[j] = [-x for x in g[j]]
            bt[j] = [-x for x in bt[j]]
    at = [list(col) for col in zip(*evaluation(m))]  # E_m^T
    return at, g, bt


def verify(m: int, r: int, at, g, bt) -> bool:
    """Exact check of y = AT [(G g) * (BT d)] against the correlation, on every pair of basis vectors."""
    alpha = m + r - 1
    for jd, kg in product(range(alpha), range(r)):  # the formula is bilinear: basis vectors suffice
        gu = [g[i][kg] for i in range(alpha)]
        dv = [bt[i][jd] for i in range(alpha)]
        y = [sum(at[i][t] * gu[t] * dv[t] for t in range(alpha)) for i in range(m)]
        want = [Fraction(int(jd == i + kg)) for i in range(m)]  # d_{i+k} g_k with d = e_jd, g = e_kg
        if y != want:
            return False
    return True


def as_array(mat, dtype=np.float64) -> np.ndarray:
    return np.array([[float(x) for x in row] for row in mat], dtype=dtype)


def show(mat) -> str:
    """A matrix of fractions as text, one row a line."""
    cells = [[str(x) for x in row] for row in mat]
    width = max(len(c) for row in cells for c in row)
    return "\n".join("[" + " ".join(c.rjust(width) for c in row) + "]" for row in cells)


# ---------------------------------------------------------------------------------------------
# NumPy model of Winograd convolution (for the accuracy study; the kernels are the real thing)

def conv2d(x: np.ndarray, w: np.ndarray, padding: int = 0, m: int = 2, dtype=np.float32, points=None):
    """Stride-1 3x3 (r x r) forward convolution through F(m x m, r x r), every step in ``dtype``.

    x: (N,C,H,W); w: (C,K,r,r) IOHW. Returns (N,K,OH,OW) in ``dtype``: the same arithmetic a
    kernel does (transforms, sum over channels, inverse transform), so its rounding error too.
    """
    n, c, h, wd = x.shape
    _, k, r, _ = w.shape
    at, g, bt = (as_array(a, dtype) for a in matrices(m, r, points))
    alpha = m + r - 1
    oh, ow = h + 2 * padding - r + 1, wd + 2 * padding - r + 1
    th, tw = -(-oh // m), -(-ow // m)
    # zero-padded input large enough for whole tiles
    xp = np.zeros((n, c, th * m + r - 1, tw * m + r - 1), dtype)
    xp[:, :, padding:padding + h, padding:padding + wd] = x[:, :, :th * m + r - 1 - padding, :tw * m + r - 1 - padding]
    tiles = np.lib.stride_tricks.sliding_window_view(xp, (alpha, alpha), axis=(2, 3))[:, :, ::m, ::m]
    v = np.einsum("ai,ncxyij,bj->abncxy", bt, tiles, bt, optimize=True).astype(dtype)      # BT d B
    u = np.einsum("ai,ckij,bj->abck", g, w.astype(dtype), g, optimize=True).astype(dtype)   # G g GT
    mm = np.zeros((alpha, alpha, n, k, th, tw), dtype)                                   # sum over c,
    for ci in range(c):                                                                   # one at a time
        mm += u[:, :, None, ci, :, None, None] * v[:, :, :, ci, None, :, :]
    y = np.einsum("ia,abnkxy,jb->nkxiyj", at, mm, at, optimize=True).astype(dtype)       # AT M A
    return y.reshape(n, k, th * m, tw * m)[:, :, :oh, :ow]


def direct_conv2d(x: np.ndarray, w: np.ndarray, padding: int = 0, dtype=np.float32) -> np.ndarray:
    """Stride-1 direct convolution summing one (c, r, s) term at a time in ``dtype``, as the
    direct kernel does (one running sum per output)."""
    n, c, h, wd = x.shape
    _, k, r, s = w.shape
    oh, ow = h + 2 * padding - r + 1, wd + 2 * padding - s + 1
    xp = np.pad(x.astype(dtype), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    y = np.zeros((n, k, oh, ow), dtype)
    wd_ = w.astype(dtype)
    for ci in range(c):
        for i in range(r):
            for j in range(s):
                y += xp[:, ci:ci + 1, i:i + oh, j:j + ow] * wd_[ci, :, i, j][None, :, None, None]
    return y


def layer_tiles(lay: dict, m: int) -> int:
    """The m x m output tiles that cover a 3x3, stride-1, padding-1 layer (``lay`` from
    helpers.ops.layers: its output is n x h x w): the tiles a Winograd stage transforms and
    multiplies, those overhanging the right or bottom edge included (launch.winograd.wino_view's P)."""
    return lay["n"] * -(-lay["h"] // m) * -(-lay["w"] // m)


def accuracy(channels=(1, 4, 16, 64, 256, 1024), size: int = 16, k: int = 8, seed: int = 0) -> list[dict]:
    """Float32 error of direct, F(2x2,3x3) and F(4x4,3x3) against a float64 reference, per C:
    max |error| / max |output| over the whole output (a normwise relative error)."""
    from ..ops.reference import conv2d_forward
    rows = []
    for c in channels:
        rng = np.random.default_rng(seed + c)
        x = rng.standard_normal((1, c, size, size)).astype(np.float32)
        w = (rng.standard_normal((c, k, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        exact = conv2d_forward(x, w, 1, 1)
        scale = np.abs(exact).max()
        row = {"C": c}
        for name, y in (("direct", direct_conv2d(x, w, 1)), ("F(2x2,3x3)", conv2d(x, w, 1, 2)),
                        ("F(4x4,3x3)", conv2d(x, w, 1, 4))):
            row[name] = float(np.abs(y.astype(np.float64) - exact).max() / scale)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# Generated device code: kernels/common/winograd_f23.h and winograd_f43.h

HEADERS = {(2, 3): "winograd_f23.h", (4, 3): "winograd_f43.h", (3, 4): "winograd_f34.h"}


def _literal(x: Fraction) -> str:
    """A float literal for a coefficient: exact for integers and powers of two, else a division the
    compiler rounds once (F(4x4)'s filter transform holds thirds and fifteenths)."""
    v = float(x)
    if Fraction(v) != x:
        return f"({x.numerator}.0f / {x.denominator}.0f)"
    return f"{v!r}f"


def _expr(row, names) -> str:
    terms = []
    for c, name in zip(row, names):
        if c == 0:
            continue
        if c == 1:
            terms.append(("+", name))
        elif c == -1:
            terms.append(("-", name))
        else:
            sign = "-" if c < 0 else "+"
            terms.append((sign, f"{_literal(abs(c))} * {name}"))
    if not terms:
        return "0.0f"
    first = ("-" if terms[0][0] == "-" else "") + terms[0][1]
    return " ".join([first] + [f"{s} {t}" for s, t in terms[1:]])


def macro(name: str, mat) -> str:
    """A C macro applying ``mat`` to scalars: NAME(out0, ..., in0, ...) sets out_i = sum_j mat[i][j] in_j."""
    rows, cols = len(mat), len(mat[0])
    outs = [f"o{i}" for i in range(rows)]
    ins = [f"(i{j})" for j in range(cols)]
    body = " ".join(f"{o} = {_expr(row, ins)};" for o, row in zip(outs, mat))
    params = ", ".join(outs + [f"i{j}" for j in range(cols)])
    return f"#define {name}({params}) \\\n    do {{ {body} }} while (0)"


def table(name: str, mat) -> str:
    """A __constant table of ``mat``, row-major."""
    values = ", ".join(_literal(x) for row in mat for x in row)
    return f"__constant float {name}[{len(mat) * len(mat[0])}] = {{{values}}};"


def header_source(m: int = 2, r: int = 3) -> str:
    """The text of kernels/common/winograd_f{m}{r}.h, generated from matrices(m, r, KERNEL_POINTS)."""
    points = KERNEL_POINTS[(m, r)]
    at, g, bt = matrices(m, r, points)
    assert verify(m, r, at, g, bt)
    a = m + r - 1
    if (m, r) == (3, 4):
        return _wgrad_header(at, g, bt, points)
    guard = f"WINOGRAD_F{m}{r}_H"
    return "\n".join([
        f"// Winograd F({m}x{m},{r}x{r}) transforms. GENERATED by helpers/chapters/winograd.py (header_source);",
        "// do not edit: tests/test_winograd.py checks this file against the generator.",
        f"// BT ({a}x{a}), G ({a}x{r}), AT ({m}x{a}) come from the Toom-Cook derivation with points "
        f"{', '.join(map(str, points))}, infinity.",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        f"#define WINO_M {m}      // output tile",
        f"#define WINO_R {r}      // filter size",
        f"#define WINO_A {a}      // input tile: WINO_M + WINO_R - 1",
        "",
        "// Row-major tables: the naive stage multiplies by them one element at a time.",
        table("WINO_BT", bt),
        table("WINO_G", g),
        table("WINO_AT", at),
        "",
        "// The same matrices applied to scalars (o = matrix * i), for the stages that transform a",
        "// whole tile in registers: zero coefficients vanish, ones become additions.",
        macro("WINO_BT_APPLY", bt),
        macro("WINO_G_APPLY", g),
        macro("WINO_AT_APPLY", at),
        "",
        "#endif",
        "",
    ])


def _wgrad_header(at, g, bt, points) -> str:
    """winograd_f34.h: G and AT of F(3x3,4x4) under their own names (WINOW_*), so a kernel can
    include it beside winograd_f43.h, whose BT it shares (checked here)."""
    assert bt == matrices(4, 3, KERNEL_POINTS[(4, 3)])[2], "F(3,4) and F(4,3) must share BT"
    return "\n".join([
        "// Winograd F(3x3,4x4) for the weight gradient. GENERATED by helpers/chapters/winograd.py",
        "// (header_source); do not edit: tests/test_winograd.py checks this file against the generator.",
        "// 3x3 outputs (the taps of dw) from a 6x6 tile of x and a 4x4 tile of dy. Toom-Cook with points",
        f"// {', '.join(map(str, points))}, infinity: the points of winograd_f43.h, so BT (6x6, the x",
        "// transform) is that header's WINO_BT_APPLY; here G (6x4, the dy transform) and AT (3x6).",
        "#ifndef WINOGRAD_F34_H",
        "#define WINOGRAD_F34_H",
        "",
        macro("WINOW_G_APPLY", g),
        macro("WINOW_AT_APPLY", at),
        "",
        "#endif",
        "",
    ])


def write_headers() -> list[str]:
    """Regenerate every header of HEADERS; returns their paths."""
    from ..engine.kernels import COMMON
    paths = []
    for (m, r), name in HEADERS.items():
        (COMMON / name).write_text(header_source(m, r))
        paths.append(str(COMMON / name))
    return paths


if __name__ == "__main__":  # python -m helpers.chapters.winograd: regenerate the headers
    print("wrote", ", ".join(write_headers()))
