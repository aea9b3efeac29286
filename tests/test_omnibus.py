"""rmtbase.decision.omnibus: the capped Cauchy statistic by its definition, calibration under
strong dependence, the extrapolated tail against the exact law of independent p-values, and the
two cancellation cases and a resolution case."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rmtbase.decision.omnibus import calibrated_p, cauchy_statistic, resolution_floor


def test_cauchy_statistic_definition_and_nan():
    p = np.array([[0.5, 0.1, 1e-6], [0.3, np.nan, 0.7], [np.nan, np.nan, np.nan]])
    t = cauchy_statistic(p)
    capped = np.minimum(p, 0.5)
    want0 = np.mean(np.tan((0.5 - capped[0]) * np.pi))
    want1 = np.mean(np.tan((0.5 - capped[1, [0, 2]]) * np.pi))
    assert want1 == pytest.approx(np.tan(0.2 * np.pi) / 2)  # 0.7 counts as 0, not −tan(0.2π)
    assert t[0] == pytest.approx(want0, rel=1e-9) and t[1] == pytest.approx(want1, rel=1e-9)
    assert np.isnan(t[2])


def _dependent_p(rng, n, k=12, rho=0.9):
    """k two-sided normal p-values of equicorrelated z's (correlation rho)."""
    common = rng.standard_normal((n, 1))
    z = np.sqrt(rho) * common + np.sqrt(1 - rho) * rng.standard_normal((n, k))
    return 2 * stats.norm.sf(np.abs(z))


def test_calibrated_head_p_is_uniform_under_strong_dependence():
    """12 statistics with correlation 0.9: the plain Cauchy p is miscalibrated in the bulk, the
    calibrated one is uniform below its atom: heads whose every p is ≥ ½ have T = 0 exactly
    (here ~13 % of them) and get p = (1 + #{T_j ≥ 0})/(N + 1) ≈ 1. So P(p ≤ u) = u for every
    u below the atom: checked at u = 0.001 … 0.8, each within 4 binomial se (n = 3000)."""
    rng = np.random.default_rng(0)
    t_null = cauchy_statistic(_dependent_p(rng, 2000))
    t_heads = cauchy_statistic(_dependent_p(rng, 3000))
    p, method = calibrated_p(t_heads, t_null)
    for u in (0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8):
        se = np.sqrt(u * (1 - u) / p.size)
        assert abs(np.mean(p <= u) - u) < 4 * se + 1 / p.size, u
    assert set(method) <= {"empirical", "extrapolated"}


def test_extrapolated_tail_matches_the_exact_cauchy_law():
    """Independent uniform p-values: each capped term is max(C, 0) for C standard Cauchy, so
    far out P(T > t) = P(Σ > 8t) ~ 8 P(C > 8t) ~ 1/(πt), the standard Cauchy tail
    ½ − arctan(t)/π (measured with 2·10⁶ draws: π t P(T > t) = 1.04 at t = 64, 1.02 at 1000).
    Beyond the draws the calibrated p follows it within a factor 2.5: it is anchored at the 10th
    largest of 2000 draws, whose tail probability has relative sd ~1/√10 ≈ 0.32 (this seed's
    anchor gives 2.01)."""
    rng = np.random.default_rng(1)
    t_null = cauchy_statistic(rng.uniform(size=(2000, 8)))
    t_far = np.array([2e3, 1e4, 1e6, 1e9])
    p, method = calibrated_p(t_far, t_null)
    exact = 0.5 - np.arctan(t_far) / np.pi
    assert set(method) == {"extrapolated"}
    assert np.all((p / exact > 0.4) & (p / exact < 2.5)), p / exact
    assert np.all(np.diff(p) < 0)


def test_p_is_monotone_and_handles_inf_nan():
    rng = np.random.default_rng(2)
    t_null = cauchy_statistic(rng.uniform(size=(500, 5)))
    grid = np.concatenate([np.linspace(-5, 50, 200), [1e3, 1e5]])
    p, _ = calibrated_p(grid, t_null)
    assert np.all(np.diff(p) <= 1e-15)
    p2, m2 = calibrated_p(np.array([np.inf, np.nan]), t_null)
    assert p2[0] > 0 and np.isnan(p2[1]) and m2[1] == ""
    with pytest.raises(ValueError):
        calibrated_p([1.0], t_null[:5])


def _uniform_null(seed=3, n=4000, k=20):
    return cauchy_statistic(np.random.default_rng(seed).uniform(size=(n, k)))


def _head_p(pv, t_null):
    pv = np.asarray(pv, dtype=float)[None]
    p, _ = calibrated_p(cauchy_statistic(pv), t_null)
    return float(resolution_floor(p, pv)[0])


def test_a_statistic_at_p_one_cannot_cancel_strong_evidence():
    """bf16 MiniLM L4H11: components 2e-16, 7e-15, 7e-12 and k.mean at p = 1 exactly
    (its value on the bf16 grid). Uncapped, tan((½ − 1)π) ≈ −3·10¹⁵ outweighed the rest and the
    head p was 0.96 (reproduced here with the uncapped formula); capped, the p = 1 term is 0."""
    t_null = _uniform_null()
    pv = [2e-16, 7e-15, 7e-12, 1.0] + [0.5] * 16
    uncapped = np.mean(1.0 / np.tan(np.clip(pv, 1e-16, 1 - 1e-16) * np.pi))
    assert uncapped < 0  # the veto, as it was
    assert _head_p(pv, t_null) < 1e-9
    # adding a p = 1 statistic never raises T above ... and never turns it negative
    base = cauchy_statistic(np.array(pv[:3]))
    assert cauchy_statistic(np.array(pv[:4])) == pytest.approx(base * 3 / 4)


def test_near_one_p_cannot_cancel_moderate_evidence():
    """Random GPT-2 under the permutation null, L1H2: λ_min p 0.0021, condition number
    p 0.017, spectral entropy p 0.999: the old combination gave 0.90 (−18.7 against +8.8 in
    its terms). With the cap the head p is that of its evidence alone."""
    t_null = _uniform_null()
    rest = [0.5] * 17
    with_high = _head_p([0.0021, 0.017, 0.999] + rest, t_null)
    without = _head_p([0.0021, 0.017, 0.5] + rest, t_null)
    assert with_high == without  # exact: the cap gives both the same terms, one code path
    assert with_high < 0.1


def test_monotone_in_every_component():
    """T is non-increasing in each p: raising any one p never lowers the head's p-value."""
    rng = np.random.default_rng(4)
    t_null = _uniform_null()
    for _ in range(50):
        pv = rng.uniform(size=20) ** 3
        j = rng.integers(20)
        up = pv.copy()
        up[j] = min(1.0, pv[j] + rng.uniform())
        assert _head_p(up, t_null) >= _head_p(pv, t_null)


def test_head_p_never_below_its_strongest_statistic():
    """With 200 permutations every component sat at its floor p = 0.00995 and the head
    p was 1e-16. A degenerate null (every draw's T at or below 0: no positive anchor) now keeps
    the add-one floor, and no head p falls below the head's smallest component p."""
    t_null = np.zeros(200)
    pv = np.full((1, 20), 0.00995)
    p, method = calibrated_p(cauchy_statistic(pv), t_null)
    assert p[0] == pytest.approx(1 / 201) and method[0] == "floor"
    assert resolution_floor(p, pv)[0] == pytest.approx(0.00995)
    # and with a regular null far beyond the draws
    t_null = _uniform_null(n=200)
    p, method = calibrated_p(cauchy_statistic(pv), t_null)
    assert resolution_floor(p, pv)[0] >= 0.00995
