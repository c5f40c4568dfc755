"""Chapter 12's exercise checks (Winograd F(2x2,3x3)).

The F(2,3) check hands the learner's function values that hold no number: each is the expression
it was computed by (an input d_i, a filter tap g_j, a constant, or + - * / of two values). The
function can only combine them; the check then evaluates the returned expressions on random
numbers and counts, in the graph of the computation, the products of an input-derived value by a
filter-derived value (each product once, however often its result is used). Converting a value
to a number (float(), int(), a float array) is refused: there is no number to convert, so the
count cannot be escaped.
"""
from __future__ import annotations

import itertools
import numbers

import numpy as np

from .verdict import _verdict, exercise


class Escaped(TypeError):
    """A checked value was asked for a number (float(), int(), a float array)."""


class _Value:
    """One value of the learner's F(2,3): a leaf ("d", i) / ("g", j), a constant, or an operation
    of two values. ``d`` and ``g`` say whether it depends on the inputs and on the filter."""

    __slots__ = ("op", "args", "d", "g", "seq")
    _made = itertools.count()

    def __init__(self, op, args, d=False, g=False):
        self.op, self.args, self.d, self.g = op, args, d, g
        self.seq = next(_Value._made)        # creation order: the messages list products as written

    @staticmethod
    def _of(o):
        if isinstance(o, _Value):
            return o
        if isinstance(o, numbers.Real):
            return _Value("const", (o,))
        return NotImplemented

    def _bin(self, op, o, swap=False):
        o = _Value._of(o)
        if o is NotImplemented:
            return NotImplemented
        a, b = (o, self) if swap else (self, o)
        return _Value(op, (a, b), a.d or b.d, a.g or b.g)

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, swap=True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, swap=True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, swap=True)
    def __truediv__(self, o): return self._bin("/", o)
    def __rtruediv__(self, o): return self._bin("/", o, swap=True)
    def __neg__(self): return _Value("neg", (self,), self.d, self.g)
    def __pos__(self): return self

    def _refuse(self, *_):
        raise Escaped("the check counts your multiplications through the values it passes in, which hold no "
                      "number: keep d and g as they are (plain + - * /, or NumPy arrays of dtype=object)")
    __float__ = __int__ = __index__ = __complex__ = __bool__ = _refuse

    def __repr__(self):
        return _text(self)


def _text(v, depth=0) -> str:
    """The expression of a value, for the messages (d0, g1, (d0 - d2)*g0 ...)."""
    if depth > 6:
        return "..."
    if v.op in ("d", "g"):
        return f"{v.op}{v.args[0]}"
    if v.op == "const":
        c = v.args[0]
        return f"{c:g}" if isinstance(c, float) else str(c)
    if v.op == "neg":
        return f"-{_text(v.args[0], depth + 1)}"
    a, b = (_text(x, depth + 1) for x in v.args)
    if v.op in "+-":
        return f"({a} {v.op} {b})"
    return f"{a}{v.op}{b}"


def _nodes(outputs) -> list:
    """Every value the outputs were computed from, each once (shared results counted once)."""
    seen, order, stack = set(), [], list(outputs)
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        order.append(v)
        if v.op not in ("d", "g", "const"):
            stack.extend(v.args)
    return order


def _products(outputs) -> list:
    """The multiplications (or divisions) of an input-derived value by a filter-derived one."""
    return sorted((v for v in _nodes(outputs) if v.op in "*/" and len(v.args) == 2
                   and ((v.args[0].d and v.args[1].g) or (v.args[0].g and v.args[1].d))), key=lambda v: v.seq)


def _evaluate(v, d, g, memo) -> float:
    key = id(v)
    if key not in memo:
        if v.op == "d":
            memo[key] = float(d[v.args[0]])
        elif v.op == "g":
            memo[key] = float(g[v.args[0]])
        elif v.op == "const":
            memo[key] = float(v.args[0])
        elif v.op == "neg":
            memo[key] = -_evaluate(v.args[0], d, g, memo)
        else:
            a, b = (_evaluate(x, d, g, memo) for x in v.args)
            memo[key] = a + b if v.op == "+" else a - b if v.op == "-" else a * b if v.op == "*" else a / b
    return memo[key]


# the course's Toom-Cook construction gives B^T, G and A^T: the answer derives them
@exercise(closes=("chapters.winograd:matrices", "chapters.winograd:verify", "chapters.winograd:conv2d",
                  "chapters.winograd:as_array", "chapters.winograd:header_source", "chapters.winograd:macro",
                  "chapters.winograd:table"))
def check_winograd_1d(answer_fn) -> bool:
    """Chapter 12: (d of 4 inputs, g of 3 taps) -> the 2 outputs of F(2,3) with 4 multiplications
    of an input-derived value by a filter-derived value (constants such as 1/2 are free)."""
    rng = np.random.default_rng(12)
    td = np.array([_Value("d", (i,), d=True) for i in range(4)], dtype=object)
    tg = np.array([_Value("g", (j,), g=True) for j in range(3)], dtype=object)
    try:
        out = answer_fn(td, tg)
    except Escaped as err:
        return _verdict(False, "", str(err))
    outs = list(np.asarray(out, dtype=object).ravel())
    if len(outs) != 2:
        return _verdict(False, "", f"return the 2 outputs (y0, y1), got {len(outs)} values")
    for i, v in enumerate(outs):
        if not isinstance(v, _Value) or not (v.d and v.g):
            return _verdict(False, "", f"y{i} is not computed from both d and g (it is {v!r}): build both "
                            f"outputs from the values passed in")
    for _ in range(5):
        d, g = rng.standard_normal(4), rng.standard_normal(3)
        want = np.array([d[0] * g[0] + d[1] * g[1] + d[2] * g[2], d[1] * g[0] + d[2] * g[1] + d[3] * g[2]])
        memo = {}
        got = np.array([_evaluate(v, d, g, memo) for v in outs])
        if not np.allclose(got, want, rtol=1e-10, atol=1e-12):
            if np.allclose(got[::-1], want, rtol=1e-10, atol=1e-12):
                return _verdict(False, "", "y0 and y1 are swapped")
            bad = " and ".join(f"y{i}" for i in range(2) if not np.isclose(got[i], want[i], rtol=1e-10, atol=1e-12))
            return _verdict(False, "", f"{bad} wrong (y0 = d0 g0 + d1 g1 + d2 g2, y1 = d1 g0 + d2 g1 + d3 g2); "
                            f"check the signs and the halves in G g")
    products = _products(outs)
    named = ", ".join(_text(p) for p in products)
    if len(products) > 4:
        return _verdict(False, "", f"the values are right, but your function multiplies an input-derived value by "
                        f"a filter-derived value {len(products)} times: {named}. F(2,3) needs 4 (form B^T d and "
                        f"G g first, then multiply them element by element)")
    return _verdict(True, f"both outputs of F(2,3), with {len(products)} multiplications of an input-derived "
                    f"value by a filter-derived value", "")
