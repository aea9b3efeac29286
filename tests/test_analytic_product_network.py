"""Limit laws of product networks against independent computations: Fuss–Catalan and
Penson–Życzkowski closed forms, Marchenko–Pastur, MP_c⊠MP_c (Fuss–Narayana), free multiplicative
convolution by enumeration of non-crossing partitions, moments of (1 + c)*(1 + c) for a circular
c by counting non-crossing pairings, the Dozier–Silverstein cubic, the trigonometric
parametrisation of the Fuss–Catalan density, quadrature, and the Fuglede–Kadison determinant."""

import itertools
import math
from fractions import Fraction
from functools import cache

import mpmath as mp
import numpy as np
import pytest

from rmtbase.analytic import marchenko_pastur as mpl
from rmtbase.analytic import product
from rmtbase.analytic import product_network as pn
from rmtbase.analytic._network_kind import KINDS
from rmtbase.errors import InputError

# ---------------------------------------------------------------- free probability by enumeration


@cache
def noncrossing(n):
    """NC(n) as tuples of blocks (each a sorted tuple), by brute force over set partitions."""
    def partitions(items):
        if not items:
            yield []
            return
        first, rest = items[0], items[1:]
        for p in partitions(rest):
            yield [(first,)] + p
            for i in range(len(p)):
                yield p[:i] + [tuple(sorted((first,) + p[i]))] + p[i + 1:]

    def crossing(p):
        for a, b in itertools.combinations(p, 2):
            for i, k in itertools.combinations(a, 2):
                for j, l in itertools.combinations(b, 2):
                    if i < j < k < l or j < i < l < k:
                        return True
        return False

    return tuple(tuple(sorted(p)) for p in partitions(tuple(range(n))) if not crossing(p))


def kreweras(p, n):
    """Blocks of K(π) = π⁻¹γ, γ = (0 1 … n−1) (Nica & Speicher, Lecture 18)."""
    perm = {}
    for b in p:
        for i, x in enumerate(b):
            perm[x] = b[(i + 1) % len(b)]
    inv = {v: k for k, v in perm.items()}
    k = {i: inv[(i + 1) % n] for i in range(n)}
    seen, blocks = set(), []
    for i in range(n):
        if i not in seen:
            cyc, j = [], i
            while j not in seen:
                seen.add(j)
                cyc.append(j)
                j = k[j]
            blocks.append(tuple(cyc))
    return blocks


def free_cumulants(m):
    """κ_1..κ_n from m_1..m_n (moment–cumulant formula over NC(n))."""
    kappa = []
    for n in range(1, len(m) + 1):
        rest = sum(math.prod(kappa[len(b) - 1] for b in p) for p in noncrossing(n) if len(p) > 1)
        kappa.append(m[n - 1] - rest)
    return kappa


def free_product_moments(ma, mb):
    """m_n(ab) = Σ_{π∈NC(n)} κ_π(a) m_{K(π)}(b) for a, b free."""
    ka = free_cumulants(ma)
    return [sum(math.prod(ka[len(b) - 1] for b in p) * math.prod(mb[len(b) - 1] for b in kreweras(p, n))
                for p in noncrossing(n)) for n in range(1, len(ma) + 1)]


def circular_moments(g, k):
    """m_n = τ[((1 + c)*(1 + c))^n] for c circular of variance g: expand into words in c, c* and
    count non-crossing pairings of c with c* (each pair contributes g)."""
    @cache
    def pairings(word):
        if not word:
            return 1
        if len(word) % 2:
            return 0
        return sum(pairings(word[1:j]) * pairings(word[j + 1:])
                   for j in range(1, len(word), 2) if word[j] != word[0])

    out = []
    for n in range(1, k + 1):
        total = Fraction(0)
        for choice in itertools.product((0, 1), repeat=2 * n):   # 1 picks c* (odd) / c (even)
            word = tuple("s" if i % 2 == 0 else "c" for i, c in enumerate(choice) if c)
            total += pairings(word) * Fraction(g) ** (len(word) // 2)
        out.append(total)
    return out


# ---------------------------------------------------------------- moments


@pytest.mark.parametrize("depth", [1, 2, 3, 5, 8])
def test_square_gaussian_moments_are_fuss_catalan(depth):
    g = Fraction(3, 2)
    m = pn.moments_exact("ginibre", depth, g, 8)
    assert m == [g ** (k * depth) * Fraction(math.comb((depth + 1) * k, k), depth * k + 1)
                 for k in range(1, 9)]
    assert [pn.fuss_catalan(depth, k) for k in range(1, 9)] == [int(x / g ** (k * depth))
                                                               for k, x in enumerate(m, 1)]


@pytest.mark.parametrize("d0,d1,g", [(8, 4, 1), (4, 8, 2), (10, 3, 0.5)])
def test_one_rectangular_layer_is_marchenko_pastur(d0, d1, g):
    # W (d1, d0) with N(0, g/d0): WᵀW has law MP_c(σ²) with c = d0/d1, σ² = g d1/d0
    m = pn.moments("ginibre", 1, g, 6, widths=(d0, d1))
    np.testing.assert_allclose(m, mpl.moments(d0 / d1, 6, g * d1 / d0), rtol=1e-13)
    lo, hi = pn.edges("ginibre", 1, g, widths=(d0, d1))
    np.testing.assert_allclose((lo, hi), mpl.edges(d0 / d1, g * d1 / d0), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("d,d_h", [(16, 4), (12, 9), (5, 1)])
def test_two_layers_through_a_bottleneck_are_mp_box_mp(d, d_h):
    """W_QK = W_Qᵀ W_K is the product network with widths (d, d_h, d) up to scale: x = c μ."""
    c = d_h / d
    m = pn.moments_exact("ginibre", 2, 1, 6, widths=(d, d_h, d))
    ref = [Fraction(c).limit_denominator(10**6) ** (1 - k) * x for k, x in
           enumerate([sum(Fraction(a) * Fraction(d_h, d) ** i for i, a in
                          enumerate(product.fuss_narayana(j))) for j in range(1, 7)], 1)]
    assert m == ref
    lo, hi = pn.edges("ginibre", 2, 1.0, widths=(d, d_h, d))
    np.testing.assert_allclose(np.array([lo, hi]) * c, product.edges(c), rtol=1e-11)
    x = np.linspace(product.edges(c)[0], product.edges(c)[1], 9)[1:-1]
    np.testing.assert_allclose(pn.density(x / c, "ginibre", 2, 1.0, widths=(d, d_h, d)),
                               c * c * product.density(x, c), rtol=1e-9)
    assert pn.atom("ginibre", (d, d_h, d)) == pytest.approx(1 - c)


def test_gaussian_products_are_free_products_of_marchenko_pastur():
    mp1 = [Fraction(math.comb(2 * k, k), k + 1) for k in range(1, 7)]   # Catalan: MP_1
    two = free_product_moments(mp1, mp1)
    assert two == pn.moments_exact("ginibre", 2, 1, 6)
    assert free_product_moments(two, mp1) == pn.moments_exact("ginibre", 3, 1, 6)


@pytest.mark.parametrize("g", [Fraction(1), Fraction(1, 3), Fraction(5, 2)])
def test_residual_factor_law_is_one_plus_circular(g):
    """(I + W)ᵀ(I + W) → (1 + c)*(1 + c): the S-transform's moments equal the pairing count."""
    assert pn.moments_exact("residual", 1, g, 5) == circular_moments(g, 5)


@pytest.mark.parametrize("g", [Fraction(1), Fraction(2, 5)])
def test_residual_depth_is_the_free_multiplicative_power(g):
    nu = pn.moments_exact("residual", 1, g, 6)
    two = free_product_moments(nu, nu)
    assert two == pn.moments_exact("residual", 2, g, 6)
    assert free_product_moments(two, nu) == pn.moments_exact("residual", 3, g, 6)


@pytest.mark.parametrize("depth", [1, 4, 17, 48])
@pytest.mark.parametrize("g", [Fraction(1), Fraction(1, 5), Fraction(7, 3)])
def test_residual_first_two_moments_closed_form(depth, g):
    h = 2 * g + g * g
    m1, m2 = pn.moments_exact("residual", depth, g, 2)
    assert m1 == (1 + g) ** depth
    assert m2 == (1 + h) ** depth + depth * h * (1 + h) ** (depth - 1)


def test_mp_path_matches_exact_to_many_digits():
    for kind, depth, g in [("ginibre", 4, "0.7"), ("residual", 6, "0.3"), ("residual", 2, "3")]:
        ex = pn.moments_exact(kind, depth, Fraction(g), 6)
        with mp.workdps(50):
            got = pn.moments_mp(kind, depth, mp.mpf(g), 6, dps=45)
            for a, b in zip(got, ex, strict=True):
                assert abs(a / (mp.mpf(b.numerator) / b.denominator) - 1) < mp.mpf(10) ** -40
        np.testing.assert_allclose(pn.moments(kind, depth, g, 6), [float(x) for x in ex], rtol=1e-15)


# ---------------------------------------------------------------- edges and density


@pytest.mark.parametrize("depth", [1, 2, 3, 7, 20, 48])
def test_square_gaussian_upper_edge_penson_zyczkowski(depth):
    g = 1.3
    ref = g**depth * (depth + 1) ** (depth + 1) / depth**depth
    lo, hi = pn.edges("ginibre", depth, g)
    assert lo == 0.0 and hi == pytest.approx(ref, rel=1e-12)
    with mp.workdps(40):
        lo_mp, hi_mp = pn.edges_mp("ginibre", depth, mp.mpf("1.3"), dps=35)
        ref_mp = mp.mpf("1.3") ** depth * mp.mpf(depth + 1) ** (depth + 1) / mp.mpf(depth) ** depth
        assert lo_mp == 0 and abs(hi_mp / ref_mp - 1) < mp.mpf(10) ** -30


@pytest.mark.parametrize("depth", [1, 2, 3, 6])
def test_square_gaussian_density_trigonometric_parametrisation(depth):
    """Haagerup & Möller (2013), Neuschel (2014): x(φ) = sin^{s+1}((s+1)φ)/(sin φ sin^s(sφ)),
    ρ = sin²φ sin^{s−1}(sφ)/(π sin^s((s+1)φ)), 0 < φ < π/(s+1)."""
    s = depth
    phi = np.linspace(0.002, np.pi / (s + 1) - 0.002, 41)
    x = np.sin((s + 1) * phi) ** (s + 1) / (np.sin(phi) * np.sin(s * phi) ** s)
    rho = np.sin(phi) ** 2 * np.sin(s * phi) ** (s - 1) / (np.pi * np.sin((s + 1) * phi) ** s)
    np.testing.assert_allclose(pn.density(x, "ginibre", depth, 1.0), rho, rtol=1e-9)
    # gain G rescales x by G^L
    np.testing.assert_allclose(pn.density(x * 2.0**depth, "ginibre", depth, 2.0),
                               rho / 2.0**depth, rtol=1e-9)


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_square_gaussian_density_near_zero_keeps_its_digits(depth):
    """Near x = 0 (φ → π/(s+1) in the parametrisation above, evaluated in mpmath) the root sits
    within x^{1/(L+1)} of the zero u = −1: the density keeps full relative accuracy to 1e-200."""
    s = depth
    with mp.workdps(60):
        for k in (3, 8, 20, 40):
            phi = mp.pi / (s + 1) - mp.mpf(10) ** -k
            x = mp.sin((s + 1) * phi) ** (s + 1) / (mp.sin(phi) * mp.sin(s * phi) ** s)
            rho = mp.sin(phi) ** 2 * mp.sin(s * phi) ** (s - 1) / (mp.pi * mp.sin((s + 1) * phi) ** s)
            got = pn.density(np.array([float(x)]), "ginibre", depth, 1.0)[0]
            assert got == pytest.approx(float(rho), rel=1e-12)


def _dozier_silverstein_density(x, g):
    """ρ of (I + W)ᵀ(I + W) from the cubic G² z m³ + 2G z m² + (z − 1 + G) m + 1 = 0,
    m(z) = ∫ dμ(t)/(t − z), ρ = Im m(x + i0)/π (root with the largest Im m)."""
    out = []
    for z in x:
        r = np.roots([g * g * z, 2 * g * z, z - 1 + g, 1.0])
        out.append(max(0.0, r.imag.max()) / np.pi)
    return np.array(out)


def _cubic_discriminant(z, g):
    a, b, c, d = g * g * z, 2 * g * z, z - 1 + g, 1
    return 18 * a * b * c * d - 4 * b**3 * d + b * b * c * c - 4 * a * c**3 - 27 * a * a * d * d


@pytest.mark.parametrize("g", [0.3, 1.0, 2.5])
def test_residual_single_layer_density_and_edges_dozier_silverstein(g):
    lo, hi = pn.edges("residual", 1, g)
    x = lo + (hi - lo) * np.linspace(0.01, 0.99, 33)
    np.testing.assert_allclose(pn.density(x, "residual", 1, g), _dozier_silverstein_density(x, g),
                               rtol=1e-8)
    with mp.workdps(30):
        assert abs(_cubic_discriminant(mp.mpf(hi), mp.mpf(g))) < 1e-10 * hi**3
        if g < 1:
            assert lo > 0 and abs(_cubic_discriminant(mp.mpf(lo), mp.mpf(g))) < 1e-10
        else:
            assert lo == 0.0
    assert np.all(pn.density(np.array([hi * 1.001, hi * 2]), "residual", 1, g) == 0)


@pytest.mark.parametrize("kind,depth,g", [("residual", 3, 0.5), ("residual", 8, 0.2),
                                          ("ginibre", 2, 1.0), ("residual", 5, 1.0),
                                          ("residual", 4, 2.0)])
def test_density_integrates_to_the_moments(kind, depth, g):
    """Quadrature in θ with x = x₋ + (x₊ − x₋)(1 − cos θ)/2 (square-root edges become smooth);
    where x₋ = 0 the density diverges at 0 and a second substitution x = x₊ e^{−y} covers it."""
    lo, hi = pn.edges(kind, depth, g)
    m = pn.moments(kind, depth, g, 4)
    if lo > 0:
        th = np.linspace(0, np.pi, 4001)
        x = lo + (hi - lo) * (1 - np.cos(th)) / 2
        w = pn.density(x, kind, depth, g) * (hi - lo) * np.sin(th) / 2
        got = [np.trapezoid(w * x**k, th) for k in range(5)]
        np.testing.assert_allclose(got, [1.0, *m], rtol=1e-9)
    else:
        y = np.linspace(0, 60, 60001)
        x = hi * np.exp(-y)
        w = pn.density(x, kind, depth, g) * x
        got = [np.trapezoid(w * x**k, y) for k in range(5)]
        np.testing.assert_allclose(got, [1.0, *m], rtol=2e-4)


def test_density_mp_polishes_the_float_root():
    for kind, depth, g, x in [("residual", 4, 1, 3.7), ("ginibre", 3, 1, 0.2),
                              ("residual", 2, "0.25", 1.1)]:
        with mp.workdps(40):
            a = pn.density_mp(x, kind, depth, mp.mpf(g), dps=30)
            b = pn.density_mp(x, kind, depth, mp.mpf(g), dps=38)
            assert abs(a - b) < mp.mpf(10) ** -28 * abs(b)
        assert float(a) == pytest.approx(float(pn.density(np.array([x]), kind, depth, float(g))[0]),
                                         rel=1e-9)


@pytest.mark.parametrize("g", [0.1, 0.5, 2.0])
def test_residual_edges_mp_and_float_agree(g):
    with mp.workdps(40):
        lo, hi = pn.edges_mp("residual", 6, mp.mpf(g), dps=30)
    assert (float(lo), float(hi)) == pytest.approx(pn.edges("residual", 6, g), rel=1e-10)


# ---------------------------------------------------------------- Lyapunov limits


@pytest.mark.parametrize("g", [0.25, 1.0, 1.7, 4.0])
def test_mean_exponent_is_the_fuglede_kadison_log_determinant(g):
    """ln Δ(λ + c) = ∫ ln|z| over the Brown measure of λ + c (uniform on the disc of radius √G
    about λ): mean of ln|z| = ln|λ| if √G ≤ |λ|, else ln √G − ½ + |λ|²/(2G)."""
    r2 = g
    fk_res = 0.0 if r2 <= 1 else 0.5 * math.log(r2) - 0.5 + 1 / (2 * r2)
    assert pn.lyapunov_limits("residual", g)["mean"] == pytest.approx(fk_res, abs=1e-13)
    assert pn.lyapunov_limits("ginibre", g)["mean"] == pytest.approx(0.5 * math.log(r2) - 0.5)
    with mp.workdps(30):
        quad = mp.quad(lambda t: pn_quantile_mp(t, mp.mpf(g)), [0, 0.5, 1])
        assert abs(pn.lyapunov_limits_mp("residual", mp.mpf(g), dps=25)["mean"] - quad) < 1e-20


def pn_quantile_mp(t, g):
    q = 1 - g
    return mp.log((q + 2 * g * t + mp.sqrt(q * q + 4 * g * t)) / 2) / 2


@pytest.mark.parametrize("kind", KINDS)
def test_lyapunov_quantile_is_tucci_law_of_the_s_transform(kind):
    t = np.linspace(0.05, 1.0, 20)
    s = pn.s_transform(t - 1, kind, 1, 1.4).real
    np.testing.assert_allclose(pn.lyapunov_quantile(t, kind, 1.4), -0.5 * np.log(s), rtol=1e-13)
    lim = pn.lyapunov_limits(kind, 1.4)
    assert lim["max"] == pytest.approx(pn.lyapunov_quantile(1.0, kind, 1.4))


def test_s_transform_inverts_the_moment_series():
    """χ(ψ(z)) = z with χ(w) = w S(w)/(1 + w), ψ(z) = Σ m_k z^k (small z, 12 moments)."""
    for kind, depth, g, widths in [("ginibre", 3, 0.8, (6, 3, 9, 4)), ("residual", 5, 0.6, None),
                                   ("ginibre", 4, 1.2, None)]:
        m = pn.moments(kind, depth, g, 12, widths=widths)
        z = 0.3 / m[1] ** 0.5 * 0.1
        psi = sum(mk * z**k for k, mk in enumerate(m, 1))
        chi = psi * pn.s_transform(psi, kind, depth, g, widths) / (1 + psi)
        assert chi == pytest.approx(z, rel=1e-10)


def test_input_errors():
    with pytest.raises(InputError, match="kind"):
        pn.moments("tanh", 2)
    with pytest.raises(InputError, match="gain"):
        pn.moments("ginibre", 2, -1.0)
    with pytest.raises(InputError, match="depth"):
        pn.edges("residual", 0)
    with pytest.raises(InputError, match="widths"):
        pn.moments("residual", 2, 1.0, widths=(4, 4, 4))
    with pytest.raises(InputError, match="depth \\+ 1"):
        pn.moments("ginibre", 2, 1.0, widths=(4, 4))
    with pytest.raises(InputError, match="rank fractions"):
        pn.lyapunov_quantile(1.5, "ginibre")
