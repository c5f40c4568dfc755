"""Chapter 12's exercise checks (Winograd F(2x2,3x3))."""
from __future__ import annotations

import numpy as np

from .verdict import _verdict, exercise


class _Tracked:
    """A number that remembers whether it depends on the inputs d and on the filter g, and counts
    the multiplications of a d-value by a g-value (what F(2,3) saves)."""

    def __init__(self, v, d=False, g=False, counter=None):
        self.v, self.d, self.g, self.counter = float(v), d, g, counter

    def _wrap(self, o):
        return o if isinstance(o, _Tracked) else _Tracked(o, counter=self.counter)

    def _new(self, v, o):
        return _Tracked(v, self.d or o.d, self.g or o.g, self.counter)

    def __add__(self, o): o = self._wrap(o); return self._new(self.v + o.v, o)
    def __sub__(self, o): o = self._wrap(o); return self._new(self.v - o.v, o)
    def __rsub__(self, o): o = self._wrap(o); return o._new(o.v - self.v, self)
    def __truediv__(self, o): o = self._wrap(o); return self._new(self.v / o.v, o)
    def __neg__(self): return _Tracked(-self.v, self.d, self.g, self.counter)
    __radd__ = __add__

    def __mul__(self, o):
        o = self._wrap(o)
        if (self.d and o.g) or (self.g and o.d):
            self.counter[0] += 1
        return self._new(self.v * o.v, o)
    __rmul__ = __mul__

    def __float__(self): return self.v


@exercise
def check_winograd_1d(answer_fn) -> bool:
    """Chapter 12: (d of 4 inputs, g of 3 taps) -> the 2 outputs of F(2,3) with 4 multiplications
    of an input-derived value by a filter-derived value (constants such as 1/2 are free)."""
    rng = np.random.default_rng(12)
    for _ in range(5):
        d, g = rng.standard_normal(4), rng.standard_normal(3)
        want = np.array([d[0] * g[0] + d[1] * g[1] + d[2] * g[2], d[1] * g[0] + d[2] * g[1] + d[3] * g[2]])
        count = [0]
        td = np.array([_Tracked(v, d=True, counter=count) for v in d], dtype=object)
        tg = np.array([_Tracked(v, g=True, counter=count) for v in g], dtype=object)
        out = answer_fn(td, tg)
        got = np.array([float(v) for v in np.asarray(out, dtype=object).ravel()])
        if got.shape != (2,):
            return _verdict(False, "", f"return the 2 outputs (y0, y1), got {got.size} values")
        if not np.allclose(got, want, rtol=1e-10, atol=1e-12):
            if np.allclose(got[::-1], want, rtol=1e-10, atol=1e-12):
                return _verdict(False, "", "y0 and y1 are swapped")
            bad = " and ".join(f"y{i}" for i in range(2) if not np.isclose(got[i], want[i], rtol=1e-10, atol=1e-12))
            return _verdict(False, "", f"{bad} wrong (y0 = d0 g0 + d1 g1 + d2 g2, y1 = d1 g0 + d2 g1 + d3 g2); "
                            f"check the signs and the halves in G g")
        if count[0] > 4:
            return _verdict(False, "", f"the values are right, but you multiply input values by filter values "
                            f"{count[0]} times; F(2,3) needs 4 (form B^T d and G g first, then multiply them)")
    return _verdict(True, "both outputs of F(2,3), with 4 multiplications of inputs by filter values", "")
