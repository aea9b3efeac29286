"""Exact finite-d moments of product networks against independent computations.

The reference expectations are Gaussian integrals done by tensor-product Gauss–Hermite
quadrature: every entry of every W_l is a variable, and E f for a polynomial f of degree ≤ 5 in
each variable is exact with the 3-point rule (nodes 0, ±√3; weights 2/3, 1/6, 1/6 for N(0, 1)).
tr((MᵀM)²), (tr MᵀM)² and a⁴ (a an entry of M) have degree 4 in each entry, so the quadrature
is exact up to float rounding. Small widths only (3^{#entries} nodes); Monte Carlo covers larger d
(tests/test_products.py). The Lyapunov exponents are checked against mpmath quadrature of
E ln χ²_k."""

from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from rmtbase.analytic import network_finite as nf
from rmtbase.errors import InputError

_NODES = np.array([-np.sqrt(3.0), 0.0, np.sqrt(3.0)])
_WEIGHTS = np.array([1 / 6, 2 / 3, 1 / 6])


def _gauss_hermite_moments(kind, widths, gain):
    """(E tr MᵀM, E tr(MᵀM)², E (tr MᵀM)², E a², E a⁴) with a = M[1, 0], by exact quadrature."""
    shapes = [(widths[l], widths[l - 1]) for l in range(1, len(widths))]
    n = sum(a * b for a, b in shapes)
    idx = np.indices((3,) * n).reshape(n, -1).T
    x, w = _NODES[idx], np.prod(_WEIGHTS[idx], axis=1)
    m = np.broadcast_to(np.eye(widths[0]), (x.shape[0], widths[0], widths[0]))
    off = 0
    for l, (a, b) in enumerate(shapes, 1):
        s = np.sqrt(gain / (widths[l - 1] if kind == "ginibre" else widths[0]))
        wl = s * x[:, off:off + a * b].reshape(-1, a, b)
        off += a * b
        m = wl @ m if kind == "ginibre" else m + wl @ m
    g = np.swapaxes(m, 1, 2) @ m
    tr = np.trace(g, axis1=1, axis2=2)
    tr2 = np.einsum("nij,nji->n", g, g)
    a = m[:, 1, 0]
    return np.array([w @ tr, w @ tr2, w @ tr**2, w @ a**2, w @ a**4])


CASES = [("ginibre", (2, 2, 2, 2), Fraction(3, 2)), ("ginibre", (3, 3), Fraction(1)),
         ("ginibre", (3, 2, 3), Fraction(1)), ("ginibre", (2, 1, 3, 2), Fraction(7, 10)),
         ("residual", (2, 2, 2, 2), Fraction(7, 10)), ("residual", (2, 2), Fraction(2)),
         ("residual", (3, 3), Fraction(1, 3)), ("residual", (2, 2, 2), Fraction(1))]


@pytest.mark.parametrize("kind,widths,g", CASES)
def test_traces_and_element_moments_equal_gauss_hermite_quadrature(kind, widths, g):
    depth = len(widths) - 1
    wid = None if len(set(widths)) == 1 else widths
    ref = _gauss_hermite_moments(kind, widths, float(g))
    e1, e2, x = nf.trace_moments(kind, widths[0], depth, g, widths=wid)
    a2, a4 = nf.element_moments(kind, widths[0], depth, g, widths=wid)
    got = [e1, e2, x, a2, a4]
    assert all(isinstance(v, Fraction) for v in got)   # exact arithmetic for Fraction gains
    np.testing.assert_allclose([float(v) for v in got], ref, rtol=1e-12)
    assert nf.expected_trace(kind, widths[0], depth, g, widths=wid) == e1
    assert nf.expected_trace_sq(kind, widths[0], depth, g, widths=wid) == e2


@pytest.mark.parametrize("kind,d,depth,g", [("residual", 2, 2, Fraction(1)),
                                             ("residual", 3, 1, Fraction(1, 2)),
                                             ("ginibre", 2, 2, Fraction(3, 2))])
def test_stream_kurtosis_equals_gauss_hermite_quadrature(kind, d, depth, g):
    """y = M_L x with x ~ N(0, I_d): x's entries are quadrature variables too (y⁴ has degree 4
    in each)."""
    n = depth * d * d + d
    idx = np.indices((3,) * n).reshape(n, -1).T
    z, w = _NODES[idx], np.prod(_WEIGHTS[idx], axis=1)
    y = z[:, :d]
    s = np.sqrt(float(g) / d)
    for l in range(depth):
        wl = s * z[:, d + l * d * d: d + (l + 1) * d * d].reshape(-1, d, d)
        step = np.einsum("nij,nj->ni", wl, y)
        y = step if kind == "ginibre" else y + step
    y0 = y[:, 0]
    ref = (w @ y0**4) / (w @ y0**2) ** 2 - 3
    got = nf.stream_kurtosis(kind, d, depth, g)
    assert isinstance(got, Fraction) and float(got) == pytest.approx(ref, rel=1e-10, abs=1e-12)
    assert nf.kurtosis_curve(kind, d, [depth], float(g), of="stream")[0] == pytest.approx(float(got))


@pytest.mark.parametrize("depth", [1, 2, 5, 30])
def test_expected_trace_closed_forms(depth):
    g = Fraction(5, 4)
    assert nf.expected_trace("ginibre", 7, depth, g) == g**depth * 7
    assert nf.expected_trace("residual", 7, depth, g) == (1 + g) ** depth * 7
    assert nf.expected_trace("ginibre", 4, 2, g, widths=(4, 9, 3)) == g**2 * 3


def test_single_wishart_layer_is_the_classical_wishart_moment():
    """E tr(WᵀW)² = s⁴ n p (n + p + 1) for W (n × p) with N(0, s²) entries (Wishart 1928)."""
    n, p, g = 5, 3, Fraction(2)
    s2 = g / p
    assert nf.expected_trace_sq("ginibre", p, 1, g, widths=(p, n)) == s2 * s2 * n * p * (n + p + 1)


@pytest.mark.parametrize("d", [2, 5, 64])
def test_gaussian_element_kurtosis_closed_form(d):
    """An entry of W_L M_{L−1} given M_{L−1} is N(0, s² r²): kurtosis 3 E r⁴/(E r²)² − 3 with
    r² a product of independent scaled χ²_d, E χ⁴_d/(E χ²_d)² = 1 + 2/d per layer."""
    for depth in (1, 2, 7):
        assert nf.element_kurtosis("ginibre", d, depth, 1) == 3 * (Fraction(d + 2, d) ** (depth - 1) - 1)


def test_float_and_mpf_arguments_keep_their_arithmetic():
    exact = nf.element_kurtosis("residual", 12, 6, Fraction(1, 2))
    f = nf.element_kurtosis("residual", 12, 6, 0.5)
    assert isinstance(f, float) and f == pytest.approx(float(exact), rel=1e-13)
    with mp.workdps(40):
        m = nf.element_kurtosis("residual", 12, 6, mp.mpf(1) / 2)
        assert isinstance(m, mp.mpf)
        assert abs(m - mp.mpf(exact.numerator) / exact.denominator) < mp.mpf(10) ** -35


def test_kurtosis_curve_increases_and_inverts():
    depths = np.arange(1, 49)
    for kind in ("residual", "ginibre"):
        curve = nf.kurtosis_curve(kind, 384, depths, 1.0)
        assert curve[0] == 0.0 and np.all(np.diff(curve) > 0)
        for L in (3, 17.5, 40):
            k = np.interp(L, depths, curve)
            assert nf.depth_from_kurtosis(k, 384, kind=kind, max_depth=48) == pytest.approx(L, rel=1e-9)
        exact = [float(nf.element_kurtosis(kind, 24, L, Fraction(3, 4))) for L in (1, 5, 13)]
        np.testing.assert_allclose(nf.kurtosis_curve(kind, 24, [1, 5, 13], 0.75), exact,
                                   rtol=1e-13, atol=1e-15)
    assert np.isnan(nf.depth_from_kurtosis(1e6, 384))
    assert np.isnan(nf.depth_from_kurtosis(-1.0, 384))


def test_residual_finite_d_tends_to_the_free_limit():
    """(E tr(MᵀM)²)/d → m₂ of the free power with a relative correction O(L/d)."""
    from rmtbase.analytic import product_network as pn

    g = Fraction(1)
    m2 = pn.moments_exact("residual", 6, g, 2)[1]
    rel = [float(nf.expected_trace_sq("residual", d, 6, g) / d / m2 - 1) for d in (100, 1000, 10000)]
    assert rel[0] > rel[1] > rel[2] > 0
    assert rel[1] / rel[2] == pytest.approx(10, rel=0.02)     # first order in 1/d


@pytest.mark.parametrize("d", [1, 2, 7])
def test_lyapunov_gaussian_is_the_mean_log_chi(d):
    """μ_i = E ln|R_ii| with R_ii² ~ (G/d) χ²_{d−i+1}: ½[ln(G/d) + E ln χ²_k], the expectation by
    mpmath quadrature of the χ² density (not the digamma closed form the module uses)."""
    g = 1.7
    got = nf.lyapunov_ginibre(d, g)
    with mp.workdps(30):
        got_mp = nf.lyapunov_ginibre_mp(d, mp.mpf(g), dps=25)
        for i in range(1, d + 1):
            k = mp.mpf(d - i + 1)
            # E ln χ²_k = ∫ ln(u²) f(u²) 2u du, f the χ²_k density (u = √x: no x^{−1/2} at 0)
            c = 2 / (2 ** (k / 2) * mp.gamma(k / 2))
            e_ln = mp.quad(lambda u: c * mp.log(u * u) * u ** (k - 1) * mp.exp(-u * u / 2),  # noqa: B023
                           [0, 1, mp.sqrt(k), mp.inf])
            ref = (mp.log(mp.mpf(g) / d) + e_ln) / 2
            assert abs(got_mp[i - 1] - ref) < mp.mpf(10) ** -18
            assert got[i - 1] == pytest.approx(float(ref), rel=1e-13, abs=1e-15)
    assert np.all(np.diff(got) < 0)


def test_input_errors():
    with pytest.raises(InputError, match="d"):
        nf.expected_trace("ginibre", 0, 2)
    with pytest.raises(InputError, match="disagrees"):
        nf.trace_moments("ginibre", 5, 2, 1, widths=(4, 4, 3))
    with pytest.raises(InputError, match="widths"):
        nf.element_moments("residual", None, 1, 1, widths=(3, 3))
    with pytest.raises(InputError, match="gain"):
        nf.element_kurtosis("residual", 8, 2, 0)
