"""Weibull anchor, noise curve, Γ closure and Gaussian references, each against an
independent route: F-space Gauss–Legendre with erfinv, a discrete least-squares fit on a fine
F grid, exact digamma/trigamma moments, a bracketed minimiser, and scipy.stats."""

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import integrate, optimize, special, stats

from rmtbase.analytic import gaussian, weibull
from rmtbase.errors import InputError


def _anchor_f_space(a, b, dps):
    """(k0, λ0/σ) from the moments over F directly: g = ln(√2 erfinv F), Gauss–Legendre."""
    with mp.workdps(dps):
        a, b = mp.mpf(a), mp.mpf(b)
        cache = {}

        def gy(F):
            if F not in cache:
                cache[F] = (mp.log(mp.sqrt(2) * mp.erfinv(F)), mp.log(-mp.log1p(-F)))
            return cache[F]

        def mean(h):
            return mp.quad(lambda F: h(*gy(F)), [a, (a + b) / 2, b], method="gauss-legendre") / (b - a)

        g, y = mean(lambda g, y: g), mean(lambda g, y: y)
        k0 = mean(lambda gg, yy: (gg - g) * (yy - y)) / mean(lambda gg, yy: (gg - g) ** 2)
        return k0, mp.exp(g - y / k0)


@pytest.mark.parametrize("a,b", [("0.1", "0.9"), ("0.05", "0.95")])
def test_anchor_vs_f_space_quadrature(a, b):
    k0, lam0 = weibull.anchor_mp(a, b, dps=40)
    k_ref, l_ref = _anchor_f_space(a, b, 50)
    assert abs(k0 - k_ref) < mp.mpf(10) ** -38 and abs(lam0 - l_ref) < mp.mpf(10) ** -38
    fa = weibull.anchor(float(a), float(b))
    assert fa.k0 == pytest.approx(float(k0), rel=1e-13)
    assert fa.lambda0 == pytest.approx(float(lam0), rel=1e-13)


def test_anchor_matches_paper_and_discrete_fit():
    k0, lam0 = weibull.anchor()
    assert round(k0, 4) == 1.2054 and round(lam0, 4) == 0.8875          # paper, eq. (2)
    # the protocol itself on 10^6 exact half-normal quantiles (midpoint F grid): the Riemann
    # sums converge to the continuum integrals at O(N^-2)
    n = 1_000_000
    f = 0.1 + 0.8 * (np.arange(n) + 0.5) / n
    x = np.log(np.sqrt(2) * special.erfinv(f))
    y = np.log(-np.log1p(-f))
    slope, intercept = np.polyfit(x, y, 1)
    assert slope == pytest.approx(k0, rel=1e-9)
    assert math.exp(-intercept / slope) == pytest.approx(lam0, rel=1e-9)


def test_full_trim_exact_moments():
    """F ∈ [0, 1]: ḡ = E ln|Z| = −(γ + ln 2)/2, Var g = π²/8, Ȳ = E ln Exp(1) = −γ."""
    with mp.workdps(60):
        g, y, var, cov = weibull._moments_mp(0, 1)
        assert abs(g + (mp.euler + mp.log(2)) / 2) < mp.mpf(10) ** -50
        assert abs(var - mp.pi**2 / 8) < mp.mpf(10) ** -50
        assert abs(y + mp.euler) < mp.mpf(10) ** -50
    k100 = weibull.anchor(0, 1)
    assert k100.k0 == pytest.approx(float(weibull.anchor_mp(0, 1, dps=20).k0), rel=1e-12)
    # paper: the untrimmed fit underestimates k by 3–7 %
    assert 0.03 < 1 - k100.k0 / weibull.anchor().k0 < 0.07


def test_p_star_closed_form_vs_bracketed_minimiser():
    with mp.workdps(50):
        def dv(p):
            return mp.diff(lambda t: mp.log(t / ((1 - t) * mp.log1p(-t) ** 2)), p)

        root = mp.findroot(dv, (mp.mpf("0.5"), mp.mpf("0.95")), solver="anderson")
        assert abs(root - weibull.p_star_mp(dps=45)) < mp.mpf(10) ** -40
    res = optimize.minimize_scalar(lambda p: float(weibull.noise_curve(p)), bounds=(0.5, 0.95),
                                   method="bounded", options={"xatol": 1e-10})
    assert res.x == pytest.approx(weibull.p_star(), abs=1e-6)
    assert round(weibull.p_star(), 3) == 0.797                              # paper, A.2
    assert round(weibull.noise_ratio(), 1) == 6.5                            # paper, "≈ 6.5×"
    assert float(weibull.noise_ratio_mp(dps=20)) == pytest.approx(weibull.noise_ratio(), rel=1e-13)
    ps = weibull.p_star()
    assert float(weibull.noise_curve(ps)) == pytest.approx(1 / (4 * ps * (1 - ps)), rel=1e-12)


def test_gamma_closure_vs_scipy():
    k, lam = 1.2054, 0.8875
    mean, sd = weibull.weibull_mean_sd(k, lam)
    assert mean == pytest.approx(stats.weibull_min(k, scale=lam).mean(), rel=1e-13)
    assert sd == pytest.approx(stats.weibull_min(k, scale=lam).std(), rel=1e-13)
    hm, hs = weibull.halfnormal_mean_sd(2.0)
    assert hm == pytest.approx(stats.halfnorm(scale=2.0).mean(), rel=1e-14)
    assert hs == pytest.approx(stats.halfnorm(scale=2.0).std(), rel=1e-14)
    r_mean, r_sd = weibull.closure_ratios()
    # a least-squares probability-plot fit is not moment matching (paper, A.1): ratios ≠ 1
    assert r_mean == pytest.approx(float(weibull.closure_ratios_mp(dps=20)[0]), rel=1e-12)
    assert 1.0 < r_mean < 1.1 and 1.0 < r_sd < 1.25


def test_gaussian_references_vs_scipy_and_quadrature():
    assert gaussian.entropy(0.3) == pytest.approx(stats.norm(scale=0.3).entropy(), rel=1e-14)
    assert gaussian.halfnormal_entropy(0.3) == pytest.approx(stats.halfnorm(scale=0.3).entropy(), rel=1e-14)
    assert gaussian.halfnormal_mean(0.3) == pytest.approx(stats.halfnorm(scale=0.3).mean(), rel=1e-14)
    assert gaussian.halfnormal_sd(0.3) == pytest.approx(stats.halfnorm(scale=0.3).std(), rel=1e-14)
    hm = gaussian.halfnormal_mp(1, dps=40)
    with mp.workdps(45):
        ref = mp.quad(lambda x: x * 2 * mp.npdf(x), [0, mp.inf])
        assert abs(hm["mean"] - ref) < mp.mpf(10) ** -38
        ent = -mp.quad(lambda x: mp.npdf(x) * mp.log(mp.npdf(x)), [-mp.inf, 0, mp.inf])
        assert abs(gaussian.entropy_mp(1, dps=40) - ent) < mp.mpf(10) ** -38


def test_quarter_circle():
    moments = [integrate.quad(lambda s, k=k: s ** (2 * k) * gaussian.quarter_circle_density(s), 0, 2)[0]
               for k in range(5)]
    np.testing.assert_allclose(moments, [gaussian.quarter_circle_moment(k) for k in range(5)], rtol=1e-9)
    assert [gaussian.quarter_circle_moment(k) for k in range(5)] == [1, 1, 2, 5, 14]
    for s in (0.3, 1.1, 1.9):
        ref = integrate.quad(gaussian.quarter_circle_density, 0, s)[0]
        assert float(gaussian.quarter_circle_cdf(s)) == pytest.approx(ref, rel=1e-11)
        assert float(gaussian.quarter_circle_cdf_mp(s, dps=20)) == pytest.approx(ref, rel=1e-11)
    q = np.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(gaussian.quarter_circle_cdf(gaussian.quarter_circle_quantile(q)), q, atol=1e-13)
    # a 400 × 400 Gaussian draw: singular values / (σ√d), empirical CDF within 5/d
    rng = np.random.default_rng(3)
    d, sigma = 400, 0.05
    sv = np.sort(np.linalg.svd(rng.normal(0, sigma, (d, d)), compute_uv=False)) / (sigma * math.sqrt(d))
    assert np.max(np.abs(np.arange(1, d + 1) / d - gaussian.quarter_circle_cdf(sv))) < 5 / d


def test_bad_inputs():
    with pytest.raises(InputError):
        weibull.anchor(0.9, 0.1)
    with pytest.raises(InputError):
        weibull.noise_curve([0.0])
    with pytest.raises(InputError):
        gaussian.entropy(-1.0)
    with pytest.raises(InputError):
        weibull.weibull_mean_sd(0.0)
