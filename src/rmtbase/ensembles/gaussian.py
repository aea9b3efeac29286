"""Gaussian samplers: i.i.d. N(0, σ²) arrays and one draw of a low-rank head (W_Q, W_K).

Pure functions ``f(key, ...) -> array`` (jit- and vmap-able). Sub-keys are derived by name
(:func:`named_key`: ``fold_in`` with a CRC-32 of the name), so a new stream never changes the
existing ones. W_Q, W_K ``(d_h, d)``, W_QK = W_Qᵀ W_K (``docs/conventions.md``)."""

from __future__ import annotations

import zlib

import jax
import jax.numpy as jnp

from ..errors import check_dims
from .threefry import normal


def named_key(key, name: str):
    """Sub-key of ``key`` for the named stream ``name`` (``fold_in`` with CRC-32 of the name)."""
    return jax.random.fold_in(key, zlib.crc32(name.encode()) & 0x7FFFFFFF)


def ginibre(key, shape, sigma=1.0, dtype=jnp.float32):
    """i.i.d. N(0, σ²) array of ``shape`` (a real Ginibre matrix for 2-d): ``jax.random.normal``'s
    draws bit for bit (:func:`rmtbase.ensembles.threefry.normal`)."""
    return sigma * normal(key, tuple(shape), dtype)


#: An alias of :func:`ginibre` (the spelling "gaussian" otherwise names the Gaussian null).
gaussian = ginibre


def lowrank_factors(key, d, d_h, sigma_q=1.0, sigma_k=1.0, dtype=jnp.float32):
    """One draw of the low-rank head: (W_Q, W_K), each ``(d_h, d)`` i.i.d. N(0, σ²), from
    ``named_key(key, "wq")`` and ``named_key(key, "wk")``."""
    d, d_h = check_dims(d, d_h)
    wq = ginibre(named_key(key, "wq"), (d_h, d), sigma_q, dtype)
    wk = ginibre(named_key(key, "wk"), (d_h, d), sigma_k, dtype)
    return wq, wk
