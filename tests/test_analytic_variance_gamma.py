"""Variance-gamma law of a W_QK entry: closed forms at small d_h, Fourier inversion of the
characteristic function, the Struve-function CDF (Gaunt 2014), quadrature of moments, the
float/mp switch of the Debye expansion, Monte Carlo, and the large-d_h KL asymptotics."""

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import integrate

from rmtbase.analytic import _bessel, gaussian
from rmtbase.analytic import variance_gamma as vg
from rmtbase.errors import InputError


def test_small_n_closed_forms():
    x = np.array([1e-8, 0.2, 1.0, 3.7, 25.0])
    s = 0.6
    y = x / s
    # n = 2: Laplace; n = 4: difference of two Gamma(2) variables, (1 + y) e^{−y}/4
    np.testing.assert_allclose(vg.pdf(x, 2, s), np.exp(-y) / (2 * s), rtol=1e-14)
    np.testing.assert_allclose(vg.pdf(-x, 4, s), (1 + y) * np.exp(-y) / (4 * s), rtol=1e-14)
    with mp.workdps(30):
        for xv in (0.2, 3.7):
            # n = 1: density of a product of two independent normals, ∫ φ(q) φ(x/(s q))/(s|q|) dq
            ref = 2 * mp.quad(lambda q, xv=xv: mp.npdf(q) * mp.npdf(xv / (s * q)) / (s * q),
                              [0, 1, mp.inf])
            assert abs(vg.pdf_mp(xv, 1, s, dps=25) / ref - 1) < 1e-20
            assert float(vg.pdf(xv, 1, s)) == pytest.approx(float(ref), rel=1e-13)


@pytest.mark.parametrize("n", [3, 7])
def test_pdf_is_the_fourier_inverse_of_the_characteristic_function(n):
    with mp.workdps(25):
        for xv in (mp.mpf("0.4"), mp.mpf("2.5")):
            ref = mp.quadosc(lambda t, xv=xv: mp.cos(t * xv) * (1 + t * t) ** (-mp.mpf(n) / 2),
                             [0, mp.inf], omega=xv) / mp.pi
            assert abs(vg.pdf_mp(xv, n, dps=20) / ref - 1) < 1e-15


@pytest.mark.parametrize("n", [1, 3, 64, 4096])
def test_mass_variance_kurtosis_by_quadrature(n):
    s = 0.3
    sd = math.sqrt(n) * s

    def moment(k):
        pts = [0, 1e-3 * sd, 0.5 * sd, sd, 3 * sd, 10 * sd]
        val = sum(integrate.quad(lambda t: t**k * vg.pdf(t, n, s), a, b, limit=200,
                                 epsabs=0, epsrel=1e-12)[0] for a, b in zip(pts[:-1], pts[1:], strict=True))
        val += integrate.quad(lambda t: t**k * vg.pdf(t, n, s), pts[-1], np.inf, limit=200)[0]
        return 2 * val

    m0, m2, m4 = moment(0), moment(2), moment(4)
    assert m0 == pytest.approx(1.0, rel=1e-11)
    assert m2 == pytest.approx(vg.variance(n, s), rel=1e-11)
    assert m4 / m2**2 - 3 == pytest.approx(vg.excess_kurtosis(n), rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("n", [58, 59, 60, 61, 62, 301, 4095, 4096])
def test_float_logpdf_vs_mp_across_the_debye_switch(n):
    sd = math.sqrt(n)
    xs = [1e-9, 0.3, 0.5 * sd, sd, 3 * sd, 10 * sd, 5 * n]
    got = vg.logpdf(xs, n)
    ref = np.array([float(vg.logpdf_mp(x, n, dps=20)) for x in xs])
    np.testing.assert_allclose(got, ref, rtol=1e-14, atol=5e-14)


def test_mp_debye_series_vs_exact_recurrence():
    n = 301  # ν = 150: the mp path uses the Debye series; check it against K_ν by recurrence
    nu = mp.mpf(n - 1) / 2
    with mp.workdps(40):
        for y in (mp.mpf("0.7"), mp.mpf(17), mp.mpf(400)):
            exact = (nu * mp.log(y) + mp.log(_bessel.besselk_mp(nu, y)) - mp.log(mp.pi) / 2
                     - nu * mp.log(2) - mp.loggamma(nu + mp.mpf(1) / 2))
            assert abs(vg.logpdf_mp(y, n, dps=35) - exact) < mp.mpf(10) ** -33


@pytest.mark.parametrize("nu", [0, 1, 2, 3, 13, "40.5", 41])
def test_besselk_mp_paths(nu):
    with mp.workdps(30):
        for z in ("0.5", "3", "15", "40"):
            z = mp.mpf(z)
            assert abs(_bessel.besselk_mp(mp.mpf(nu), z) / mp.besselk(mp.mpf(nu), z) - 1) < 1e-27


def _sf_struve(y, n, dps=120):
    """½ − (y/2)[K_ν L_{ν−1} + K_{ν−1} L_ν](y), ν = (n−1)/2 (Gaunt 2014), at high precision."""
    with mp.workdps(dps):
        nu, y = mp.mpf(n - 1) / 2, mp.mpf(y)
        return mp.mpf(1) / 2 - y / 2 * (mp.besselk(nu, y) * mp.struvel(nu - 1, y)
                                        + mp.besselk(nu - 1, y) * mp.struvel(nu, y))


@pytest.mark.parametrize("n", [3, 10, 64])
def test_cdf_vs_struve_closed_form(n):
    s = 1.7
    sd = math.sqrt(n)
    ys = [1e-4, 0.3 * sd, sd, 4 * sd, 12 * sd + 20]
    ref = [float(_sf_struve(y, n)) for y in ys]
    np.testing.assert_allclose(vg.sf(np.array(ys) * s, n, s), ref, rtol=1e-12)
    np.testing.assert_allclose(vg.cdf(-np.array(ys) * s, n, s), ref, rtol=1e-12)
    np.testing.assert_allclose(vg.cdf(np.array(ys) * s, n, s), 1 - np.array(ref), rtol=1e-13)
    if n == 10:
        for y in (ys[1], ys[-1]):
            assert float(vg.cdf_mp(-y * s, n, s, dps=20)) == pytest.approx(float(_sf_struve(y, n)), rel=1e-15)


def test_cdf_monte_carlo():
    """200 000 sums of 5 products of N(0, 0.5²)·N(0, 2²): binomial |z| < 5 at three points."""
    rng = np.random.default_rng(99)
    n, m = 5, 200_000
    x = (rng.normal(0, 0.5, (m, n)) * rng.normal(0, 2.0, (m, n))).sum(axis=1)
    for t in (-2.0, 0.5, 4.0):
        p = float(vg.cdf(t, n, 1.0))
        assert abs((x <= t).mean() - p) < 5 * math.sqrt(p * (1 - p) / m)


def test_entropy_closed_form_and_paths():
    s = 0.35
    assert vg.entropy(2, s) == pytest.approx(1 + math.log(2 * s), rel=1e-14)        # Laplace
    assert float(vg.entropy_mp(2, s, dps=20)) == pytest.approx(1 + math.log(2 * s), rel=1e-15)
    for n in (64, 4096):
        assert vg.entropy(n) == pytest.approx(float(vg.entropy_mp(n, dps=16)), rel=1e-13)


def test_kl_direct_vs_entropy_difference_and_paths():
    n = 64
    with mp.workdps(30):
        direct = vg.kl_to_gaussian_mp(n, dps=25)
        diff = gaussian.entropy_mp(mp.sqrt(n), dps=25) - vg.entropy_mp(n, dps=25)
        assert abs(direct / diff - 1) < 1e-18
    assert vg.kl_to_gaussian(n) == pytest.approx(float(direct), rel=1e-12)
    assert vg.kl_to_gaussian(2) == pytest.approx(0.5 * math.log(4 * math.pi * math.e) - 1 - math.log(2), rel=1e-13)


def test_kl_large_n_keeps_relative_precision():
    """KL ≈ κ₄²/(48 σ⁸) = 3/(4n²) (Edgeworth), with O(1/n) relative corrections."""
    n = 4096
    kl = vg.kl_to_gaussian(n)
    assert kl * 4 * n * n / 3 == pytest.approx(1.0, abs=10 / n)
    assert kl == pytest.approx(float(vg.kl_to_gaussian_mp(n, dps=16)), rel=1e-11)


def test_bad_inputs():
    with pytest.raises(InputError):
        vg.pdf(1.0, 0)
    with pytest.raises(InputError):
        vg.pdf(1.0, 2.5)
    with pytest.raises(InputError):
        vg.entropy(4, s=0.0)
    assert vg.excess_kurtosis(12) == 0.5 and vg.variance(3, 2.0) == 12.0
