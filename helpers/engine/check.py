"""The one checker: a kernel's result against the float64 reference, within two bounds derived
from how float32 sums round: one for each element, one for the result as a whole. A failure says
which bound failed and by how much, and lists the worst elements with their indices.

The error of a float32 sum. Every addition rounds: fl(a + b) = (a + b)(1 + d), |d| <= u = 2^-24
(eps/2, eps = 2^-23 the float32 epsilon). A sum of n terms x_1..x_n, added in any order (one
work-item's loop, slices added afterwards, a tree, a GEMM tile's partial products), is off by

    e = sum over the additions j of d_j * s_j          (s_j: the partial sum that addition formed)

plus the products' own roundings. The worst case, |e| <= (n - 1) u sum|x_i|, grows like n. Treat
the d_j as independent, mean-zero random variables (the probabilistic model of Higham and Mary,
SIAM J. Sci. Comput. 2019; sound for rounding to nearest on data without special structure):
then e is a sum of n independent terms, its standard deviation is u/sqrt(3) * sqrt(sum s_j^2),
and this is where sqrt(n) comes from.

Per element. |s_j| <= sum|x_i| for every j, so |e| stays within a few u sqrt(n) sum|x_i| for any
signs and any order. The tolerance at an element is ``rtol * magnitude + atol``: ``magnitude``
the reference recomputed on absolute values (sum |a||b|), rtol = 8 eps sqrt(n) (rtol_for_sum),
about 28 times that standard deviation at its largest. It holds element by element whatever the
data, so it stays. But it is blind to errors of the size of the value: for terms of random sign
|sum x_i| is about sqrt(sum x_i^2), about sum|x_i| / sqrt(n), so the tolerance is about 8 eps n
times the value, several per cent of it or more for sums of 100,000 terms (a weight gradient at
N32 56x56): an output scaled by 1.001, or one image of 64 left out of every sum, passes it
(tests/test_checker_at_size.py measures how far inside).

As a whole. The partial sums are rarely as large as sum|x_i|. Terms of random sign make them a
random walk, E s_j^2 = (j/n) sum x_i^2, so sum_j s_j^2 ~ (n/2) sum x_i^2 and the standard deviation
of e is u sqrt(n/6) sqrt(sum x_i^2) ~ 0.2 eps sqrt(n) |value| (the value's own mean square is sum
x_i^2). Terms of one sign make s_j ~ (j/n) value, sum s_j^2 ~ n value^2 / 3, a standard deviation
of u sqrt(n) |value| / 3 ~ 0.17 eps sqrt(n) |value|. Either way the error is eps sqrt(n) times the
value, not times the sum of |terms|. One element can be unlucky; over the M elements of an output
the errors are independent and the sum of their squares concentrates (relative spread sqrt(2/M)),
so the 2-norm of the error is a sharp statistic:

    ||actual - expected||_2 <= (eps (2 sqrt(n) + 8) S + atol sqrt(M)) (1 + 4 / sqrt(M))
    S = max(||expected||_2, ||magnitude||_2 / (2 sqrt(n)))      (norm_rtol_for_sum, few_values)

The factor 2 is ten times the random-walk estimate; it covers what the course's kernels add to one
rounding per addition. The 8 eps are the roundings a value carries whatever n: its products', the
store's, and above all Winograd's transforms, which add and subtract the inputs of a whole tile: a
weight gradient from a single tile (a 2x3 image) errs by about 0.7 eps of its tile magnitude, a
quarter of this bound. The last factor is for outputs of a few values, whose error is not averaged:
one value's error exceeds four standard deviations once in 16,000 draws, and the value it is
measured against may itself have cancelled (then S is the floor below). It is 5 for one value, 2
for 16 and 1.04 for 10,000, so it costs nothing at the sizes where this bound matters
(tests/test_check_bounds.py checks thousands of single float32 sums one by one).

tests/test_checker_at_size.py runs the stages of every op at sizes whose sums have 3,456 to 200,704
terms: sequential loops, split and tree reductions, GEMM tiles, batch-norm statistics and both
Winograd tile sizes stay below 0.2 of the bound (F(4x4) the largest). A relative error r fails
once r > eps (2 sqrt(n) + 8) S / ||expected||_2 (outputs of thousands of values): 1e-3 (an output
scaled by 1.001) fails for sums of up to 17 million terms where S = ||expected||_2, and of about 5
million where Winograd's tile magnitude makes S twice that (the weight gradient, below); a VGG-16
weight gradient at N32 224x224 sums 1.6 million. A missing group of terms (an image, a channel)
is an error of about |value| / sqrt(groups), far beyond; even one term of n, |value| / sqrt(n),
fails while n < 1 / (2 eps), 4 million.

Where the assumptions break, and what the bound does.
- Terms all positive: covered above (0.17); the per-element bound is tight for them too.
- Cancellation in some elements: a value that cancels to near zero errs like its neighbours (its
  partial sums were not small); its error is large relative to it, but it is one of M terms of
  ||e||_2 and S is set by the whole output.
- A reference near zero as a whole (data built so that every sum cancels): ||expected||_2 is no
  scale; the floor ||magnitude||_2 / (2 sqrt(n)) takes over. For terms of comparable size (rms
  of |term| at most 2.5 times their mean: products of normal data are 1.6, half of them zeroed by a
  ReLU 2.2), the random-walk error of a vanishing sum, 0.2 eps sqrt(n) sqrt(sum x_i^2), is at most
  0.5 eps sum|x_i|, within the floor's eps sum|x_i| (tests/test_check_bounds.py sums +a and -a
  shuffled). A sum that is zero because it has no terms (padding, zero inputs) has zero magnitude
  and zero error.
- Winograd's tile magnitudes (helpers/ops/conv_forward.py, conv_dgrad.py, conv_wgrad.py) are
  larger than the plain sum of |terms| (the transforms' error scales with the tile), so their floor
  is larger than ||expected||_2 (about twice on the weight gradient, more on thin layers) and S
  follows it. Why the tile, per element: F(m x m, 3x3) computes an m x m output tile as
  A^T [sum_c (G g_c G^T) . (B^T d_c B)] A from each channel's (m+2) x (m+2) input tile d_c. Each
  rounding in B^T d_c B is at most u times an entry of |B^T| |d_c| |B|, which is at most
  ||B||_inf^2 sum over the tile of |d_c|; multiplied by G g_c G^T (entries at most ||G||_inf^2
  max|g_c|) and carried through the output transform (absolute row sums of A^T), an output's error
  is at most c_m u sum_c (sum over its tile of |d_c|) max|g_c|, with c_m a constant of the points
  (small for F(2x2) and the course's F(4x4) points). That is the tile magnitude the ops compute,
  not the output's own window: an image corner's input-gradient value sums one tap per channel,
  yet its F(4x4) tile holds 6 x 6 values of dy' (padded by 2 - pad), and against its own window
  its error reached 0.93 of the bound on one held-out layer and passed it on another; against the
  tile it is 0.02 (tests/test_winograd.py), while a dropped tap still fails it.
- Statistics: an error in a channel's mean or variance (batch norm) moves every value of the
  channel together, by an amount set by the data's condition number kappa = mean|x| / std, not
  by the value. Such outputs (an op lists them in CONDITIONED) are measured against
  S = ||magnitude||_2, the magnitude carrying the (1 + kappa).
- Structured data breaks the random model for both bounds: terms all equal (a constant image)
  round the same way every time, and the error grows like n u; terms sorted so that the partial
  sums climb to sum|x_i| / 2 before cancelling pass the per-element bound only. The course checks
  random data.

Reduced precisions. A stage that stores fp16 or bf16 is checked against a reference computed from
its rounded inputs (Problem.on_host), so only its output's rounding is added: at most 2^-p of the
value for a normal number (p = 11, 8), deterministically, so at most 2^-p of the magnitude per
element and 2^-p ||value||_2 <= 2^-p S as a whole; below the smallest normal number, half the
subnormal spacing, ``atol`` per element and atol sqrt(M) as a whole (STORAGE_ROUNDING). So 1e-3
fails fp16 storage (2^-11 = 4.9e-4) but not bf16 (2^-8 = 3.9e-3): its own rounding is larger.

Tensor cores (rtol_mma, norm_rtol_mma). The products are exact; each mma step aligns and adds
them to the float32 accumulator with truncation, so a step's error has the sign of the partial
sum, between 0 and 1 ulp of it, and errors do not cancel: about 0.5 eps |s_t| per step, and for a
random-walk sum of T steps sum_t |s_t| ~ (2/3) T |value|, so the error is about 0.4 eps T |value|.
Per element, 4 eps T of the magnitude; as a whole, 4 eps T of S (ten times the estimate). A fused
operand (dy times the activation's derivative) rounded to the operand format before the mma adds
sum eta_i x_i, |eta_i| <= 2^-p independent: at most 2^-p sum|x_i|, the per-element term; its
standard deviation is at most 2^-p sqrt(sum x_i^2 / 3), 0.58 2^-p |value| for terms of random sign,
but up to 2.5 2^-p times S's floor (ReLU-masked products' sqrt(sum x_i^2) is 4.4 times
||magnitude|| / (2 sqrt(n))): 2 2^-p of S as a whole (NORM_OPERAND), which with the factor for
few values holds single values too (tests/test_check_bounds.py rounds ReLU-masked operands to TF32).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)
TINY = float(np.finfo(np.float32).tiny)


class MismatchError(AssertionError):
    """A kernel's result differs from the reference beyond the tolerance; ``result``: the
    CheckResult of the output that failed (both ratios), where the checker made one."""

    def __init__(self, message: str, result: CheckResult | None = None):
        super().__init__(message)
        self.result = result


def rtol_for_sum(n_terms: int, safety: float = 8.0) -> float:
    """Relative tolerance per element (against the sum of |terms|) for a float32 sum of n_terms."""
    return safety * EPS32 * max(1.0, float(n_terms)) ** 0.5


# The bound as a whole (docstring): 2 eps sqrt(n), ten times the random-walk estimate, plus 8 eps
# for the roundings a value carries whatever n (its products', Winograd's transforms', the store's).
NORM_SAFETY, NORM_FIXED = 2.0, 8.0


def norm_rtol_for_sum(n_terms: int) -> float:
    """Relative tolerance of the result as a whole (against its scale S, see the docstring) for
    float32 sums of n_terms."""
    return EPS32 * (NORM_SAFETY * max(1.0, float(n_terms)) ** 0.5 + NORM_FIXED)


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


def mma_steps(n_terms: int, precision: str) -> int:
    return -(-max(1, int(n_terms)) // MMA_K[precision])


def rtol_mma(n_terms: int, precision: str, fused: bool) -> float:
    """Relative tolerance (against the sum of |terms|) for a sum of n_terms products on tensor
    cores in ``precision``, against a reference computed from the operands rounded as the stage
    rounds them (TF32: helpers/engine/tensor.py to_tf32; fp16, bf16: on upload); ``fused``: the
    operands carry one more rounding each (a fused activation derivative)."""
    return (max(rtol_for_sum(n_terms), 4 * EPS32 * mma_steps(n_terms, precision))
            + (OPERAND_ROUNDING[precision] if fused else 0.0))


# A fused operand's rounding, as a whole: two units (docstring: its spread against S's floor).
NORM_OPERAND = 2.0


def norm_rtol_mma(n_terms: int, precision: str, fused: bool) -> float:
    """The same sums on tensor cores, as a whole (against the scale S): truncation is linear in the
    steps whatever the norm, so the step term is rtol_mma's; see the docstring."""
    return (max(norm_rtol_for_sum(n_terms), 4 * EPS32 * mma_steps(n_terms, precision))
            + (NORM_OPERAND * OPERAND_ROUNDING[precision] if fused else 0.0))


def few_values(size: int) -> float:
    """How much the bound as a whole widens for an output of ``size`` values (docstring)."""
    return 1.0 + 4.0 / math.sqrt(max(1, size))


# Rounding a result to a reduced storage format moves it by at most half a unit in the last place:
# relative ``2^-p`` for a normal number (so at most that times the magnitude, |sum| <= sum of
# |terms|), and absolute half the subnormal spacing below the smallest normal number (fp16:
# |x| < 2^-14 = 6.1e-5 is stored in steps of 2^-24, so off by up to 2^-25 = 3e-8).
STORAGE_ROUNDING = {"fp32": (0.0, 0.0), "tf32": (0.0, 0.0), "fp16": (2.0**-11, 2.0**-25),
                    "bf16": (2.0**-8, 2.0**-134)}


def tolerance_stored(rtol: float, precision: str) -> tuple[float, float]:
    """(rtol, atol) per element of a stage that stores its tensors in ``precision``: the op's
    float32 accumulation tolerance plus the output's own rounding. Inputs rounded on upload are not
    in it: the reference is computed from the rounded inputs (Problem.on_host), in float64."""
    relative, absolute = STORAGE_ROUNDING[precision]
    return rtol + relative, absolute


@dataclass(frozen=True)
class Tolerance:
    """What one output is checked to: per element ``|error| <= rtol * magnitude + atol``; as a
    whole ``||error||_2 <= (norm_rtol * S + atol * sqrt(size)) * few_values(size)`` (S: see the
    module's docstring;
    ``norm_rtol`` None checks per element only). ``terms``: the n of each sum (S's floor);
    ``conditioned``: S is the magnitude's norm (statistics); ``what``: the arithmetic the bound
    allows for, in words (the failure message)."""
    rtol: float
    atol: float = 0.0
    norm_rtol: float | None = None
    terms: int = 1
    conditioned: bool = False
    what: str = "rounding"


def tolerance(rtol: float, terms: int, precision: str = "fp32", mma: bool = False, fused: bool = False,
              conditioned: bool = False) -> Tolerance:
    """Both bounds of an output whose sums have ``terms`` terms: ``rtol`` the op's accumulation
    tolerance per element (rtol_for_sum, or rtol_mma on tensor cores), stored in ``precision``
    (plus its rounding), summed on tensor cores when ``mma`` (``fused``: a rounded fused operand)."""
    per_element, atol = tolerance_stored(rtol, precision)
    whole = (norm_rtol_mma(terms, precision, fused) if mma else norm_rtol_for_sum(terms))
    how = f"{precision} tensor-core sums" if mma else "float32 sums"
    what = f"{how} of {terms:,} terms" + (f" stored in {precision}" if STORAGE_ROUNDING[precision][0] else "")
    return Tolerance(per_element, atol, whole + STORAGE_ROUNDING[precision][0], max(1, int(terms)),
                     conditioned, what)


@dataclass
class CheckResult:
    name: str
    count: int
    max_error: float         # largest |actual - expected|
    worst_ratio: float       # per element: the largest error / its tolerance (< 1 passes)
    path: str = ""           # the path the problem took (runner.path_taken), where a stage ran
    norm_ratio: float | None = None   # as a whole: ||error||_2 / its bound (< 1 passes; None: not checked)
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
        whole = "" if self.norm_ratio is None else f"; as a whole {self.norm_ratio:.2f} of its bound"
        return (f"{self.verdict} (max |error| {self.max_error:.2e}, {self.worst_ratio:.2f} of the "
                f"per-element tolerance{whole})")


def _scale(expected: np.ndarray, mag: np.ndarray, tol: Tolerance) -> tuple[float, str]:
    """S, the norm the whole error is measured against, and what it is in words."""
    ref, mag_norm = float(np.linalg.norm(expected)), float(np.linalg.norm(mag))
    if tol.conditioned:
        return mag_norm, "the norm of its magnitude"
    floor = mag_norm / (2 * math.sqrt(tol.terms))
    if floor > ref:
        return floor, "its floor ||magnitude|| / (2 sqrt(n)) (larger than its norm)"
    return ref, "its norm"


def check_close(actual, expected, *, magnitude=None, rtol: float = 1e-5, atol: float = 0.0,
                tolerance: Tolerance | None = None, name: str = "result", show: int = 5,
                verbose: bool = False) -> CheckResult:
    """Raise MismatchError unless ``|actual - expected| <= rtol * magnitude + atol`` everywhere
    and, given a ``tolerance`` with a ``norm_rtol``, the error as a whole is within its bound
    (the module's docstring).

    ``magnitude`` defaults to ``|expected|``; pass the reference computed on absolute values for
    sums. ``tolerance`` replaces ``rtol`` and ``atol``. NaN or inf in ``actual`` fails, except where
    the reference holds the same non-finite value (a NaN or inf in the inputs reaches those outputs):
    those count as matching and are left out of the bound as a whole.
    """
    tol = tolerance or Tolerance(rtol, atol)
    actual = np.asarray(actual)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        raise MismatchError(f"{name}: shape {actual.shape} differs from the reference's {expected.shape}")
    mag = np.abs(expected) if magnitude is None else np.asarray(magnitude, dtype=np.float64)
    got = actual.astype(np.float64)
    same = ~np.isfinite(expected) & ((np.isnan(expected) & np.isnan(got)) | (got == expected))
    with np.errstate(invalid="ignore"):       # inf - inf is NaN, which the test below counts as bad
        mag = np.where(same, 0.0, mag)
        bound = tol.rtol * mag + tol.atol + TINY
        err = np.where(same, 0.0, np.abs(got - expected))
        bad = ~(err <= bound) | (~(np.isfinite(expected) & np.isfinite(got)) & ~same)  # NaN compares false
        ratio = np.where(np.isfinite(err) & ~bad | (err <= bound), err / bound, np.inf)
    norm_ratio = whole = None
    if tol.norm_rtol is not None:
        scale, scale_words = _scale(np.where(same, 0.0, expected), mag, tol)
        whole = float(np.linalg.norm(err)) if np.isfinite(err).all() else math.inf
        allowed = (tol.norm_rtol * scale + tol.atol * math.sqrt(err.size)) * few_values(err.size) + TINY
        norm_ratio = whole / allowed
    result = CheckResult(name, int(expected.size), float(np.nanmax(err)) if err.size else 0.0,
                         float(ratio.max()) if ratio.size else 0.0, norm_ratio=norm_ratio,
                         nonfinite=int(same.sum()))
    if bad.any() or (norm_ratio is not None and not norm_ratio <= 1):
        lines = []
        if norm_ratio is not None:
            few = f" in {err.size:,} values" if few_values(err.size) > 1.1 else ""
            limit = f"the {allowed / max(scale, TINY):.1e} allowed for {tol.what}{few}"
            how = (f"more than {limit} ({norm_ratio:.1f} times it)" if not norm_ratio <= 1
                   else f"within {limit} ({norm_ratio:.2f} of it)")
            lines.append(f"{name}: the output as a whole differs from the reference by "
                         f"{whole / max(scale, TINY):.1e} of {scale_words}, {how}")
        if bad.any():
            idx = np.argwhere(bad)
            lines.append(f"{name}: {len(idx):,} of {expected.size:,} values differ from the reference "
                         f"by more than their own tolerance (rtol {tol.rtol:.1e} of the magnitude):")
        else:
            worst = np.argsort(ratio, axis=None)[::-1][:show]
            idx = np.stack(np.unravel_index(worst, ratio.shape), axis=1)
            lines.append(f"{name}: each value is within its own tolerance (rtol {tol.rtol:.1e} of the "
                         f"magnitude; the worst at {result.worst_ratio:.2f} of it); the values nearest it:")
        for i in idx[:show]:
            i = tuple(int(v) for v in i)
            lines.append(f"  at {i}: got {float(actual[i]):.7g}, expected {expected[i]:.7g}, "
                         f"|error| {err[i]:.3g} {'>' if bad[i] else '<='} tolerance {bound[i]:.3g}")
        if bad.any() and len(idx) > show:
            lines.append(f"  ... and {len(idx) - show:,} more")
        raise MismatchError("\n".join(lines), result)
    if verbose:
        print(result)
    return result
