"""Product networks: Ginibre M_L = W_L⋯W_1 and residual M_L = (I + W_L)⋯(I + W_1).

Ginibre: W_l ``(d_l, d_{l−1})`` i.i.d. N(0, G/d_{l−1}); residual: W_l ``(d, d)`` i.i.d.
N(0, G/d). Layer l uses ``fold_in(named_key(key, "layers"), l)``, so depths and gains share
variates. κ(M) grows like e^{L(μ_1 − μ_d)}, so :func:`network_factors` never forms the product:
Benettin et al.'s (1980) QR recursion keeps M_l = Q_l D_l T_l (D_l as ln D, T_l unit upper
triangular), whose row-graded SVD keeps high relative accuracy (tested against a 300-digit
mpmath SVD). Requires float64."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._compiled import compiled_when_eager
from .._matmul import mm
from ..analytic._network_kind import check_kind, check_widths
from ..errors import InputError, check_positive, check_positive_int
from .gaussian import named_key
from .residual import residual_product
from .threefry import normal


def check_network(kind, depth, gain, d=None, widths=None) -> tuple:
    """Validate; returns (kind, depth, gain, widths tuple of depth + 1 ints)."""
    kind = check_kind(kind)
    depth = check_positive_int(depth, "depth")
    gain = check_positive(gain, "gain")
    if (d is None) == (widths is None):
        raise InputError("give exactly one of d (square layers) or widths (d_0, ..., d_L)")
    if widths is None:
        return kind, depth, gain, (check_positive_int(d, "d"),) * (depth + 1)
    check_widths(kind, depth, widths)
    return kind, depth, gain, tuple(int(w) for w in widths)


def network_layer(key, layer, d_in, d_out, gain, dtype=jnp.float32):
    """W_layer ``(d_out, d_in)``, i.i.d. N(0, gain/d_in), from ``fold_in(named_key(key,
    "layers"), layer)`` (the residual ensemble's layer noise at d_in = d_out = d)."""
    return jnp.sqrt(jnp.asarray(gain / d_in, dtype)) * normal(
        jax.random.fold_in(named_key(key, "layers"), layer), (d_out, d_in), dtype)


@compiled_when_eager(static_argnames=("kind", "depth", "gain", "d", "widths", "dtype"))
def product_network(key, kind, depth, gain=1.0, *, d=None, widths=None, dtype=jnp.float32):
    """The raw product M_L ``(d_L, d_0)``. O(L d³); for spectra at depth use
    :func:`network_factors` (the raw product loses the small singular values)."""
    kind, depth, gain, widths = check_network(kind, depth, gain, d, widths)
    if kind == "residual":
        return residual_product(key, widths[0], depth, sigma2=gain / widths[0], dtype=dtype)
    if len(set(widths)) == 1:
        def step(m, layer):
            return mm(network_layer(key, layer, widths[0], widths[0], gain, dtype), m), None

        m, _ = jax.lax.scan(step, jnp.eye(widths[0], dtype=dtype), jnp.arange(1, depth + 1))
        return m
    m = jnp.eye(widths[0], dtype=dtype)
    for layer in range(1, depth + 1):
        m = mm(network_layer(key, layer, widths[layer - 1], widths[layer], gain, dtype), m)
    return m


def _qr_step(state, a):
    """One Benettin step: a = (the layer applied to) Q; returns the new (Q, ln D, T)."""
    _, logd, t = state
    q, r = jnp.linalg.qr(a)
    k = r.shape[0]
    logd_new = logd[:k] + jnp.log(jnp.abs(jnp.diagonal(r)))
    t = mm(r * jnp.exp(logd[None, :] - logd_new[:, None]), t)
    return q, logd_new, t


def _apply(kind, key, layer, q, gain, d_in, d_out, dtype):
    w = network_layer(key, layer, d_in, d_out, gain, dtype)
    return q + mm(w, q) if kind == "residual" else mm(w, q)


def network_chain(key, kind, depths, gain=1.0, *, d=None, widths=None, dtype=jnp.float64,
                  at_depth=None):
    """Run the stable chain once to max(``depths``) and call ``at_depth(q, log_d, t, L)`` at each L
    (distinct positive ints); returns the results (default the ``(q, log_d, t)`` triples).
    ``gain`` may be traced."""
    depths = tuple(sorted({check_positive_int(x, "depth") for x in depths}))
    if not depths:
        raise InputError("need at least one depth")
    traced = isinstance(gain, jax.Array)
    kind, _, checked, widths = check_network(kind, depths[-1], 1.0 if traced else gain, d, widths)
    return _chain(key, kind, depths, gain if traced else checked, widths, dtype,
                  (lambda q, ld, t, L: (q, ld, t)) if at_depth is None else at_depth)


def _chain(key, kind, depths, gain, widths, dtype, at_depth):
    d0 = widths[0]
    state = (jnp.eye(d0, dtype=dtype), jnp.zeros((d0,), dtype), jnp.eye(d0, dtype=dtype))
    out, done = [], 0
    square = len(set(widths)) == 1
    for L in depths:
        if square:
            def step(s, layer):
                return _qr_step(s, _apply(kind, key, layer, s[0], gain, d0, d0, dtype)), None

            state, _ = jax.lax.scan(step, state, jnp.arange(done + 1, L + 1))
        else:
            for layer in range(done + 1, L + 1):
                state = _qr_step(state, _apply(kind, key, layer, state[0], gain,
                                               widths[layer - 1], widths[layer], dtype))
        done = L
        out.append(at_depth(*state, L))
    return out


@compiled_when_eager(static_argnames=("kind", "depth", "gain", "d", "widths", "dtype"))
def network_factors(key, kind, depth, gain=1.0, *, d=None, widths=None, dtype=jnp.float64):
    """(Q, ln D, T) with M_L = Q diag(exp(ln D)) T, by the Benettin QR recursion.

    Q ``(d_L, k)`` orthonormal, ln D ``(k,)``, T ``(k, d_0)``, k = min_l d_l; ln D / L are the QR
    Lyapunov estimates (mean ½[ln(2G/d) + ψ((d − i + 1)/2)] for square Ginibre layers,
    :func:`rmtbase.analytic.network_finite.lyapunov_ginibre`)."""
    return network_chain(key, kind, (depth,), gain, d=d, widths=widths, dtype=dtype)[0]


def log_singular_values(log_d, t):
    """ln s(M), descending, from the graded factors (rows of D T sorted by ln D, then SVD)."""
    order = jnp.argsort(-log_d)
    top = jnp.max(log_d)
    x = jnp.exp(log_d[order] - top)[:, None] * t[order]
    return jnp.log(jnp.linalg.svd(x, compute_uv=False)) + top


def factors_to_matrix(q, log_d, t):
    """M = Q diag(exp(ln D)) T (the raw product; fine for its elements, not its small s)."""
    return mm(q * jnp.exp(log_d)[None, :], t)


def offdiagonal(m):
    """The d(d − 1) off-diagonal entries of a square ``(..., d, d)`` matrix as ``(..., d − 1, d)``
    (row-major order of the entries with i ≠ j)."""
    d = m.shape[-1]
    flat = m.reshape((*m.shape[:-2], d * d))[..., 1:]
    return flat.reshape((*m.shape[:-2], d - 1, d + 1))[..., :d]
