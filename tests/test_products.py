"""Product-network ensembles: the stable QR factorisation against the raw product and a
300-digit mpmath SVD; Monte Carlo against the exact finite-d moments (|z| < 4, fixed keys); the
slow tests compare with the d → ∞ limit laws (Fuss–Catalan, free powers, Lyapunov limits)."""

from fractions import Fraction

import jax
import jax.numpy as jnp
import mpmath as mp
import numpy as np
import pytest

from rmtbase.analytic import network_finite as nf
from rmtbase.analytic import product_network as pn
from rmtbase.baseline.network_tables import network_draws
from rmtbase.ensembles import products as pr
from rmtbase.ensembles import residual_product
from rmtbase.errors import InputError

KEY = jax.random.key(20240515)


def _z(x, ref):
    x = np.asarray(x, dtype=float)
    return (x.mean() - float(ref)) / (x.std(ddof=1) / np.sqrt(x.size))


@pytest.mark.parametrize("kind,kw", [("ginibre", {"d": 6}), ("residual", {"d": 6}),
                                     ("ginibre", {"widths": (5, 3, 7, 4)})])
def test_factors_reproduce_the_raw_product(kind, kw):
    depth = 3
    q, logd, t = pr.network_factors(KEY, kind, depth, 0.8, **kw)
    raw = pr.product_network(KEY, kind, depth, 0.8, dtype=jnp.float64, **kw)
    np.testing.assert_allclose(pr.factors_to_matrix(q, logd, t), raw, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(np.exp(pr.log_singular_values(logd, t)),
                               np.linalg.svd(np.asarray(raw), compute_uv=False)[:logd.size],
                               rtol=1e-10)
    if kind == "residual":   # the same key and layers as rmtbase.ensembles.residual_product
        np.testing.assert_allclose(raw, residual_product(KEY, 6, depth, sigma2=0.8 / 6,
                                                         dtype=jnp.float64), rtol=1e-13)


def _mp_singular_values(kind, d, depth, gain):
    """Singular values of the product of the very same float64 layers, at 300 digits."""
    with mp.workdps(300):
        m = mp.eye(d)
        for layer in range(1, depth + 1):
            w = np.asarray(pr.network_layer(KEY, layer, d, d, gain, jnp.float64))
            wm = mp.matrix([[mp.mpf(float(x)) for x in row] for row in w])
            m = (wm if kind == "ginibre" else mp.eye(d) + wm) * m
        s = mp.svd_r(m, compute_uv=False)
        return sorted((float(mp.log(x)) for x in s), reverse=True)


@pytest.mark.parametrize("kind,gain", [("ginibre", 1.0), ("residual", 1.0), ("residual", 0.3)])
def test_stable_singular_values_match_a_300_digit_svd_at_depth_48(kind, gain):
    d, depth = 6, 48
    q, logd, t = pr.network_factors(KEY, kind, depth, gain, d=d)
    got = np.asarray(pr.log_singular_values(logd, t))
    ref = _mp_singular_values(kind, d, depth, gain)
    assert ref[0] - ref[-1] > 12          # condition number of M above e^12
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9)


def test_chain_depths_are_prefixes():
    res = pr.network_chain(KEY, "residual", (7, 3), 1.0, d=5)
    for L, (q, logd, t) in zip((3, 7), res, strict=True):
        q1, logd1, t1 = pr.network_factors(KEY, "residual", L, 1.0, d=5)
        np.testing.assert_allclose(pr.factors_to_matrix(q, logd, t),
                                   pr.factors_to_matrix(q1, logd1, t1), rtol=1e-12)


def test_offdiagonal_picks_the_entries_off_the_diagonal():
    m = jnp.arange(16.0).reshape(4, 4)
    off = np.asarray(pr.offdiagonal(m)).ravel()
    assert sorted(off) == sorted(np.asarray(m)[~np.eye(4, dtype=bool)])


def test_benettin_exponents_have_the_exact_finite_d_mean():
    """Square Gaussian: the column exponents ln D_i / L average to ½[ln(2G/d) + ψ((d−i+1)/2)]."""
    d, depth, gain, n = 8, 6, 1.5, 300

    def one(key):
        return pr.network_factors(key, "ginibre", depth, gain, d=d)[1] / depth

    with jax.enable_x64(True):
        from rmtbase.ensembles import map_draws
        mu = map_draws(one, KEY, n, method="map")
    ref = nf.lyapunov_ginibre(d, gain)
    z = [_z(mu[:, i], ref[i]) for i in range(d)]
    assert np.max(np.abs(z)) < 4, z


def _raw_moments(kind, d, depths, gains, n, key):
    """Per draw: Σλ, Σλ² (λ from the stable singular values) and the means of a², a⁴ over the
    off-diagonal entries a of M_L; shape (n, len(gains), len(depths), 4)."""
    from rmtbase.ensembles import map_draws

    def at(q, logd, t, L):
        lam = jnp.exp(2 * pr.log_singular_values(logd, t))
        a = pr.offdiagonal(pr.factors_to_matrix(q, logd, t))
        return jnp.stack([lam.sum(), (lam**2).sum(), jnp.mean(a**2), jnp.mean(a**4)])

    def one(k):
        return jnp.stack([jnp.stack(pr.network_chain(k, kind, depths, g, d=d, at_depth=at))
                          for g in gains])

    with jax.enable_x64(True):
        return map_draws(one, key, n, method="map")


# (kind, d, depths, gains): several (d, L, G) per kind; each row is one compiled program
MC_CASES = [("ginibre", 8, (1, 4, 12), (0.5, 1.3)), ("ginibre", 20, (2, 9), (1.0,)),
            ("residual", 8, (1, 4, 12), (0.5, 1.3)), ("residual", 20, (2, 9), (1.0,))]


@pytest.mark.parametrize("kind,d,depths,gains", MC_CASES)
def test_monte_carlo_matches_exact_finite_d_moments(kind, d, depths, gains):
    """E tr(MᵀM), E tr(MᵀM)², E a², E a⁴ (a off-diagonal, averaged over the matrix): |z| < 4
    over 150 draws with the standard errors of the draws."""
    r = _raw_moments(kind, d, depths, gains, 150, jax.random.fold_in(KEY, d))
    zs = {}
    for gi, g in enumerate(gains):
        for li, L in enumerate(depths):
            refs = (*nf.trace_moments(kind, d, L, Fraction(g))[:2],
                    *nf.element_moments(kind, d, L, Fraction(g)))
            for j, name in enumerate(("tr", "tr2", "a2", "a4")):
                zs[(g, L, name)] = _z(r[:, gi, li, j], refs[j])
    assert max(abs(v) for v in zs.values()) < 4, zs


@pytest.mark.slow
def test_one_matrix_kurtosis_sits_below_the_marginal_curve_at_depth():
    """The documented caveat of rmtbase.analytic.network_finite: per-draw standardisation
    removes the draw-to-draw scale fluctuation, so the one-matrix kurtosis is lower at depth.
    Through the table's draw function (rmtbase.stats.element_stats), which also checks that
    its raw moments, rebuilt exactly from mean/std/skewness/kurtosis (ddof 0), agree."""
    r = network_draws(jax.random.fold_in(KEY, 99), "ginibre", 16, (1, 12), (1.0,), 100)
    mu, s, sk, k = (r[f"m_{n}"][:, 0, :] for n in ("mean", "std", "skewness", "excess_kurtosis"))
    a4 = (k + 3) * s**4 + 4 * sk * s**3 * mu + 6 * s**2 * mu**2 + mu**4
    for li, L in enumerate((1, 12)):
        assert abs(_z(s[:, li] ** 2 + mu[:, li] ** 2, nf.element_moments("ginibre", 16, L, 1)[0])) < 4
        assert abs(_z(a4[:, li], nf.element_moments("ginibre", 16, L, 1)[1])) < 4
    marginal = nf.kurtosis_curve("ginibre", 16, (1, 12))
    assert abs(_z(k[:, 0], marginal[0] - 6 / (16 * 15))) < 4     # L = 1: Gaussian (bias −6/N)
    assert _z(k[:, 1], marginal[1]) < -10


def test_input_errors():
    with pytest.raises(InputError, match="kind"):
        pr.network_factors(KEY, "tanh", 2, d=4)
    with pytest.raises(InputError, match="exactly one"):
        pr.network_factors(KEY, "ginibre", 2)
    with pytest.raises(InputError, match="widths"):
        pr.network_factors(KEY, "residual", 2, widths=(4, 4, 4))
    with pytest.raises(InputError, match="depth \\+ 1"):
        pr.network_factors(KEY, "ginibre", 2, widths=(4, 4))
    with pytest.raises(InputError, match="gain"):
        pr.product_network(KEY, "ginibre", 2, -1.0, d=4)


# ------------------------------------------------------------------ slow: the d → ∞ limit laws


def _moment_estimates(kind, d, depth, gain, n, k_max, seed):
    """Per-draw (1/d) Σ λ^k, k = 1..k_max, from the stable singular values."""
    def one(key):
        _, logd, t = pr.network_factors(key, kind, depth, gain, d=d)
        lam = jnp.exp(2 * pr.log_singular_values(logd, t))
        return jnp.stack([jnp.mean(lam**k) for k in range(1, k_max + 1)])

    from rmtbase.ensembles import map_draws
    with jax.enable_x64(True):
        return map_draws(one, jax.random.fold_in(KEY, seed), n, method="map")


@pytest.mark.slow
@pytest.mark.parametrize("kind,depth,gain", [("ginibre", 2, 1.0), ("ginibre", 4, 0.7),
                                             ("residual", 3, 1.0), ("residual", 8, 0.25)])
def test_monte_carlo_moments_extrapolate_to_the_limit_law(kind, depth, gain):
    """(1/d) E tr(MᵀM)^k = m_k + c_k/d + O(1/d²): the Richardson combination 2 m̂(2d) − m̂(d)
    of independent runs at d = 48 and 96 estimates m_k to O(1/d²); |z| < 4 for k = 1..4 with
    the standard error of the combination."""
    k_max = 4
    a = _moment_estimates(kind, 48, depth, gain, 400, k_max, 1)
    b = _moment_estimates(kind, 96, depth, gain, 200, k_max, 2)
    est = 2 * b.mean(0) - a.mean(0)
    se = np.sqrt(4 * b.var(0, ddof=1) / len(b) + a.var(0, ddof=1) / len(a))
    m = pn.moments(kind, depth, gain, k_max)
    z = (est - m) / se
    assert np.max(np.abs(z)) < 4, (z, est, m)
    # and the uncorrected d = 96 estimate is off by O(1/d) in the direction of the correction
    assert np.all(np.abs(b.mean(0) / m - 1) < 0.5)


@pytest.mark.slow
@pytest.mark.parametrize("kind,gain", [("ginibre", 1.0), ("residual", 0.5), ("residual", 2.0)])
def test_lyapunov_spectrum_approaches_the_tucci_quantiles(kind, gain):
    """ln s_i/L at d = 64, L = 64 against μ(t) = −½ ln S(t − 1) at t = (d − i + ½)/d; the
    finite-d bias grows towards the bottom edge (Gaussian: ψ(k/2) against ln(k/2), k = d − i + 1),
    so the top 10 % and bottom 20 % are left out. Gaussian: every exponent also against the
    exact finite-d means (one draw; fluctuations ~ ½√ψ'(k/2)/√L)."""
    d, depth = 64, 64
    _, logd, t = pr.network_factors(jax.random.fold_in(KEY, 5), kind, depth, gain, d=d)
    got = np.asarray(pr.log_singular_values(logd, t)) / depth
    frac = (d - np.arange(1, d + 1) + 0.5) / d
    ref = pn.lyapunov_quantile(frac, kind, gain)
    mid = slice(d // 10, d - d // 5)
    np.testing.assert_allclose(got[mid], ref[mid], atol=0.05)
    if kind == "ginibre":
        np.testing.assert_allclose(got, nf.lyapunov_ginibre(d, gain), atol=0.2)
    lim = pn.lyapunov_limits(kind, gain)
    assert got.mean() == pytest.approx(lim["mean"], abs=0.03)
