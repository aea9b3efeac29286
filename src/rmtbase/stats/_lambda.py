"""The spectral statistics' functions of λ ``(..., n)`` (last axis, any order), the records' ``fn``.
"""

from __future__ import annotations

import jax.numpy as jnp


def _lambda_max(lam):
    return jnp.max(lam, axis=-1)


def _lambda_min(lam):
    return jnp.min(lam, axis=-1)


def _sum_lambda(lam):
    return jnp.sum(lam, axis=-1)


def _scaled(lam):
    lmax = jnp.max(lam, axis=-1)
    scale = jnp.where(lmax > 0, lmax, 1.0)
    r = lam / scale[..., None]
    return scale, jnp.sum(r * r, axis=-1)


def _sum_lambda2(lam):
    scale, r2 = _scaled(lam)
    return r2 * scale * scale


def _pr(lam):
    scale, r2 = _scaled(lam)
    return (jnp.sum(lam, axis=-1) / scale) ** 2 / r2


def _npr(lam):
    return _pr(lam) / lam.shape[-1]


def _spectral_entropy(lam):
    p = lam / jnp.sum(lam, axis=-1)[..., None]
    plogp = jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0)
    return -jnp.sum(plogp, axis=-1)


def _condition_number(lam):
    return jnp.max(lam, axis=-1) / jnp.min(lam, axis=-1)


def _stable_rank(lam):
    return jnp.sum(lam, axis=-1) / jnp.max(lam, axis=-1)
