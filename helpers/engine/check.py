"""The one checker: compare a kernel's result with the reference, with a tolerance scaled by the
magnitude of what was summed, print the first mismatches with their indices, and raise.

For a sum of n products the float32 rounding error is bounded by about eps * sqrt(n) times the
sum of the absolute values of the terms (random rounding; the worst case grows like n). So the
tolerance at each element is ``rtol * magnitude`` where ``magnitude`` is, by default, the
reference recomputed with absolute values (``|a|·|b|`` summed), and ``rtol`` grows with sqrt(n).
A kernel that drops or repeats one term of n misses by about magnitude/n, far beyond it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)


class MismatchError(AssertionError):
    """A kernel's result differs from the reference beyond the tolerance."""


def rtol_for_sum(n_terms: int, safety: float = 8.0) -> float:
    """Relative tolerance (against the sum of |terms|) for a float32 sum of n_terms products."""
    return safety * EPS32 * max(1.0, float(n_terms)) ** 0.5


# Tensor cores (chapter 13). Each mma.sync adds the products of MMA_K reduction indices to the
# fp32 accumulator; the products are exact (TF32, fp16 and bf16 operands have at most 11
# significant bits), but the hardware aligns and adds them with truncation, not rounding to
# nearest (Fasi, Higham, Mikaitis and Pranesh measured this on V100, T4 and A100), so errors do
# not cancel: a bound linear in the number of mma steps, not sqrt(n): 4 float32 epsilons per step
# (a constant chosen with margin over the errors the course measured, not a proven bound).
MMA_K = {"tf32": 8, "fp16": 16, "bf16": 16}
# A fused operand (dy times the activation's derivative, computed in float32) is rounded to the
# operand format before the mma; the reference multiplies exactly: relative 2^-p per term.
OPERAND_ROUNDING = {"tf32": 2.0**-11, "fp16": 2.0**-11, "bf16": 2.0**-8}


def rtol_mma(n_terms: int, precision: str, fused: bool) -> float:
    """Relative tolerance (against the sum of |terms|) for a sum of n_terms products on tensor
    cores in ``precision``, against a reference computed from the operands rounded as the stage
    rounds them (TF32: helpers/engine/tensor.py to_tf32; fp16, bf16: on upload); ``fused``: the
    operands carry one more rounding each (a fused activation derivative)."""
    steps = -(-max(1, int(n_terms)) // MMA_K[precision])
    return max(rtol_for_sum(n_terms), 4 * EPS32 * steps) + (OPERAND_ROUNDING[precision] if fused else 0.0)


# Rounding a result to a reduced storage format moves it by at most half a unit in the last place:
# relative ``2^-p`` for a normal number (so at most that times the magnitude, |sum| <= sum of
# |terms|), and absolute half the subnormal spacing below the smallest normal number (fp16:
# |x| < 2^-14 = 6.1e-5 is stored in steps of 2^-24, so off by up to 2^-25 = 3e-8).
STORAGE_ROUNDING = {"fp32": (0.0, 0.0), "tf32": (0.0, 0.0), "fp16": (2.0**-11, 2.0**-25),
                    "bf16": (2.0**-8, 2.0**-134)}


def tolerance_stored(rtol: float, precision: str) -> tuple[float, float]:
    """(rtol, atol) of a stage that stores its tensors in ``precision``: the op's float32
    accumulation tolerance plus the output's own rounding. Inputs rounded on upload are not in
    it: the reference is computed from the rounded inputs (Problem.on_host), in float64. For a
    sum of n similar terms a dropped term still misses by about magnitude / n, beyond
    2^-11 + 2^-23·8·sqrt(n) while n is below about 2000 (the test grid's largest sum has 1200
    terms; tests/test_tensors.py plants a dropped term and checks that the grid catches it)."""
    relative, absolute = STORAGE_ROUNDING[precision]
    return rtol + relative, absolute


@dataclass
class CheckResult:
    name: str
    count: int
    max_error: float         # largest |actual - expected|
    worst_ratio: float       # largest error / tolerance (< 1 passes)
    path: str = ""           # the path the problem took (runner.path_taken), where a stage ran
    nonfinite: int = 0       # outputs that are NaN or inf exactly where the reference is
    note: str = ""           # what the inputs hold that explains them (runner.check_plan)

    @property
    def verdict(self) -> str:
        """A machine-independent statement (what notebooks print in a compared cell)."""
        text = f"{self.name}: all {self.count:,} values match the reference within tolerance"
        if self.nonfinite:
            text += (f" ({self.nonfinite:,} of them NaN or infinite, as in the reference"
                     + (f": {self.note}" if self.note else "") + ")")
        return text

    def __str__(self) -> str:
        return f"{self.verdict} (max |error| {self.max_error:.2e}, {self.worst_ratio:.2f} of the tolerance)"


def check_close(actual, expected, *, magnitude=None, rtol: float = 1e-5, atol: float = 0.0,
                name: str = "result", show: int = 5, verbose: bool = False) -> CheckResult:
    """Raise MismatchError unless ``|actual - expected| <= rtol * magnitude + atol`` everywhere.

    ``magnitude`` defaults to ``|expected|``; pass the reference computed on absolute values for
    sums (see the module's docstring). NaN or inf in ``actual`` fails, except where the reference
    holds the same non-finite value (a NaN or inf in the inputs reaches those outputs).
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        raise MismatchError(f"{name}: shape {actual.shape} differs from the reference's {expected.shape}")
    mag = np.abs(expected) if magnitude is None else np.asarray(magnitude, dtype=np.float64)
    # where the reference itself is NaN or infinite (a NaN or inf in the inputs reaches it), the
    # same non-finite value counts as a match; a NaN or inf anywhere else always fails
    got = actual.astype(np.float64)
    same = ~np.isfinite(expected) & ((np.isnan(expected) & np.isnan(got)) | (got == expected))
    with np.errstate(invalid="ignore"):       # inf - inf: NaN, which the test below counts as bad
        mag = np.where(same, 0.0, mag)
        tol = rtol * mag + atol + np.finfo(np.float32).tiny
        err = np.where(same, 0.0, np.abs(got - expected))
        bad = ~(err <= tol) | (~(np.isfinite(expected) & np.isfinite(got)) & ~same)  # NaN compares false
        ratio = np.where(bad, np.inf, err / tol)
    result = CheckResult(name, int(expected.size), float(np.nanmax(err)) if err.size else 0.0,
                         float(ratio.max()) if ratio.size else 0.0, nonfinite=int(same.sum()))
    if bad.any():
        idx = np.argwhere(bad)
        lines = [f"{name}: {len(idx):,} of {expected.size:,} values differ from the reference "
                 f"(rtol {rtol:.1e} of the magnitude):"]
        for i in idx[:show]:
            i = tuple(int(v) for v in i)
            lines.append(f"  at {i}: got {float(actual[i]):.7g}, expected {expected[i]:.7g}, "
                         f"|error| {err[i]:.3g} > tolerance {tol[i]:.3g}")
        if len(idx) > show:
            lines.append(f"  ... and {len(idx) - show:,} more")
        raise MismatchError("\n".join(lines))
    if verbose:
        print(result)
    return result
