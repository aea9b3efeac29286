"""MP_c ⊠ MP_c and the exact finite-d moments of Σλ, each checked by an independent route:
power-series reversal, the Penson–Życzkowski closed form, cubic discriminants, quadrature,
a contour integral, exact Gaussian moment enumeration (sympy/Isserlis) and Monte Carlo."""

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
import sympy as sp
from scipy import integrate

from rmtbase.analytic import product as pr
from rmtbase.errors import InputError

CS = [1 / 64, 1 / 12, 0.5, 0.9, 1.0]


def test_fuss_narayana_equals_series_reversal():
    """Coefficients of ψ solving ψ = z(1+ψ)(1+cψ)², by fixed-point iteration of truncated
    power series in exact rationals (no Lagrange inversion involved)."""
    z = sp.symbols("z")
    c = sp.Rational(2, 7)
    order = 8
    psi = sp.Integer(0)
    for _ in range(order):
        psi = sp.series(z * (1 + psi) * (1 + c * psi) ** 2, z, 0, order + 1).removeO()
    coeffs = [psi.coeff(z, k) for k in range(1, order + 1)]
    cf = Fraction(2, 7)
    ours = [sum(a * cf**i for i, a in enumerate(pr.fuss_narayana(k))) for k in range(1, order + 1)]
    assert [sp.Rational(m.numerator, m.denominator) for m in ours] == coeffs


def test_fuss_catalan_at_c1():
    assert [sum(pr.fuss_narayana(k)) for k in range(1, 10)] == [
        math.comb(3 * k, k) // (2 * k + 1) for k in range(1, 10)]


def _pz_density(x):
    """Penson & Życzkowski (2011) closed form of the s = 2 Fuss–Catalan density on (0, 27/4]."""
    r = 27 + 3 * np.sqrt(81 - 12 * x)
    return (2 ** (1 / 3) * np.sqrt(3) / (12 * np.pi)
            * (2 ** (1 / 3) * r ** (2 / 3) - 6 * x ** (1 / 3)) / (x ** (2 / 3) * r ** (1 / 3)))


def test_penson_zyczkowski_closed_form():
    # the transcription itself is validated by its mass and first moments ...
    mass = [integrate.quad(lambda t, k=k: t**k * _pz_density(t), 0, 6.75, limit=400)[0]
            for k in range(4)]
    np.testing.assert_allclose(mass, [1, 1, 3, 12], rtol=1e-8)
    # ... and our cubic-root density agrees with it pointwise
    x = np.array([1e-6, 1e-3, 0.1, 0.5, 1.0, 2.0, 4.0, 6.0, 6.7, 6.7499])
    np.testing.assert_allclose(pr.density(x, 1.0), _pz_density(x), rtol=1e-10)


def _integrate_law(f, c, upto=None):
    """∫_{x₋}^{upto} f(x) ρ(x) dx by QUADPACK after a substitution that removes the edge
    singularities: x = x₋ + (x₊ − x₋)(1 − cos t)/2 (square-root edges), and for c = 1, where
    x₋ = 0 and ρ ~ x^{-2/3}, x = x₊ sin²(t/2)³ ... written as x = x₊ w³, w = (1 − cos t)/2."""
    lo, hi = pr.edges(c)
    if c < 1:
        def jac(t):
            return lo + 0.5 * (hi - lo) * (1 - np.cos(t)), 0.5 * (hi - lo) * np.sin(t)
    else:
        def jac(t):
            w = 0.5 * (1 - np.cos(t))
            return hi * w**3, 3 * hi * w**2 * 0.5 * np.sin(t)
    t_end = np.pi
    if upto is not None:
        w_end = (upto - lo) / (hi - lo) if c < 1 else (upto / hi) ** (1 / 3)
        t_end = np.arccos(1 - 2 * w_end)

    def g(t):
        x, dx = jac(t)
        return f(x) * pr.density(np.array([x]), c)[0] * dx if x > 0 else 0.0

    return integrate.quad(g, 0, t_end, limit=400, epsabs=1e-13, epsrel=1e-11)[0]


@pytest.mark.parametrize("c", CS)
def test_density_mass_and_moments_by_quadrature(c):
    got = [_integrate_law(lambda x, k=k: x**k, c) for k in range(5)]
    np.testing.assert_allclose(got, [1.0, *pr.moments(c, 4)], rtol=1e-10)


@pytest.mark.parametrize("c", [sp.Rational(1, 12), sp.Rational(1, 2), sp.Rational(9, 10)])
def test_edges_are_double_roots_of_the_cubic(c):
    """Edges = zeros of the discriminant (in u) of u³ + (2+c)u² + (1+2c−x)u + c."""
    u, x = sp.symbols("u x")
    disc = sp.Poly(sp.discriminant(u**3 + (2 + c) * u**2 + (1 + 2 * c - x) * u + c, u), x)
    roots = sorted(float(r) for r in sp.Poly(disc).nroots(n=30) if abs(sp.im(r)) < 1e-20 and sp.re(r) > 0)
    lo, hi = pr.edges_mp(float(c), dps=30)
    assert roots[-1] == pytest.approx(float(hi), rel=1e-14)
    assert roots[-2] == pytest.approx(float(lo), rel=1e-12)


@pytest.mark.parametrize("c", [Fraction(1, 12), Fraction(1, 2), Fraction(1)])
def test_upper_edge_from_moment_growth(c):
    """m_{k+1}/m_k = x₊(1 − 3/(2k) + O(k⁻²)) for a square-root edge."""
    k = 400
    mk = [sum(a * c**i for i, a in enumerate(pr.fuss_narayana(j))) for j in (k, k + 1)]
    est = float(mk[1] / mk[0]) / (1 - 1.5 / k)
    if c == 1:   # at c = 1 the lower edge is 0 with ρ ~ x^{-2/3}; the upper edge is still √
        assert est == pytest.approx(6.75, rel=1e-4)
    assert est == pytest.approx(pr.edges(float(c))[1], rel=1e-4)


@pytest.mark.parametrize("c", CS)
def test_density_vanishes_outside_and_is_positive_inside(c):
    lo, hi = pr.edges(c)
    assert np.all(pr.density(np.array([lo - 1e-9, hi + 1e-9, hi * 2]), c) == 0)
    inside = np.linspace(lo, hi, 50)[1:-1]
    assert np.all(pr.density(inside, c) > 0)
    # square-root vanishing at the upper edge: ρ(x₊ − ε)/√ε is ~ constant
    eps = np.array([1e-6, 1e-8])
    ratio = pr.density(hi - eps, c) / np.sqrt(eps)
    assert ratio[0] == pytest.approx(ratio[1], rel=1e-2)


@pytest.mark.parametrize("c", [1 / 12, 0.5, 1.0])
def test_cdf_closed_form_vs_quadrature_and_mp(c):
    lo, hi = pr.edges(c)
    xs = lo + (hi - lo) * np.array([0.01, 0.2, 0.5, 0.8, 0.99])
    ref = [_integrate_law(lambda t: 1.0, c, upto=x) for x in xs]
    np.testing.assert_allclose(pr.cdf(xs, c), ref, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(pr.cdf(xs, c), [float(pr.cdf_mp(x, c, dps=20)) for x in xs],
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(pr.density(xs, c), [float(pr.density_mp(x, c, dps=20)) for x in xs],
                               rtol=1e-11)
    with mp.workdps(30):   # mp CDF vs mp quadrature of the mp density (x = x₋ + v³ removes
        x = mp.mpf(xs[2])  # the x^{-2/3} singularity at c = 1 and the √ edge otherwise)
        x_lo = pr.edges_mp(c, dps=30)[0]
        ref_mp = mp.quad(lambda v: pr.density_mp(x_lo + v**3, c, dps=30) * 3 * v**2,
                         [0, mp.cbrt(x - x_lo)])
        assert abs(pr.cdf_mp(x, c, dps=30) - ref_mp) < mp.mpf(10) ** -25


def test_quantile_inverts_cdf():
    for c in (1 / 12, 1.0):
        q = np.array([0.001, 0.25, 0.5, 0.9, 0.999])
        np.testing.assert_allclose(pr.cdf(pr.quantile(q, c), c), q, atol=1e-12)
        assert float(pr.quantile_mp(0.5, c, dps=20)) == pytest.approx(float(pr.quantile(0.5, c)), rel=1e-12)


def _xlogx_contour_mp(c):
    """−Im ∫ ln X(u) (c+u) X'(u) du/(πc) along a lower semicircle u₋ → u₊ (see module doc)."""
    c = mp.mpf(c)
    s = mp.sqrt(c * c + 8 * c)
    u_lo, u_hi = -(c + s) / 4, 2 * c / (c + s)
    mid, rad = (u_lo + u_hi) / 2, (u_hi - u_lo) / 2

    def f(theta):
        e = mp.expj(theta)
        u = mid + rad * e
        x_u = (c + u) * (1 + u) ** 2 / u
        dx = ((1 + u) ** 2 + 2 * (c + u) * (1 + u)) / u - x_u / u
        return mp.im((mp.log(c + u) + 2 * mp.log(1 + u) - mp.log(u)) * (c + u) * dx * 1j * rad * e)

    return -mp.quad(f, [-mp.pi, -mp.pi / 2, 0]) / (mp.pi * c)


@pytest.mark.parametrize("c", ["0.015625", "0.3", "1"])
def test_xlogx_closed_form_vs_contour_integral(c):
    with mp.workdps(50):
        assert abs(pr.xlogx_mean_mp(c, dps=50) - _xlogx_contour_mp(mp.mpf(c))) < mp.mpf(10) ** -45


@pytest.mark.parametrize("c", [1 / 12, 0.5, 1.0])
def test_xlogx_closed_form_vs_x_quadrature(c):
    ref = _integrate_law(lambda t: t * np.log(t), c)
    assert pr.xlogx_mean(c) == pytest.approx(ref, rel=1e-10)


def _product_spectra(rng, d, d_h, draws):
    out = []
    for _ in range(draws):
        wq, wk = rng.standard_normal((2, d_h, d))
        lq = np.linalg.cholesky(wq @ wq.T)
        lam = np.linalg.eigvalsh(lq.T @ (wk @ wk.T) @ lq)
        out.append(lam / d**2)
    return np.array(out)


def test_spectral_entropy_and_npr_limits_against_monte_carlo():
    """d = 1024, d_h = 128, 24 draws: the draw-to-draw sd of the statistics is O(1/d_h) and
    their finite-size bias O(1/d_h) as well, so we allow 5 SE + 2/d_h."""
    rng = np.random.default_rng(2024)
    d, d_h = 1024, 128
    x = _product_spectra(rng, d, d_h, 24)
    p = x / x.sum(axis=1, keepdims=True)
    ent = -(p * np.log(p)).sum(axis=1)
    npr = x.sum(axis=1) ** 2 / (d_h * (x**2).sum(axis=1))
    for values, limit in ((ent, pr.spectral_entropy_limit(d, d_h)), (npr, pr.npr_limit(d_h / d))):
        se = values.std(ddof=1) / np.sqrt(values.size)
        assert abs(values.mean() - limit) < 5 * se + 2 / d_h
    # the whole spectrum follows the law: empirical CDF within the O(1/d_h) rigidity scale
    ecdf = np.arange(1, d_h + 1) / d_h
    assert np.max(np.abs(ecdf - pr.cdf(np.sort(x[0]), d_h / d))) < 6 / d_h


def _gaussian_expectation(poly, gens):
    """E of a polynomial in independent standard normals: E v^e = (e−1)!! for even e."""
    total = 0
    for monom, coef in poly.terms():
        term = coef
        for e in monom:
            if e % 2:
                term = 0
                break
            term *= sp.factorial2(e - 1) if e else 1
        total += term
    return total


@pytest.mark.parametrize("d,d_h", [(2, 1), (2, 2), (3, 2)])
def test_exact_moments_by_isserlis_enumeration(d, d_h):
    q = sp.Matrix(d_h, d, lambda i, j: sp.Symbol(f"q{i}_{j}"))
    k = sp.Matrix(d_h, d, lambda i, j: sp.Symbol(f"k{i}_{j}"))
    gens = list(q) + list(k)
    m = q.T * k
    s1 = sp.Poly(sum(v**2 for v in m), *gens)
    mm = m * m.T
    s2 = sp.Poly(sum(v**2 for v in mm), *gens)
    e1 = _gaussian_expectation(s1, gens)
    e2 = _gaussian_expectation(s2, gens)
    e11 = _gaussian_expectation(s1 * s1, gens)
    assert e1 == pr.expected_sum_lambda(d, d_h)
    assert e2 == pr.expected_sum_lambda2(d, d_h)
    assert e11 - e1**2 == pr.var_sum_lambda(d, d_h)


def test_exact_moments_scale_and_monte_carlo():
    sq, sk = 0.7, 1.3
    d, d_h = 10, 4
    s8 = (sq * sk) ** 4
    assert pr.expected_sum_lambda2(d, d_h, sq, sk) == pytest.approx(pr.expected_sum_lambda2(d, d_h) * s8, rel=1e-15)
    rng = np.random.default_rng(7)
    n = 100_000
    wq = rng.normal(scale=sq, size=(n, d_h, d))
    wk = rng.normal(scale=sk, size=(n, d_h, d))
    g = np.einsum("nhi,nki->nhk", wq, wq) @ np.einsum("nhi,nki->nhk", wk, wk)
    s1 = np.trace(g, axis1=1, axis2=2)               # Σλ = tr(G_Q G_K)
    s2 = np.einsum("nij,nji->n", g, g)               # Σλ² = tr((G_Q G_K)²)
    for sample, exact in ((s1, pr.expected_sum_lambda(d, d_h, sq, sk)),
                          (s2, pr.expected_sum_lambda2(d, d_h, sq, sk))):
        assert abs(sample.mean() - exact) < 5 * sample.std() / np.sqrt(n)
    v = s1.var()
    se_v = np.sqrt(np.mean((s1 - s1.mean()) ** 4) - v**2) / np.sqrt(n)
    assert abs(v - pr.var_sum_lambda(d, d_h, sq, sk)) < 5 * se_v


def test_bad_inputs():
    with pytest.raises(InputError):
        pr.edges(1.5)
    with pytest.raises(InputError):
        pr.density([1.0], 0)
    with pytest.raises(InputError):
        pr.spectral_entropy_limit(64, 128)
    with pytest.raises(InputError):
        pr.expected_sum_lambda(64, 8, sigma_q=-1.0)
