"""Residual-path products M_L = (I + W_L)⋯(I + W_1) (Veit, Wilber & Belongie 2016).

W_l i.i.d. N(0, σ²). Each of the 2^L paths through j blocks contributes (σ² d)^j, so
E[M Mᵀ] = (1 + σ² d)^L I; the default σ² = 1/d weighs every path length equally (growth 2 per
layer). Layer l uses ``fold_in(named_key(key, "layers"), l)``."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._compiled import compiled_when_eager
from .._matmul import mm
from ..errors import InputError, check_positive_int, check_sigma
from .gaussian import named_key


def _residual_args(d, depth, sigma2):
    d = check_positive_int(d, "d")
    depth = check_positive_int(depth, "depth")
    s2 = 1.0 / d if sigma2 is None else check_sigma(sigma2, "sigma2")
    return d, depth, s2


def _layer_noise(key, layer, d, s2, dtype):
    """W_layer (1-based layer index) of the residual product: N(0, s2) entries."""
    return jnp.sqrt(jnp.asarray(s2, dtype)) * jax.random.normal(
        jax.random.fold_in(named_key(key, "layers"), layer), (d, d), dtype)


@compiled_when_eager(static_argnames=("d", "depth", "sigma2", "dtype"))
def residual_product(key, d, depth, sigma2=None, dtype=jnp.float32):
    """M_L = (I + W_L)⋯(I + W_1), ``(d, d)``; W_l entries N(0, sigma2), default 1/d; O(L d³).
    Depths from one key share their first layers; E[M Mᵀ] = (1 + sigma2·d)^L I."""
    d, depth, s2 = _residual_args(d, depth, sigma2)

    def step(m, layer):
        return m + mm(_layer_noise(key, layer, d, s2, dtype), m), None

    m, _ = jax.lax.scan(step, jnp.eye(d, dtype=dtype), jnp.arange(1, depth + 1))
    return m


@compiled_when_eager(static_argnames=("d", "depth", "rows", "sigma2", "dtype"))
def residual_rows(key, d, depth, rows, sigma2=None, dtype=jnp.float32):
    """The first ``rows`` rows of :func:`residual_product` (same key: same matrix), O(L rows d²)."""
    d, depth, s2 = _residual_args(d, depth, sigma2)
    rows = check_positive_int(rows, "rows")
    if rows > d:
        raise InputError(f"rows must not exceed d, got rows={rows}, d={d}")

    def step(r, layer):
        return r + mm(r, _layer_noise(key, layer, d, s2, dtype)), None

    r, _ = jax.lax.scan(step, jnp.eye(rows, d, dtype=dtype), jnp.arange(depth, 0, -1))
    return r


@compiled_when_eager(static_argnames=("d", "depth", "sigma2", "dtype"))
def residual_stream(key, d, depth, sigma2=None, dtype=jnp.float32):
    """M_L x for x ~ N(0, I_d) (``named_key(key, "x")``), ``(d,)``, O(L d²), same W_l as
    :func:`residual_product`; E‖M_L x‖² = (1 + sigma2·d)^L d."""
    d, depth, s2 = _residual_args(d, depth, sigma2)
    x0 = jax.random.normal(named_key(key, "x"), (d,), dtype)

    def step(x, layer):
        return x + mm(_layer_noise(key, layer, d, s2, dtype), x), None

    x, _ = jax.lax.scan(step, x0, jnp.arange(1, depth + 1))
    return x
