"""Boundary values of a Stieltjes transform given by a rational uniformisation; no public API.

For the product-network laws (:mod:`rmtbase.analytic.product_network`), with w = ψ(1/x):

    x = X(u) = C ∏_j (u − r_j)^{n_j}

(real r_j, integer n_j). Work is in v = u − r₀, r₀ the largest zero (roots shifted exactly),
so u − r₀ keeps its digits as x → 0. Inside the support ρ(x) = −Im w/(π x) on the root with
Im w < 0 (Mingo & Speicher 2017, Ch. 3).

Edges are critical values of X (roots of Σ_j n_j ∏_{k≠j} (u − r_k)): x₊ = min X on
(r_pole, ∞), r_pole the largest r_j (a simple pole); x₋ = max X between the two largest zeros
when the largest is simple, else 0.

The root is followed from x₊ down to x₋ by predictor–corrector continuation in ln x, from the
square-root branch at x₊, with Newton on F(u) = exp(ln x − ln X(u)) − 1; requested points by
Newton from the interpolated path, local continuation as fallback."""

from __future__ import annotations

import cmath
import math
from dataclasses import dataclass

import mpmath as mp
import numpy as np

LNX_SPAN_AT_ZERO = 200.0  # the path covers x down to x₊ e^{−200} when x₋ = 0


@dataclass(frozen=True)
class RationalMap:
    """x = exp(log_c) ∏ (v − r_j)^{n_j} in v = u − shift (``roots`` are the shifted r_j);
    ``gain`` None: w = u (Ginibre), else w = (u² − (1 + G)²)/(4G) (residual)."""

    log_c: float
    roots: tuple
    powers: tuple
    shift: float = 0.0
    gain: float | None = None

    def w(self, v):
        s = self.shift
        if self.gain is None:
            return s + v
        g = self.gain
        return (v * (2 * s + v) + (s * s - (1 + g) ** 2)) / (4 * g)

    def ell(self, u):
        u = np.asarray(u, dtype=complex)
        return self.log_c + sum(n * np.log(u - r) for r, n in zip(self.roots, self.powers, strict=True))

    def dell(self, u):
        return sum(n / (u - r) for r, n in zip(self.roots, self.powers, strict=True))

    def d2ell(self, u):
        return -sum(n / (u - r) ** 2 for r, n in zip(self.roots, self.powers, strict=True))


def merge_roots(pairs):
    """[(r, n), …] with equal r merged and zero powers dropped, sorted by r."""
    acc = {}
    for r, n in pairs:
        acc[r] = acc.get(r, 0) + n
    return tuple(sorted((r, n) for r, n in acc.items() if n != 0))


def critical_points(roots, powers, polyroots):
    """Real roots of Σ_j n_j ∏_{k≠j} (u − r_k) (``polyroots``: numpy- or mpmath-style)."""
    poly = [0] * len(roots)  # coefficients, highest degree first, degree len(roots) - 1
    for j, n in enumerate(powers):
        term = [1]
        for k, r in enumerate(roots):
            if k != j:
                term = [a - r * b for a, b in zip(term + [0], [0] + term, strict=True)]
        poly = [p + n * t for p, t in zip(poly, term, strict=True)]
    while poly and poly[0] == 0:
        poly = poly[1:]
    return polyroots(poly)


def edge_points(rm: RationalMap, real_roots):
    """((u₋, x₋) or None, (u₊, x₊)) from the real critical points ``real_roots``."""
    r, n = np.array(rm.roots, dtype=float), np.array(rm.powers)
    pole = r[n < 0].max()
    up = [u for u in real_roots if u > pole]
    xs = [math.exp(rm.ell(u).real) for u in up]
    i = int(np.argmin(xs))
    upper = (up[i], xs[i])
    zeros = np.sort(r[n > 0])[::-1]
    if n[r == zeros[0]][0] > 1 or zeros.size < 2:
        return None, upper
    lo = [u for u in real_roots if zeros[1] < u < zeros[0]]
    xs = [math.exp(rm.ell(u).real) for u in lo]
    i = int(np.argmax(xs))
    return (lo[i], xs[i]), upper


def _newton(rm, u, lnx, iters=30, tol=1e-13):
    for _ in range(iters):
        e = np.exp(lnx - rm.ell(u))
        step = (1.0 / e - 1.0) / rm.dell(u)
        u = u - step
        if np.all(np.abs(step) <= tol * np.abs(u)):   # relative: v may be tiny near r₀
            break
    return u


def _edge_start(rm, u_c, lnx_c, lnx):
    """u on the square-root branch near a critical point, Im w < 0."""
    a = 2.0 * (lnx - lnx_c) / rm.d2ell(u_c)
    dz = cmath.sqrt(complex(a))
    u1, u2 = u_c + dz, u_c - dz
    return u1 if rm.w(u1).imag < 0 else u2


def trace_path(rm: RationalMap, lower, upper):
    """Continuation path [(ln x, u)] from x₊ down to x₋ (or x₊ e^{−200} when x₋ = 0)."""
    u_hi, x_hi = upper
    lnx_hi = math.log(x_hi)
    lnx_lo = math.log(lower[1]) if lower is not None else lnx_hi - LNX_SPAN_AT_ZERO
    span = lnx_hi - lnx_lo
    h_max = max(span / 600.0, 1e-6)
    t = lnx_hi - 1e-9 * max(1.0, span)
    u = complex(_newton(rm, _edge_start(rm, u_hi, lnx_hi, t), t))
    path = [(t, u)]
    h = 1e-8 * max(1.0, span)
    end = lnx_lo + (1e-9 * span if lower is not None else 0.0)
    while t > end and h > 1e-14 * max(1.0, span):
        h = min(h, t - end)
        pred = u - h / rm.dell(u)
        new = complex(_newton(rm, pred, t - h, iters=12))
        ok = (np.isfinite(new) and rm.w(new).imag < 0
              and abs(np.exp(t - h - rm.ell(new)) - 1.0) < 1e-11
              and abs(new - pred) <= 0.2 * abs(pred - u) + 1e-13 * abs(u))
        if ok:
            t, u = t - h, new
            path.append((t, u))
            h = min(h * 1.6, h_max)
        else:
            h /= 2.0
    return path


def solve(rm: RationalMap, path, lower, upper, lnx):
    """u(x) on the physical branch for an array of ln x inside (x₋, x₊) (complex128)."""
    lnx = np.asarray(lnx, dtype=float)
    ts = np.array([p[0] for p in path])[::-1]
    us = np.array([p[1] for p in path])[::-1]
    guess = np.interp(lnx, ts, us.real) + 1j * np.interp(lnx, ts, us.imag)
    below = lnx < ts[0]
    if below.any():
        if lower is None:   # x → 0: X ≈ c (u − r₁)^{n₁} near the largest zero r₁
            r, n = np.array(rm.roots, dtype=float), np.array(rm.powers)
            top = np.argmax(np.where(n > 0, r, -np.inf))
            guess[below] = r[top] + (us[0] - r[top]) * np.exp((lnx[below] - ts[0]) / n[top])
        else:
            guess[below] = [_edge_start(rm, lower[0], math.log(lower[1]), v) for v in lnx[below]]
    above = lnx > ts[-1]
    if above.any():
        guess[above] = [_edge_start(rm, upper[0], math.log(upper[1]), v) for v in lnx[above]]
    u = _newton(rm, guess, lnx)
    bad = ~(np.isfinite(u) & (rm.w(u).imag < 0) & (np.abs(np.exp(lnx - rm.ell(u)) - 1) < 1e-9))
    for i in np.flatnonzero(bad):
        u[i] = _local(rm, ts, us, lnx[i])
    return u


def _local(rm, ts, us, target):
    """Fallback: continuation from the nearest path point above ``target`` to it."""
    j = int(np.clip(np.searchsorted(ts, target), 0, len(ts) - 1))
    t, u = ts[j], us[j]
    h = max(t - target, 0.0)
    while t > target and h > 1e-15:
        h = min(h, t - target)
        new = complex(_newton(rm, u - h / rm.dell(u), t - h, iters=12))
        if np.isfinite(new) and rm.w(new).imag < 0 and abs(np.exp(t - h - rm.ell(new)) - 1) < 1e-11:
            t, u = t - h, new
            h *= 1.6
        else:
            h /= 2.0
    return u


def solve_mp(rm_mp, u0, x):
    """Polish v at mp precision: root of C ∏(v − r_j)^{n_j}/x − 1 from the float root v0."""
    c, roots, powers = rm_mp

    def f(u):
        p = c
        for r, n in zip(roots, powers, strict=True):
            p *= (u - r) ** n
        return p / x - 1

    return mp.findroot(f, mp.mpc(u0), tol=mp.mpf(10) ** (-mp.mp.dps + 5))
