"""Float32 arithmetic XLA cannot rewrite, for the K-quants' bit-exact transcription of ggml's C
code: LLVM contracts ``a·b ± c`` into an FMA and a division by a constant becomes a
multiplication by a reciprocal. :func:`unfused` is a round trip through the integer bits that
changes only one NaN payload, so the compiler cannot prove it the identity and no contraction
crosses it; divisions are correctly rounded."""

from __future__ import annotations

import jax
import jax.numpy as jnp

_F = jnp.float32


def unfused(x):
    """``x`` (float32) as stored: no later addition fuses with the product that made it, and
    a divisor passed through it is not replaced by its reciprocal."""
    bits = jax.lax.bitcast_convert_type(jnp.asarray(x, _F), jnp.int32)
    bits = jnp.where(bits == jnp.int32(0x7FC00001), jnp.int32(0x7FC00000), bits)
    return jax.lax.bitcast_convert_type(bits, _F)


def safe_div(a, b):
    """``a / b`` correctly rounded where b ≠ 0, else 0 (float32). The divisor is broadcast to
    the full shape and passed through :func:`unfused` first, so that XLA keeps the division."""
    a, b = jnp.asarray(a, _F), jnp.asarray(b, _F)
    b = unfused(jnp.broadcast_to(b, jnp.broadcast_shapes(a.shape, b.shape)))
    return jnp.where(b != 0, a / jnp.where(b != 0, b, 1), 0)


def div_pow2_minus_1(a, n: int):
    """``a / n`` correctly rounded for a constant ``n = 2^k − 1`` (15, 63), as C computes it.

    The candidate ``c = a·(1/n)`` and its two float32 neighbours are ranked by the exact residual
    ``a − n·c = (a − 2^k·c) + c`` (exact by Sterbenz's lemma); the quotient is never a tie, so the
    smallest residual is the correctly rounded one."""
    a = jnp.asarray(a, _F)
    scale = float(n + 1)
    c = unfused(a * _F(1.0 / n))  # else XLA folds 2^k·(a·(1/n)) into a·(2^k/n)
    best, err = c, jnp.abs((a - scale * c) + c)
    for cand in (jnp.nextafter(c, jnp.full_like(c, -jnp.inf)),
                 jnp.nextafter(c, jnp.full_like(c, jnp.inf))):
        e = jnp.abs((a - scale * cand) + cand)
        best, err = jnp.where(e < err, cand, best), jnp.minimum(e, err)
    return best
