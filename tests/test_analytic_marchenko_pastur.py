"""MP_c law: quadrature of the density (independent of the closed-form CDF and the Narayana
moments), float vs mpmath paths, and a fixed-seed Wishart draw."""

import mpmath as mp
import numpy as np
import pytest
from scipy import integrate

from rmtbase.analytic import marchenko_pastur as mpl
from rmtbase.errors import InputError

CS = [0.05, 0.3, 1.0, 2.5]


def _quad(f, a, b):
    return integrate.quad(f, a, b, limit=400, epsabs=1e-13, epsrel=1e-12)[0]


@pytest.mark.parametrize("c", CS)
@pytest.mark.parametrize("sigma2", [1.0, 0.37])
def test_density_mass_and_moments_by_quadrature(c, sigma2):
    a, b = mpl.edges(c, sigma2)
    # substitution x = m + r cos θ removes the square-root edges from the integrand
    m, r = 0.5 * (a + b), 0.5 * (b - a)

    def moment(k):
        return _quad(lambda t: (m + r * np.cos(t)) ** k * float(mpl.density(m + r * np.cos(t), c, sigma2))
                     * r * np.sin(t), 0.0, np.pi)

    assert moment(0) == pytest.approx(min(1.0, 1.0 / c), rel=1e-10)
    # for c > 1 the atom at 0 adds nothing to m_k (k ≥ 1)
    quad_moments = [moment(k) for k in range(1, 5)]
    np.testing.assert_allclose(quad_moments, mpl.moments(c, 4, sigma2), rtol=1e-10)


def test_narayana_numbers_and_low_moments():
    assert mpl.narayana(4) == [1, 6, 6, 1]
    c = 0.7
    m = mpl.moments(c, 3)
    np.testing.assert_allclose(m, [1.0, 1 + c, 1 + 3 * c + c * c], rtol=1e-15)


@pytest.mark.parametrize("c", CS)
def test_cdf_closed_form_vs_mp_quadrature(c):
    a, b = mpl.edges_mp(c, dps=30)
    with mp.workdps(40):
        atom = max(0, 1 - 1 / mp.mpf(c))
        m, r = (a + b) / 2, (b - a) / 2

        def integrand(t):  # x = m + r cos t = a + 2r cos²(t/2): smooth at both edges
            return mpl.density_mp(a + 2 * r * mp.cos(t / 2) ** 2, c, dps=40) * r * mp.sin(t)

        for frac in ("0.001", "0.3", "0.77", "0.999"):
            x = a + mp.mpf(frac) * (b - a)
            ref = atom + mp.quad(integrand, [mp.acos((x - m) / r), mp.pi])
            assert abs(mpl.cdf_mp(x, c, dps=30) - ref) < mp.mpf(10) ** -25
            assert float(mpl.cdf(float(x), c)) == pytest.approx(float(ref), rel=1e-9, abs=1e-14)


@pytest.mark.parametrize("c", CS)
def test_float_vs_mp_paths(c):
    a, b = mpl.edges(c)
    xs = np.linspace(a, b, 9)[1:-1]
    np.testing.assert_allclose(mpl.density(xs, c), [float(mpl.density_mp(x, c, dps=20)) for x in xs],
                               rtol=1e-13)
    np.testing.assert_allclose(mpl.cdf(xs, c), [float(mpl.cdf_mp(x, c, dps=20)) for x in xs],
                               rtol=1e-12, atol=1e-15)
    q = np.array([0.3, 0.5, 0.95])
    np.testing.assert_allclose(mpl.quantile(q, c), [float(mpl.quantile_mp(v, c, dps=20)) for v in q],
                               rtol=1e-12)


@pytest.mark.parametrize("c", CS)
def test_quantile_inverts_cdf_and_atom(c):
    q = np.linspace(0.01, 0.99, 13)
    x = mpl.quantile(q, c)
    got = mpl.cdf(x, c)
    atom = max(0.0, 1 - 1 / c)
    np.testing.assert_allclose(got[q > atom], q[q > atom], atol=1e-12)
    assert np.all(x[q <= atom] == 0.0)
    assert mpl.cdf(-1e-12, c) == 0.0 and mpl.cdf(1e9, c) == 1.0


def test_wishart_draw_matches_law():
    """Eigenvalues of (1/n)XXᵀ, p = 300, n = 600 (c = 1/2): the empirical CDF sits within the
    O(1/p) rigidity scale of the limit (tolerance 0.02 = 6/p), and the mean is the exact σ²."""
    rng = np.random.default_rng(12345)
    p, n, s2 = 300, 600, 2.0
    x = rng.normal(scale=np.sqrt(s2), size=(p, n))
    lam = np.sort(np.linalg.eigvalsh(x @ x.T / n))
    ecdf = np.arange(1, p + 1) / p
    assert np.max(np.abs(ecdf - mpl.cdf(lam, p / n, s2))) < 0.02
    # E tr S / p = σ² exactly; sd of the trace mean is σ² √(2/(np)) -> |z| < 5
    assert abs(lam.mean() - s2) < 5 * s2 * np.sqrt(2 / (n * p))


def test_bad_inputs():
    with pytest.raises(InputError):
        mpl.edges(0.0)
    with pytest.raises(InputError):
        mpl.density([1.0], -1.0)
    with pytest.raises(InputError):
        mpl.quantile([1.5], 0.5)
    with pytest.raises(InputError):
        mpl.moments(0.5, 0)
