"""Truncated power series over any number type (int, Fraction, float, mpf); no public API.

- :func:`series_pow`: f(w)^α by J. C. P. Miller's recurrence (Henrici vol. 1, §1.6):
  b_0 = f_0^α, b_m = (1/(m f_0)) Σ_{j=1}^{m} ((α + 1) j − m) f_j b_{m−j}.
- :func:`series_mul`: the truncated Cauchy product.
- :func:`lagrange_moments`: m_1..m_k of ψ = z φ(ψ), m_j = [w^{j−1}] φ(w)^j / j; for an
  S-transform φ(w) = (1 + w)/S(w) (Mingo & Speicher 2017, Ch. 2–3)."""

from __future__ import annotations


def series_mul(f, g, n):
    """First ``n`` coefficients of f·g (lists of coefficients, constant term first)."""
    out = []
    for m in range(n):
        acc = 0
        for j in range(max(0, m - len(g) + 1), min(m, len(f) - 1) + 1):
            acc = acc + f[j] * g[m - j]
        out.append(acc)
    return out


def series_pow(f, alpha, n, b0=None):
    """First ``n`` coefficients of f(w)^alpha; ``b0`` = f_0^alpha if it must be given exactly."""
    f = list(f) + [0] * max(0, n - len(f))
    f0 = f[0]
    if f0 == 0:
        raise ValueError("series_pow needs f(0) != 0")
    b = [f0**alpha if b0 is None else b0]
    for m in range(1, n):
        acc = 0
        for j in range(1, m + 1):
            if f[j] != 0:
                acc = acc + ((alpha + 1) * j - m) * f[j] * b[m - j]
        b.append(acc / (m * f0))
    return b


def lagrange_moments(phi, k):
    """m_1..m_k with m_j = [w^{j−1}] φ(w)^j / j; ``phi`` holds at least k coefficients of φ."""
    out = []
    for j in range(1, k + 1):
        p = series_pow(phi[:j], j, j, b0=phi[0] ** j)
        out.append(p[j - 1] / j)
    return out
