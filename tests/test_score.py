"""Unit tests of rmtbase.scoring: empirical p-values, Benjamini–Hochberg, σ self-normalisation.

Independent references: brute-force counting in pure Python for the add-one p-value,
``scipy.stats.false_discovery_control`` for BH, the exact scaling of head_stats under
W → aW for the σ handling, and a Monte Carlo null scored against an independent null.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sst

from rmtbase.decision.significance import benjamini_hochberg, empirical_p
from rmtbase.errors import InputError, ModelError, TableError


def _brute_p(v, null):
    """Definition, by counting: two-sided add-one p and mid-rank percentile."""
    n = len(null)
    le = sum(1 for x in null if x <= v)
    ge = sum(1 for x in null if x >= v)
    lt = sum(1 for x in null if x < v)
    eq = sum(1 for x in null if x == v)
    p = min(1.0, 2 * min((1 + le) / (1 + n), (1 + ge) / (1 + n)))
    return p, 100.0 * (lt + 0.5 * eq) / n


def test_empirical_p_matches_counting_with_ties():
    rng = np.random.default_rng(1)
    null = rng.integers(0, 20, size=57).astype(float)  # many ties
    values = np.array([-1.0, 0.0, 3.0, 7.5, 10.0, 19.0, 25.0])
    p, pct = empirical_p(values, null)
    for v, pi, ci in zip(values, p, pct, strict=True):
        bp, bc = _brute_p(v, list(null))
        assert pi == pytest.approx(bp, abs=1e-15)
        assert ci == pytest.approx(bc, abs=1e-12)
    assert p.min() >= 2 / 58 and p.max() <= 1.0


def test_empirical_p_drops_nonfinite_draws_and_values():
    null = np.array([1.0, 2.0, np.nan, 3.0, np.inf])
    p, pct = empirical_p(np.array([2.0, np.nan]), null)
    bp, bc = _brute_p(2.0, [1.0, 2.0, 3.0])
    assert p[0] == pytest.approx(bp) and pct[0] == pytest.approx(bc)
    assert np.isnan(p[1]) and np.isnan(pct[1])
    with pytest.raises(TableError):
        empirical_p(1.0, np.array([np.nan]))


@pytest.mark.parametrize("n", [19, 99, 200])
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1, 0.3])
def test_empirical_p_is_valid_exactly(n, alpha):
    """Exchangeable value: its rank among n+1 is uniform, so P(p ≤ α) = (#ranks with p ≤ α)/(n+1)
    must be ≤ α, enumerated exactly over the n+1 positions (no ties)."""
    null = np.arange(n, dtype=float)
    positions = np.arange(n + 1) - 0.5  # value below all, between each pair, above all
    p, _ = empirical_p(positions, null)
    assert np.mean(p <= alpha) <= alpha + 1e-12
    # and not absurdly conservative: within one rank of the level on each side
    assert np.mean(p <= alpha) >= alpha - 2 / (n + 1)


def test_bh_matches_scipy():
    rng = np.random.default_rng(3)
    p = np.concatenate([rng.uniform(size=300), rng.uniform(0, 1e-3, size=20)])
    rng.shuffle(p)
    p = p.reshape(4, 8, 10)
    flag, q = benjamini_hochberg(p, 0.05)
    ref = sst.false_discovery_control(p.ravel(), method="bh").reshape(p.shape)
    np.testing.assert_allclose(q, ref, rtol=1e-12)
    # exact: integers / booleans
    np.testing.assert_array_equal(flag, ref <= 0.05)
    assert 10 <= flag.sum() <= 40


def test_bh_ignores_nan_and_rejects_bad_alpha():
    p = np.array([0.001, np.nan, 0.02, 0.04, 0.9])
    flag, q = benjamini_hochberg(p, 0.05)
    ref = sst.false_discovery_control(p[np.isfinite(p)], method="bh")
    np.testing.assert_allclose(q[np.isfinite(p)], ref, rtol=1e-12)
    assert np.isnan(q[1]) and not flag[1]
    for bad in (0, 1, -0.1, "x", 1.5):
        with pytest.raises(InputError):
            benjamini_hochberg(p, bad)


# --- σ handling: needs rmtbase.stats / rmtbase.baseline.null -------------------------------------------

M_HEADS, D_S, DH_S = 240, 40, 8
SQ, SK = 0.02, 0.07


@pytest.fixture(scope="module")
def sigma_heads():
    """M independent null heads at σ_Q = 0.02, σ_K = 0.07 (numpy generator, independent of
    JAX's keys), their statistics through score's compiled head_stats, and the same statistics
    of the heads rescaled to (a σ_Q, b σ_K)."""
    from rmtbase.scoring.measures.layer_stats import layer_stats as _layer_stats

    rng = np.random.default_rng(2024)
    wq = (SQ * rng.standard_normal((M_HEADS, DH_S, D_S))).astype(np.float32)
    wk = (SK * rng.standard_normal((M_HEADS, DH_S, D_S))).astype(np.float32)
    a, b = np.float32(1.9), np.float32(0.3)
    return _layer_stats(wq, wk, "all")[0], _layer_stats(a * wq, b * wk, "all")[0], (a, b)


def test_self_normalisation_is_exact_under_rescaling(sigma_heads):
    """head_stats(a W_Q, b W_K) self-normalised equals head_stats(W_Q, W_K) self-normalised,
    for every statistic: checks the STAT_INFO powers and our σ bookkeeping together."""
    from rmtbase.decision.family import NOT_TESTED as _NOT_TESTED
    from rmtbase.decision.scale import normalise

    s1, s2, (a, b) = sigma_heads
    np.testing.assert_allclose(s2["q.rms"], a * s1["q.rms"], rtol=1e-5)
    np.testing.assert_allclose(s2["k.rms"], b * s1["k.rms"], rtol=1e-5)
    names = [k for k in s1 if k not in _NOT_TESTED]
    assert {"qk.lambda_max", "qk.npr", "qk.std", "q.std", "qk.entropy", "k.mean"} <= set(names)
    for k in names:
        n1 = normalise(k, s1[k], s1["q.rms"], s1["k.rms"])
        n2 = normalise(k, s2[k], s2["q.rms"], s2["k.rms"])
        # float32 data: scaled entries round differently (order statistics, histograms)
        np.testing.assert_allclose(n2, n1, rtol=2e-4, atol=1e-6, err_msg=k)
        if _scaling_power(k) != 0:  # and the raw statistic really does move with σ
            assert not np.allclose(s2[k], s1[k], rtol=1e-3), k


def _scaling_power(name):
    from rmtbase.stats import STAT_INFO

    return STAT_INFO[name.split(".", 1)[1]]["sigma_power"]


@pytest.mark.slow
def test_null_at_other_sigma_scores_as_null(sigma_heads):
    """Heads drawn from the null at σ_Q = 0.02, σ_K = 0.07 scored against an independent σ = 1
    null (rmtbase.baseline.null.null_draws): every statistic's p-values are uniform. Per statistic the M
    heads are independent given the N null draws, so #(p ≤ 0.05) has mean ≤ 0.05 M and variance
    ≤ M α(1-α) + M² α(1-α)/N (binomial plus the null's own sampling); mean p has
    variance 1/(12M) + 1/(12N). Both are tested at 5 sd."""
    import jax

    from rmtbase.baseline.null import null_draws
    from rmtbase.decision.verdict import score_values

    m, n = M_HEADS, 400
    values = {k: v.reshape(m, 1) for k, v in sigma_heads[0].items()}
    null = null_draws(jax.random.key(12), D_S, DH_S, n)
    ds = score_values(values, values["q.rms"], values["k.rms"], null, alpha=0.05)
    assert ds.sizes["stat"] >= 20
    bound = 0.05 * m + 5 * np.sqrt(m * 0.0475 + m**2 * 0.0475 / n)
    p_sd = np.sqrt(1 / (12 * m) + 1 / (12 * n))
    for stat in ds["stat"].values:
        p = ds["p_value"].sel(stat=stat).values.ravel()
        assert np.isfinite(p).all(), stat
        assert (p <= 0.05).sum() <= bound, stat
        assert abs(p.mean() - 0.5) < 5 * p_sd, stat
    # raw units: the null mean of λ_max at the heads' σ is (σ_Q σ_K)² times its σ = 1 value
    lam = ds.sel(stat="qk.lambda_max")
    ratio = lam["null_mean"].values.ravel() / np.mean(null["qk.lambda_max"])
    np.testing.assert_allclose(ratio, (values["q.rms"] * values["k.rms"]).ravel() ** 2, rtol=0.02)


def test_score_values_flags_planted_structure_and_rejects_bad_scale():
    """A layer planted far below a Gaussian null: its tests go beyond every draw, get
    GPD-extrapolated p-values far below the add-one floor 2/1000, and every head of the layer
    is flagged by the per-head decision; no other head is (the others are null draws, 18
    heads, P(any false flag) ≤ α under BH at the global null)."""
    from rmtbase.decision.verdict import score_values

    rng = np.random.default_rng(5)
    null = {"q.rms": np.ones(999), "k.rms": np.ones(999), "qk.npr": rng.normal(0.5, 0.01, 999)}
    v = rng.normal(0.5, 0.01, (4, 6))
    v[1, :] = 0.44  # 6 sd below
    ds = score_values({"qk.npr": v}, np.ones((4, 6)), np.ones((4, 6)), null, alpha=0.05)
    p = ds["p_value"].sel(stat="qk.npr").values
    # ten times below the add-one floor 2/1000: the GPD shape is floored at 0.1 (tails never
    # anti-conservative), which puts this 6-sd layer at p 1.9e-4
    assert (p[1] < 2e-4).all() and set(ds["p_method"].sel(stat="qk.npr").values[1]) == {"gpd"}
    assert ds["head_flag"].values[1].all() and int(ds["head_flag"].sum()) == 6
    assert ds["flag"].sel(stat="qk.npr").values[1].all()
    assert (ds["z"].sel(stat="qk.npr").values[1] < -5).all()
    # the effect follows the (now conservative) tail p: -3.73 at p 1.9e-4 (was < -4 before a24ec84)
    assert (ds["effect"].sel(stat="qk.npr").values[1] < -3.5).all()
    with pytest.raises(ModelError):
        score_values({"qk.npr": v}, np.zeros((4, 6)), np.ones((4, 6)), null)


@pytest.mark.parametrize("kw", [{"draws": 1}, {"draws": 2.5}, {"draws": "many"}, {"alpha": 0},
                                {"alpha": 1.2}, {"stats": []}])
def test_score_model_rejects_bad_options_before_loading(kw):
    from rmtbase.scoring.score import score_model

    with pytest.raises(InputError):
        score_model("/nonexistent/model/folder", progress=False, **kw)
