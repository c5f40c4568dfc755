"""The checker's two bounds (helpers/engine/check.py) on float32 sums made in NumPy: honest
rounding passes for the kinds of data the derivation names, a 0.1 % error or a missing group of
terms fails at sizes where the per-element bound alone cannot see them, and the message says
which bound failed and by how much."""
import numpy as np
import pytest

from helpers.engine.check import (EPS32, MismatchError, Tolerance, check_close, norm_rtol_for_sum,
                                  rtol_for_sum, tolerance)


def sums(terms: np.ndarray):
    """One float32 sum per row, added one term after another (a work-item's loop), with the
    float64 reference and magnitude."""
    got = np.cumsum(terms.astype(np.float32), axis=1, dtype=np.float32)[:, -1]
    t64 = terms.astype(np.float64)
    return got, t64.sum(axis=1), np.abs(t64).sum(axis=1)


def data(kind: str, m: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((m, n)), rng.standard_normal((m, n))
    if kind == "products":                  # a convolution's terms: products of normal data
        return x * w
    if kind == "relu":                      # half of them zeroed by a ReLU's derivative
        return x * w * (rng.standard_normal((m, n)) > 0)
    if kind == "positive":                  # terms of one sign: the partial sums grow linearly
        return np.abs(x * w)
    if kind == "offset":                    # a large common part (batch norm's data)
        return 10.0 + x
    if kind == "vanishing":                 # every sum cancels exactly: +a and -a, shuffled
        half = x[:, : n // 2] * w[:, : n // 2]
        both = np.concatenate([half, -half], axis=1)
        return np.take_along_axis(both, rng.permuted(np.tile(np.arange(both.shape[1]), (m, 1)), axis=1), axis=1)
    raise ValueError(kind)


def check(got, expected, magnitude, n, **kw):
    return check_close(got, expected, magnitude=magnitude, tolerance=tolerance(rtol_for_sum(n), n, **kw))


@pytest.mark.parametrize("kind", ["products", "relu", "positive", "offset", "vanishing"])
@pytest.mark.parametrize("n", [1, 7, 1000, 100_000])
def test_honest_float32_sums_pass_both_bounds(kind, n):
    m = 8 if n == 100_000 else 64
    got, expected, magnitude = sums(data(kind, m, max(n, 2) if kind == "vanishing" else n))
    result = check(got, expected, magnitude, n)
    assert result.norm_ratio < 0.5 and result.worst_ratio < 0.5, (kind, n, result)


@pytest.mark.parametrize("kind", ["products", "relu"])
def test_a_scale_error_of_one_in_a_thousand_fails_as_a_whole(kind):
    """Sums of 100,000 terms of mixed signs: 1.001 times the honest sum passes each element's
    tolerance (8 eps sqrt(n) sum|x| is several per cent of the value) and fails the bound as a
    whole, and the message says so with both numbers. (Terms of one sign have sum|x| = |value|:
    there the per-element bound sees it too.)"""
    n = 100_000
    got, expected, magnitude = sums(data(kind, 8, n))
    with pytest.raises(MismatchError, match=r"as a whole differs from the reference by 1\.0e-03 of its norm, "
                                            r"more than the .* allowed for float32 sums of 100,000 terms") as err:
        check(got * np.float32(1.001), expected, magnitude, n)
    assert "each value is within its own tolerance" in str(err.value)
    assert err.value.result.norm_ratio > 4 and err.value.result.worst_ratio < 1


def test_a_missing_group_of_terms_fails():
    """The last 1/64 of every sum left out (one image of 64): far beyond the bound as a whole."""
    n = 64 * 1568
    terms = data("products", 8, n)
    got = sums(terms[:, : n - n // 64])[0]
    _, expected, magnitude = sums(terms)
    with pytest.raises(MismatchError, match="as a whole") as err:
        check(got, expected, magnitude, n)
    assert err.value.result.norm_ratio > 100


def test_bound_as_a_whole_grows_like_sqrt_n():
    assert norm_rtol_for_sum(100) == pytest.approx(EPS32 * (2 * 10 + 8))
    assert norm_rtol_for_sum(0) == norm_rtol_for_sum(1)
    # a relative error of 1e-3 stays above the bound for sums of up to 17 million terms
    assert 2 * EPS32 * np.sqrt(17e6) < 1e-3 < 2 * EPS32 * np.sqrt(18e6) + 8 * EPS32 + 1e-3


def test_fp16_storage_adds_its_rounding_to_both_bounds():
    """An honest float32 sum stored in float16 passes; 1.001 on top of it still fails (2^-11 is
    half of 1e-3), which bfloat16's own rounding (2^-8) could not resolve."""
    n = 10_000
    got, expected, magnitude = sums(data("products", 64, n))
    stored = got.astype(np.float16).astype(np.float32)
    check(stored, expected, magnitude, n, precision="fp16")
    with pytest.raises(MismatchError, match="stored in fp16"):
        check((got * np.float32(1.001)).astype(np.float16).astype(np.float32), expected, magnitude, n, precision="fp16")
    fp16 = tolerance(rtol_for_sum(n), n, "fp16")
    assert fp16.norm_rtol == pytest.approx(norm_rtol_for_sum(n) + 2.0**-11) and fp16.atol == 2.0**-25
    assert tolerance(rtol_for_sum(n), n, "bf16").norm_rtol > 1e-3


def test_conditioned_outputs_are_measured_against_their_magnitude():
    """A statistic's error follows its magnitude (batch norm's (1 + kappa)), not its value."""
    expected, magnitude = np.ones(100), np.full(100, 50.0)
    tol = tolerance(rtol_for_sum(1000), 1000, conditioned=True)
    check_close(expected + 200 * EPS32, expected, magnitude=magnitude, tolerance=tol)
    with pytest.raises(MismatchError, match="of the norm of its magnitude"):
        check_close(expected + 8000 * EPS32, expected, magnitude=magnitude, tolerance=tol)


def test_a_result_reports_both_ratios_and_a_plain_check_only_one():
    got, expected, magnitude = sums(data("products", 16, 500))
    both = check(got, expected, magnitude, 500)
    assert 0 < both.norm_ratio < 1 and 0 < both.worst_ratio < 1
    assert "per-element tolerance; as a whole" in str(both)
    assert both.verdict == "result: all 16 values match the reference within tolerance"
    plain = check_close(got, expected, magnitude=magnitude, rtol=rtol_for_sum(500))
    assert plain.norm_ratio is None and "as a whole" not in str(plain)
    assert Tolerance(1e-5).norm_rtol is None


def test_nan_fails_both_bounds():
    got, expected, magnitude = sums(data("products", 4, 10))
    got[1] = np.nan
    with pytest.raises(MismatchError, match="1 of 4 values differ") as err:
        check(got, expected, magnitude, 10)
    assert err.value.result.norm_ratio == np.inf


def test_ops_tolerance_composes_each_stage_once():
    """ops.tolerance: an op's per-element rtol and terms, the stage's storage and tensor cores; the
    per-element numbers are the ones chapter 13 prints (conv_dgrad.rtol and tolerance_stored)."""
    from helpers.engine.check import OPERAND_ROUNDING, STORAGE_ROUNDING, norm_rtol_mma, tolerance_stored
    from helpers.ops import conv_dgrad, op_module, tolerance as op_tolerance
    from helpers.stages import REGISTRY
    args = conv_dgrad.random_problem_args(1, 4, 6, 6, 64, activation="relu")
    p = conv_dgrad.prepare(**args)
    n = conv_dgrad.terms(p)
    for s in REGISTRY["conv_dgrad"]:
        tol = op_tolerance("conv_dgrad", p, s)["grad_input"]
        mma = s.precision if s.tensor_cores else None
        assert tol.rtol == tolerance_stored(conv_dgrad.rtol(p, mma=mma), s.precision)[0], s.key
        whole = norm_rtol_mma(n, s.precision, True) if mma else norm_rtol_for_sum(n)
        assert tol.norm_rtol == pytest.approx(whole + STORAGE_ROUNDING[s.precision][0]), s.key
        assert tol.terms == n == 64 * 9 and not tol.conditioned
        if mma:
            assert tol.norm_rtol >= norm_rtol_for_sum(n) + OPERAND_ROUNDING[s.precision]
    for op in ("batchnorm_forward", "gemm", "conv_wgrad"):
        mod = op_module(op)
        p = mod.prepare(**mod.layer_args({"name": "t", "n": 2, "c": 3, "h": 5, "w": 4, "k": 2, "kernel": 3,
                                          "stride": 1, "padding": 1, "m": 7}))
        for name, tol in op_tolerance(op, p).items():
            assert tol.rtol == mod.rtol(p) and tol.terms == mod.terms(p), (op, name)
            assert tol.conditioned == (name in getattr(mod, "CONDITIONED", ())), (op, name)


@pytest.mark.parametrize("n", [27, 576])
def test_single_values_pass_with_the_few_values_factor(n):
    """Outputs of one value: 2,000 float32 sums of ReLU-masked products, each checked alone (its
    value may have cancelled: S is then the floor), and the same products with the activated
    operand rounded to TF32 as a fused tensor-core stage does (its NORM_OPERAND term), pass."""
    from helpers.engine.check import rtol_mma
    from helpers.engine.tensor import to_tf32
    rng = np.random.default_rng(n)
    dy = (rng.standard_normal((2000, n)) * (rng.standard_normal((2000, n)) > 0)).astype(np.float32)
    w = to_tf32(rng.standard_normal((2000, n)).astype(np.float32))
    got, expected, magnitude = sums(dy.astype(np.float64) * w)
    tf32 = (to_tf32(dy).astype(np.float64) * w).sum(axis=1)          # the mma's exact products
    fused = tolerance(rtol_mma(n, "tf32", True), n, "tf32", mma=True, fused=True)
    worst = worst_tf32 = 0.0
    for i in range(len(got)):
        worst = max(worst, check(got[i:i + 1], expected[i:i + 1], magnitude[i:i + 1], n).norm_ratio)
        worst_tf32 = max(worst_tf32, check_close(tf32[i:i + 1], expected[i:i + 1], magnitude=magnitude[i:i + 1],
                                                 tolerance=fused).norm_ratio)
    assert worst < 0.5 and worst_tf32 < 0.8, (worst, worst_tf32)
