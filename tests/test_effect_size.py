"""Effect sizes in the statistic's own units (rmtbase.decision.effect.natural_effect):
ratios to the null median for scale-like statistics, shifts for location-like ones, with the
null's 95 % band; independent of how wide the null is; in scores."""

import numpy as np
import pytest

from rmtbase.decision.effect import effect_kind, natural_effect


def test_kinds():
    assert effect_kind("qk.npr") == ("ratio", 0.0)
    assert effect_kind("qk.lambda_max") == ("ratio", 0.0)
    assert effect_kind("q.excess_kurtosis") == ("ratio", 3.0)
    assert effect_kind("qk.spectral_entropy") == ("shift", 0.0)
    assert effect_kind("qk.skewness") == ("shift", 0.0)


def test_ratio_and_shift_against_numpy():
    rng = np.random.default_rng(1)
    draws = rng.lognormal(0.0, 0.1, 4001)
    med, lo, hi = np.median(draws), np.quantile(draws, 0.025), np.quantile(draws, 0.975)
    size, blo, bhi = natural_effect("qk.npr", np.array([0.42 * med, med]), draws)
    np.testing.assert_allclose(size, [0.42, 1.0], rtol=1e-12)
    assert (blo, bhi) == pytest.approx((lo / med, hi / med), rel=1e-12)
    k = rng.standard_normal(4001) * 0.05                       # excess kurtosis near 0
    size, blo, bhi = natural_effect("qk.excess_kurtosis", np.array([3.0]), k)
    assert size[0] == pytest.approx(6.0 / (np.median(k) + 3.0), rel=1e-12)   # β₂ = 6 vs ~3
    e = rng.normal(4.0, 0.01, 4001)
    size, blo, bhi = natural_effect("qk.spectral_entropy", np.array([3.7]), e)
    assert size[0] == pytest.approx(3.7 - np.median(e), rel=1e-12)
    assert blo == pytest.approx(np.quantile(e, 0.025) - np.median(e))
    # non-finite draws are left out; no finite draw: NaN
    size, blo, _ = natural_effect("qk.npr", np.array([1.0]), np.array([np.nan, np.inf, 2.0]))
    assert size[0] == 0.5 and blo == 1.0
    assert np.isnan(natural_effect("qk.npr", np.array([1.0]), np.array([np.nan]))[0]).all()


def test_effect_does_not_depend_on_the_null_width():
    """The same departure (a head 10 % above the median) against a null 4.6× narrower reads the
    same ratio, while its distance in null sd grows 4.6× (KL's null sd at 768×64 vs 384×32)."""
    from rmtbase.decision.effect import distance, null_moments

    rng = np.random.default_rng(2)
    z = rng.standard_normal(20001)
    wide, narrow = np.exp(0.046 * z), np.exp(0.01 * z)
    s_w = natural_effect("qk.lambda_max", 1.1, wide)[0]
    s_n = natural_effect("qk.lambda_max", 1.1, narrow)[0]
    assert s_w == pytest.approx(s_n, rel=1e-3) and s_w == pytest.approx(1.1, rel=2e-3)
    d_w = distance("qk.lambda_max", 1.1, *null_moments("qk.lambda_max", wide))
    d_n = distance("qk.lambda_max", 1.1, *null_moments("qk.lambda_max", narrow))
    assert d_n / d_w == pytest.approx(4.6, rel=0.02)
