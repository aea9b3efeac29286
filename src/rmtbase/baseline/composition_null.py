"""The composition null's draws: squared composition scores s² of independent Gaussian factors.

One σ-free law for Q-, K- and V-composition (a chain d × d_h2 × d × d_h1 × d of independent
Gaussians): :func:`null_squares` from d_h-sized Bartlett variates (exact in law),
:func:`null_squares_full` whole factors with a storage round trip; the QK overlap:
:func:`null_overlap`, :func:`null_overlap_full`. Draw i is ``fold_in(key, i)``; ``part``
selects draws ``start`` … n−1, so a continued table is the longer table."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .._compiled import many_calls
from ..ensembles.chisquare import chi
from ..ensembles.gaussian import named_key
from ..ensembles.threefry import normal
from ..ensembles.wishart import bartlett_factor
from ..stats.composition import col_side, grams
from ..stats.precision import round_trip
from ..stats.storage import Storage, storage_record


@dataclass(frozen=True)
class Part:
    """Which draws a sampler computes: ``start`` … n−1 (draw i is the same in any part), with
    ``bar`` (a progress reporter, or None) advanced per compiled call."""

    start: int = 0
    bar: object = None


def null_squares(key, d: int, d_h1: int, d_h2: int, n: int, dtype=jnp.float32, *,
                 part: Part = Part()):
    """Draws ``part.start`` … n−1 of s² under the Gaussian-factor null, exactly in law, from
    d_h-sized variates only (:mod:`rmtbase.ensembles.wishart`): the chain Q2ᵀ K2 O1 V1
    (K-composition; Q and V have the same law) in a residual basis where O1 = H [T; 0], so that
    s² = ‖L_Qᵀ K_a T L_V‖² / ((‖L_Qᵀ K_a‖² + ‖L_Qᵀ L_b‖²) ‖L_Oᵀ L_V‖²) with K_a Gaussian and
    L_O, L_b, L_Q, L_V Bartlett factors (derivation: docs/composition.md, "The null, and what is
    exact"). Needs d_h2 ≤ d − d_h1."""
    if d_h2 > d - d_h1:
        raise ValueError(f"the reduced null needs d_h2 <= d - d_h1 (d={d}, d_h={d_h1}, {d_h2})")
    run = _reduced(int(d), int(d_h1), int(d_h2), jnp.dtype(dtype).name)
    return in_chunks(run, key, part.start, n, chunk_size(6 * max(d_h1, d_h2) ** 2), part.bar)


#: Floats a compiled call's draws may hold together (:func:`chunk_size`): at 640 × 256 a chunk
#: of 8 reduced draws takes ≈ 35 ms of CPU, and the per-draw cost was lowest at such sizes
#: (4.1–4.3 ms at 8–16 draws, 10.5 ms at 1,024: memory traffic, not FLOPs).
CHUNK_FLOATS = 2**22


def chunk_size(floats_per_draw: int) -> int:
    """Draws per compiled call: the power of two nearest below ``CHUNK_FLOATS / floats_per_draw``,
    within 8 … 1,024; a function of the shape alone, so draw i never depends on the number of
    draws. An interrupt is honoured between calls."""
    c = max(1, CHUNK_FLOATS // max(1, int(floats_per_draw)))
    return int(min(1024, max(8, 1 << (c.bit_length() - 1))))


def in_chunks(run, key, start: int, n: int, chunk: int, bar=None) -> np.ndarray:
    """Draws ``start`` … n−1 of ``run(key, draw indices)`` in compiled calls of ``chunk`` draws
    aligned at multiples of ``chunk``; ``bar`` is advanced per call."""
    start, n = int(start), int(n)
    a0 = (start // chunk) * chunk
    out = []
    for a in range(a0, n, chunk):
        out.append(np.asarray(run(key, jnp.arange(a, a + chunk))))  # waited for: interruptible
        if bar is not None:
            bar.update(min(a + chunk, n) - max(a, start))
    if not out:
        return np.zeros(0, np.float32)
    return np.concatenate(out)[start - a0:n - a0]


def draw_program(one):
    """``run(key, draw indices)``: ``one(fold_in(key, i))`` of every index ``i``, vectorised,
    one compiled program (:data:`rmtbase._compiled.MANY_CALLS`: it runs once a chunk of
    draws), what :func:`in_chunks` calls."""
    return jax.jit(lambda key, idx: jax.vmap(lambda i: one(jax.random.fold_in(key, i)))(idx),
                   compiler_options=many_calls())


@functools.lru_cache(maxsize=16)
def _reduced(d: int, d_h1: int, d_h2: int, dtype: str):
    """One compiled program per shape: draw i from its own key (``fold_in(key, i)``); the four
    Bartlett diagonals in one χ call, the normals in one call."""
    dt = jnp.dtype(dtype)
    segs = [(d, d_h2), (d, d_h1), (d, d_h1), (d - d_h1, d_h2)]  # L_Q, L_V, L_O, L_b
    dof = np.concatenate([np.arange(n, n - k, -1) for n, k in segs]).astype(dtype)
    n_low = [k * (k - 1) // 2 for _, k in segs]

    def one(k):
        diag = chi(named_key(k, "diag"), jnp.asarray(dof), dt)
        z = normal(named_key(k, "normal"), (sum(n_low) + d_h2 * d_h1,), dt)
        ls, a, b = [], 0, 0
        for (_, m), nl in zip(segs, n_low, strict=True):
            ls.append(bartlett_factor(z[b:b + nl], diag[a:a + m]))
            a, b = a + m, b + nl
        lq, lv, lo, lb = ls
        ka = z[b:].reshape(d_h2, d_h1)
        m = ka @ lo.T
        num = jnp.sum((lq.T @ m @ lv) ** 2)
        den = (jnp.sum((lq.T @ ka) ** 2) + jnp.sum((lq.T @ lb) ** 2)) * jnp.sum((lo.T @ lv) ** 2)
        return num / den

    return draw_program(one)


def null_squares_full(key, d: int, d_h1: int, d_h2: int, n: int, storage=None,
                      dtype=jnp.float32, *, part: Part = Part()):
    """The same null from whole Gaussian factors, each optionally sent through a ``storage`` round
    trip (a :mod:`rmtbase.stats.precision` name or record). The reference for
    :func:`null_squares` and the path for 16-bit storage."""
    run = _full(int(d), int(d_h1), int(d_h2), storage_record(storage or "float32"),
                jnp.dtype(dtype).name)
    return in_chunks(run, key, part.start, n, _full_chunk(d, max(d_h1, d_h2)), part.bar)


def _full_chunk(d: int, d_h: int) -> int:
    """Draws per compiled call of the whole-factor samplers (4 d × d_h factors and d_h × d_h
    Grams a draw): :func:`chunk_size`, at most 64 (the size before it depended on the shape)."""
    return min(64, chunk_size(4 * int(d) * int(d_h) + 3 * int(d_h) ** 2))


def _stored(storage: Storage):
    """A factor as the checkpoint stores it: the round trip of record ``storage`` (none for
    float32)."""
    if storage.is_identity:
        return lambda x: x
    return lambda x: round_trip(x, storage)


@functools.lru_cache(maxsize=16)
def _full(d: int, d_h1: int, d_h2: int, storage: Storage, dtype: str):
    dt = jnp.dtype(dtype)
    rt = _stored(storage)

    def one(k):
        q = rt(normal(named_key(k, "q"), (d_h2, d), dt))
        kk = rt(normal(named_key(k, "k"), (d_h2, d), dt))
        o = rt(normal(named_key(k, "o"), (d_h1, d), dt))
        v = rt(normal(named_key(k, "v"), (d_h1, d), dt))
        c = col_side(o, v)
        m = kk @ c
        num = jnp.sum(grams(q) * (m @ m.T))
        den = jnp.sum(grams(q) * grams(kk)) * jnp.sum(grams(o) * grams(v))
        return num / den

    return draw_program(one)


def null_overlap(key, d: int, d_h: int, n: int, shared_key: bool = False, dtype=jnp.float32,
                 *, part: Part = Part()):
    """``n`` draws of the QK overlap c = ⟨W_QK^a, W_QK^b⟩ / (‖W_QK^a‖ ‖W_QK^b‖) of two heads with
    independent Gaussian factors (``shared_key``: one W_K for both, GQA/MQA), exactly in law.

    ⟨W_QK^a, W_QK^b⟩ = Σ (Q_a Q_bᵀ) ∘ (K_a K_bᵀ) and the norms need only the Grams. Rotating the
    d-space of the Q's so that Q_a = [L_Qa, 0] H (LQ; L_Qa Bartlett at (d, d_h)) gives
    Q_a Q_bᵀ = L_Qa Q_b1ᵀ with Q_b1 ``(d_h, d_h)`` Gaussian and G_Qb = Q_b1 Q_b1ᵀ + L L ᵀ, L
    Bartlett at (d − d_h, d_h); the K's the same with their own rotation, or, shared, one Gram
    G_K = L_K L_Kᵀ. Needs 2 d_h ≤ d."""
    if 2 * d_h > d:
        raise ValueError(f"the reduced overlap null needs 2 d_h <= d (d={d}, d_h={d_h})")
    run = _overlap(int(d), int(d_h), bool(shared_key), jnp.dtype(dtype).name)
    return in_chunks(run, key, part.start, n, chunk_size(8 * int(d_h) ** 2), part.bar)


@functools.lru_cache(maxsize=16)
def _overlap(d: int, n: int, shared: bool, dtype: str):
    dt = jnp.dtype(dtype)
    side = [(d, n), (d - n, n)]  # L_a, L_b2 of one factor kind
    segs = side + ([(d, n)] if shared else side)
    dof = np.concatenate([np.arange(a, a - k, -1) for a, k in segs]).astype(dtype)
    n_low = [k * (k - 1) // 2 for _, k in segs]
    n_sq = 1 if shared else 2

    def one(k):
        diag = chi(named_key(k, "diag"), jnp.asarray(dof), dt)
        z = normal(named_key(k, "normal"), (sum(n_low) + n_sq * n * n,), dt)
        ls, a, b = [], 0, 0
        for (_, m), nl in zip(segs, n_low, strict=True):
            ls.append(bartlett_factor(z[b:b + nl], diag[a:a + m]))
            a, b = a + m, b + nl
        sq = z[b:].reshape(n_sq, n, n)
        qa, qb2 = ls[0], ls[1]
        cross_q = qa @ sq[0].T
        gqa, gqb = qa @ qa.T, sq[0] @ sq[0].T + qb2 @ qb2.T
        if shared:
            gk = ls[2] @ ls[2].T
            cross_k, gka, gkb = gk, gk, gk
        else:
            ka, kb2 = ls[2], ls[3]
            cross_k = ka @ sq[1].T
            gka, gkb = ka @ ka.T, sq[1] @ sq[1].T + kb2 @ kb2.T
        inner = jnp.sum(cross_q * cross_k)
        return inner / jnp.sqrt(jnp.sum(gqa * gka) * jnp.sum(gqb * gkb))

    return draw_program(one)


def null_overlap_full(key, d: int, d_h: int, n: int, shared_key: bool = False, storage=None,
                      dtype=jnp.float32, *, part: Part = Part()):
    """The overlap null from whole Gaussian factors ``(d_h, d)`` with an optional ``storage`` round
    trip; the reference for :func:`null_overlap` and the path for 16-bit storage."""
    run = _overlap_full(int(d), int(d_h), bool(shared_key), storage_record(storage or "float32"),
                        jnp.dtype(dtype).name)
    return in_chunks(run, key, part.start, n, _full_chunk(d, d_h), part.bar)


@functools.lru_cache(maxsize=16)
def _overlap_full(d: int, d_h: int, shared: bool, storage: Storage, dtype: str):
    dt = jnp.dtype(dtype)
    rt = _stored(storage)

    def one(k):
        qa, qb, ka = (rt(normal(named_key(k, s), (d_h, d), dt)) for s in ("qa", "qb", "ka"))
        kb = ka if shared else rt(normal(named_key(k, "kb"), (d_h, d), dt))
        inner = jnp.sum((qa @ qb.T) * (ka @ kb.T))
        na = jnp.sum(grams(qa) * grams(ka))
        nb = jnp.sum(grams(qb) * grams(kb))
        return inner / jnp.sqrt(na * nb)

    return draw_program(one)


__all__ = ["draw_program", "null_overlap", "null_overlap_full", "null_squares",
           "null_squares_full"]
