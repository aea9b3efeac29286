"""Float32 arithmetic that XLA's compiler cannot rewrite: once-rounded products, correctly
rounded divisions (for the K-quants' bit-exact transcription of ggml's C code).

Two rewrites of XLA on CPU break ggml's reference arithmetic, which rounds every operation
(C built for plain x86-64; numpy; gguf-py):

- LLVM contracts ``a·b ± c`` into one fused multiply-add (one rounding instead of two);
- XLA rewrites a division by a broadcast or constant value into a multiplication by its
  reciprocal, which is not correctly rounded (about one quotient in four moves by a step).

:func:`unfused` is a round trip through the integer bits that changes one NaN payload
(0x7FC00001 → 0x7FC00000): no number changes, and neither XLA nor LLVM can prove it the
identity unless it can prove x is never NaN, which it cannot for values computed from the
inputs. (Mapping −0 to +0 instead, as the legacy formats' guard once did, is proved the
identity for a square x·x, whose sign bit LLVM knows to be clear, and the FMA comes back.) Both
rewrites are checked in isolation in ``tests/test_kquants.py``; the legacy formats
(``precision._rounded``) use the same guard.
"""

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

    A constant divisor cannot be hidden from XLA's constant folding, so the quotient is
    found: the candidate ``c = a·(1/n)`` and its two float32 neighbours are ranked by the exact
    residual ``a − n·c = (a − 2^k·c) + c`` (``2^k·c`` is exact, and both subtractions are
    exact by Sterbenz's lemma, FMA or not); the quotient is never a tie (a 25-bit midpoint
    times n needs more than 24 bits), so the smallest residual is the correctly rounded one.
    Used by the legacy formats too (``precision._div_pow2_minus_1``).
    """
    a = jnp.asarray(a, _F)
    scale = float(n + 1)
    c = unfused(a * _F(1.0 / n))  # else XLA folds 2^k·(a·(1/n)) into a·(2^k/n)
    best, err = c, jnp.abs((a - scale * c) + c)
    for cand in (jnp.nextafter(c, jnp.full_like(c, -jnp.inf)),
                 jnp.nextafter(c, jnp.full_like(c, jnp.inf))):
        e = jnp.abs((a - scale * cand) + cand)
        best, err = jnp.where(e < err, cand, best), jnp.minimum(e, err)
    return best
