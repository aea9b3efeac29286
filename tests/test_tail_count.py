"""The tail-count claim of the profile null's stopping rule (rmtbase.scoring.stopping.tail_count):
its exact interval error against a simulation and against the hypergeometric form, where it
applies, and a simulated coverage at the worst tail probability."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from rmtbase.decision.tails import MIN_EXCEEDANCES
from rmtbase.scoring.stopping import tail_count as tc
from rmtbase.scoring.stopping.joint import count_bounds
from rmtbase.scoring.stopping.rule import STOP_ERROR

N = 18_000
#: a side's level on the Gemma-3-shaped folder: 72 heads, 4 axes + 2, 5 looks, halved
GEMMA_SIDE = STOP_ERROR / (72 * 6 * 5) / 2


def _claim_probability(n, n_final, k0, q):
    """P(K ≥ k0 and T ≤ 9) by the hypergeometric form: Σ_t Binom(t; N, q) P(K ≥ k0 | T = t),
    K | T = t the count of t marked draws among the first n of N (independent of the
    module's convolution over K and the N − n draws to come)."""
    t = np.arange(k0, MIN_EXCEEDANCES)
    return float(np.sum(stats.binom.pmf(t, n_final, q)
                        * stats.hypergeom(n_final, t, n).sf(k0 - 1)))


@pytest.mark.parametrize("n,k0", [(5000, 9), (4000, 8), (2000, 7)])
def test_the_claims_error_is_the_hypergeometric_one(n, k0):
    """Where count_bounds' lower end is the count itself (k < 10 here), the claim adds
    exactly P(K ≥ k0, T ≤ 9); computed both ways to 1e-9 relative at five q."""
    k = np.arange(k0, MIN_EXCEEDANCES, dtype=float)
    assert np.array_equal(count_bounds(k, k, n, N, GEMMA_SIDE)[0], k)  # exact: integer counts
    q = np.array([1e-4, 3e-4, 5e-4, 8e-4, 2e-3])
    e = tc.interval_errors(n, N, GEMMA_SIDE, q)
    want = np.array([_claim_probability(n, N, k0, x) for x in q])
    np.testing.assert_allclose(e[k0] - e[0], want, rtol=1e-9, atol=1e-22)


def test_where_the_claim_applies_at_the_gemma_level():
    """At a side's 2.3e-6: from 9 of the first 5,000 (error 1.3e-6) and of the first 4,000,
    not from 8 of 4,000 (6.4e-6 at q ≈ 4.9e-4, by the hypergeometric form) — why the folder's
    L1H1 (8 beyond at 4,000, 9 at 5,000) closes at 5,000; none at 6,000 or 10,000."""
    assert tc.claim_start(5000, N, GEMMA_SIDE) == 9
    assert tc.claim_start(4000, N, GEMMA_SIDE) == 9
    assert tc.claim_start(6000, N, GEMMA_SIDE) is None
    assert tc.claim_start(10_000, N, GEMMA_SIDE) is None
    q = np.geomspace(1e-4, 2e-3, 200)
    assert max(_claim_probability(4000, N, 8, x) for x in q) == pytest.approx(6.4e-6, rel=0.02)
    assert max(_claim_probability(5000, N, 9, x) for x in q) == pytest.approx(1.29e-6, rel=0.02)
    lo, hi = tc.count_interval(np.array([0.0, 8.0, 9.0, 30.0]), 5000, N, GEMMA_SIDE)
    base_lo, base_hi = count_bounds(np.array([0.0, 8.0, 9.0, 30.0]),
                                    np.array([0.0, 8.0, 9.0, 30.0]), 5000, N, GEMMA_SIDE)
    assert np.array_equal(lo, [base_lo[0], 8.0, 10.0, base_lo[3]])  # exact: integer counts
    assert np.array_equal(hi, base_hi)  # exact: the same function's output


def test_the_interval_error_matches_a_simulation():
    """E(q) of an interval with a deliberately costly claim (n = 300 of 1,000, level 0.05,
    from k0 = 4) against 200,000 simulated (K, T) at three q: |z| < 5 with the binomial se of
    the simulated rate (fixed seed)."""
    n, n_final, level, k0, reps = 300, 1000, 0.05, 4, 200_000
    rng = np.random.default_rng(59)
    kk = np.arange(n + 1, dtype=float)
    lo, hi = count_bounds(kk, kk, n, n_final, level)
    lo = np.where(kk >= k0, np.maximum(lo, MIN_EXCEEDANCES), lo)
    for q in (0.004, 0.008, 0.02):
        k = rng.binomial(n, q, reps)
        t = k + rng.binomial(n_final - n, q, reps)
        rate = np.mean((t < lo[k]) | (t > hi[k]))
        want = tc.interval_errors(n, n_final, level, [q])[k0, 0]
        se = np.sqrt(want * (1 - want) / reps)
        assert want > 1e-3 and abs(rate - want) < 5 * se, (q, rate, want, se)


def test_the_claim_keeps_its_level_by_simulation():
    """Where claim_start allows the claim (n = 400 of 1,500 at level 0.02), the simulated
    failure rate of the count interval at the q where its exact error peaks is at most the
    level: 400,000 draws, asserted ≤ level + 4 se; and the claim from one count lower would
    not keep it (its exact error above the level), so the search is not vacuous."""
    n, n_final, level, reps = 400, 1500, 0.02, 400_000
    k0 = tc.claim_start(n, n_final, level)
    assert k0 is not None and k0 > 1
    q = np.geomspace(1e-3, 2e-2, 400)
    e = tc.interval_errors(n, n_final, level, q)
    assert e[k0 - 1].max() > level >= e[k0].max()
    worst = q[np.argmax(e[k0])]
    rng = np.random.default_rng(5)
    k = rng.binomial(n, worst, reps)
    t = k + rng.binomial(n_final - n, worst, reps)
    lo, hi = tc.count_interval(k.astype(float), n, n_final, level)
    rate = np.mean((t < lo) | (t > hi))
    assert rate <= level + 4 * np.sqrt(level * (1 - level) / reps), (rate, level)


def test_fewer_than_ten_draws_to_come():
    """5 draws to come (995 of 1,000 made, a schedule of the API's ``settle``): P(R ≤ 9) = 1 at
    every q, so the claim from 9 beyond could only hold where 1 more draw surely comes beyond;
    none is allowed, and the interval is count_bounds' own (this raised IndexError before)."""
    assert tc.claim_start(995, 1000, 0.01) is None
    k = np.array([0.0, 9.0, 20.0])
    lo, hi = tc.count_interval(k, 995, 1000, 0.01)
    want = count_bounds(k, k, 995, 1000, 0.01)
    assert np.array_equal(lo, want[0]) and np.array_equal(hi, want[1])  # exact: one function
