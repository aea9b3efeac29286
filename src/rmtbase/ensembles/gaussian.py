"""Gaussian samplers: i.i.d. N(0, σ²) arrays and one draw of a low-rank head (W_Q, W_K).

Every sampler is a pure function ``f(key, ...) -> array``: jit- and vmap-able, no global state.
Sub-keys are derived **by name** (:func:`named_key`, ``fold_in`` with a fixed CRC-32 of the
name), so adding a new named stream never changes the numbers of the existing ones.

Shapes follow ``docs/conventions.md``: W_Q, W_K are ``(d_h, d)`` with i.i.d. N(0, σ²) entries
(σ the entry standard deviation); W_QK = W_Qᵀ W_K.
"""

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
    """i.i.d. N(0, σ²) array of ``shape`` (σ the entry standard deviation): a real Ginibre
    matrix for a 2-d ``shape``. The draws are ``jax.random.normal``'s, bit for bit, by the
    unrolled hash of :func:`rmtbase.ensembles.threefry.normal` (less CPU on XLA's CPU)."""
    return sigma * normal(key, tuple(shape), dtype)


#: An alias of :func:`ginibre` (the spelling "gaussian" otherwise names the Gaussian null).
gaussian = ginibre


def lowrank_factors(key, d, d_h, sigma_q=1.0, sigma_k=1.0, dtype=jnp.float32):
    """One draw of the low-rank head: (W_Q, W_K), each ``(d_h, d)`` with i.i.d. N(0, σ²) entries.

    W_Q uses ``named_key(key, "wq")``, W_K ``named_key(key, "wk")``. Batch with
    ``vmap(lambda k: lowrank_factors(k, d, d_h))(keys)``.
    """
    d, d_h = check_dims(d, d_h)
    wq = ginibre(named_key(key, "wq"), (d_h, d), sigma_q, dtype)
    wk = ginibre(named_key(key, "wk"), (d_h, d), sigma_k, dtype)
    return wq, wk
