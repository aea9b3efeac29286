"""Exact χ² and χ variates for the Wishart samplers, vectorised over the whole array.

χ²_ν = 2·Gamma(ν/2). Gamma(a), a ≥ 1, by Marsaglia & Tsang (2000), ACM TOMS 26(3):363–372:
d = a − 1/3, c = 1/√(9d), x ~ N(0, 1), u ~ U(0, 1), v = (1 + c x)³; accept d·v when v > 0 and
ln u < x²/2 + d − d v + d ln v. Gamma(a), a < 1, is Gamma(a + 1)·U^{1/a} (their §6). Exact.

Each round draws one normal and one uniform for the whole array from ``fold_in(key, round)``;
a ``lax.while_loop`` repeats while some element is unaccepted (acceptance ≥ 0.95 for a ≥ 1).
Accepted lanes keep their value, so a draw's numbers do not depend on its batch."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._compiled import compiled_when_eager

_BOOST_STREAM = 0x7FFFFFFF  # fold_in index of the U^{1/a} stream (rounds use 0, 1, 2, ...)


@compiled_when_eager(static_argnames=("dtype", "below_two"))
def chisquare(key, dof, dtype=jnp.float32, below_two=True):
    """χ²_dof variates, one per entry of ``dof`` (any shape), of ``dtype``; NaN where dof ≤ 0.

    key: round r uses ``fold_in(key, r)``, the a < 1 boost ``fold_in(key, 2**31 − 1)``.
    below_two: ``False`` promises every dof ≥ 2, leaving the boost out (the same numbers)."""
    dof = jnp.asarray(dof, dtype)
    half = dof / 2
    small = half < 1
    a = jnp.where(small, half + 1, half)
    d = a - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)

    def body(state):
        r, out = state
        kx, ku = jax.random.split(jax.random.fold_in(key, r))
        x = jax.random.normal(kx, dof.shape, dtype)
        u = jax.random.uniform(ku, dof.shape, dtype)
        t = c * x
        v = 1.0 + t
        # Marsaglia–Tsang's test ln u < x²/2 + d − d v³ + d ln v³ equals ln u < 3 d R(t) exactly
        # (9 d c² = 1), without the cancellation of O(d) terms that breaks it in float32.
        ok = (v > 0) & (jnp.log(u) < 3.0 * d * _log1p_tail(t))
        # ``out`` is the only state: a lane is done once it holds a (positive) value, so no
        # second copy of the test can disagree with the first.
        return r + 1, jnp.where((out <= 0) & ok, d * (v * v * v), out)

    # A dof that is not > 0 (or NaN) starts as NaN: never "≤ 0", so the loop cannot hang on it.
    init = (jnp.uint32(0), jnp.where(dof > 0, 0.0, jnp.nan).astype(dtype))
    _, g = jax.lax.while_loop(lambda s: jnp.any(s[1] <= 0), body, init)
    if not below_two:
        return 2.0 * g
    u = jax.random.uniform(jax.random.fold_in(key, _BOOST_STREAM), dof.shape, dtype)
    g = jnp.where(small, g * u ** (1.0 / jnp.where(small, half, 1.0)), g)
    return 2.0 * g


_SERIES_TERMS = 26  # t^4 … t^29


def _log1p_tail(t):
    """R(t) = ln(1 + t) − t + t²/2 − t³/3 = Σ_{k≥4} (−1)^{k+1} t^k / k, accurate for small |t|.

    Horner series (26 terms) for |t| < t_s, the closed form elsewhere (callers reject t ≤ −1);
    t_s = 0.5 in float32, 0.1 in float64 (truncation and closed-form error below the dtype's)."""
    t_s = 0.5 if t.dtype == jnp.float32 else 0.1
    small = jnp.abs(t) < t_s
    ts = jnp.where(small, t, 0.0)
    acc = jnp.zeros_like(t)
    for k in range(4 + _SERIES_TERMS - 1, 3, -1):  # Σ_{k=4}^{29} (−1)^{k+1} t^{k−4} / k
        acc = acc * ts + ((-1.0) ** (k + 1)) / k
    series = acc * ts**4
    tc = jnp.where(small | (t <= -1), 0.5, t)
    closed = jnp.log1p(tc) - tc + tc * tc / 2 - tc * tc * tc / 3
    return jnp.where(small, series, jnp.where(t <= -1, -jnp.inf, closed))


def chi(key, dof, dtype=jnp.float32, below_two=True):
    """χ_dof = √χ²_dof variates (see :func:`chisquare`)."""
    return jnp.sqrt(chisquare(key, dof, dtype, below_two))
