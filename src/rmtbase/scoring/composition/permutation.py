"""The permutation null for head–head composition (``composition(model, null="permutation")``).

Draw b applies one uniform permutation π_X,b of the d_h·d entries to every head's W_X,
independently for X ∈ {Q, K, V, O} (W_O as (d_h, d); a GQA key/value head permuted once; norm
gains applied after), and recomputes every pair's Q-, K-, V-composition
(:mod:`rmtbase.stats.composition`). With exchangeable, independent factors (e.g. an untrained
model) each pair's p = (1 + #{b : s_b ≥ s}) / (1 + B) is exact (Good 2005, §3); permutations are
shared by all pairs (Westfall & Young 1993). It tests alignment across matrices.
No tail is extrapolated, so p ≥ 1/(1 + B) and BH over m entries can flag only when
B + 1 ≥ m/α (:func:`draws_to_flag`). Cost: :func:`plan`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ...errors import InputError

CHUNK = 32  # draws per batch
#: The four factors each draw permutes, in the order of ``layers`` tuples (wq, wk, wo_t, wv).
FACTORS = ("q", "k", "o", "v")


def plan(n_layers: int, n_heads: int, n_kv: int, d: int, d_h: int, draws: int) -> dict:
    """Memory (bytes) and GEMM FLOPs of a permutation-null run; FLOPs = draws × the layer-pair
    GEMMs (2 (H + 2 H_kv) d_h · d · H d_h each)."""
    f32 = 4
    model = n_layers * (2 * n_heads + 2 * n_kv) * d_h * d * f32
    c = min(int(draws), CHUNK)
    layer = c * 4 * n_heads * d_h * d * f32 * 2
    cols = c * n_layers * n_heads * d * d_h * f32
    gemm = c * (n_heads + 2 * n_kv) * d_h * n_heads * d_h * f32 * 3
    pairs = n_layers * (n_layers - 1) // 2
    state = 3 * n_layers**2 * n_heads**2 * 8 * (3 + min(int(draws), CHUNK))
    flops = int(draws) * pairs * 2.0 * (n_heads + 2 * n_kv) * d_h * d * n_heads * d_h
    return {"bytes": model + layer + cols + gemm + state, "gemm_flops": flops}


def permutations(seed: int, chunk: int, n: int, count: int) -> dict[str, np.ndarray]:
    """``count`` permutations of ``n`` entries for each factor in :data:`FACTORS`
    (int32 ``(count, n)``), a pure function of (seed, chunk)."""
    rng = np.random.Generator(np.random.PCG64([int(seed), 0xC0C0, int(chunk)]))
    return {x: np.stack([rng.permutation(n) for _ in range(count)]).astype(np.int32)
            for x in FACTORS}


class _Permuted(NamedTuple):
    """One layer's permuted factors for B draws (a pytree): ``q``, ``k``, ``v`` (B, H, d_h, d),
    ``nq`` = ‖W_QK‖_F², ``no`` = ‖W_OV‖_F² (B, H), Grams ``gq``, ``gk``, ``go`` and ``cols``
    (B, d, H d_h)."""

    q: object
    k: object
    v: object
    nq: object
    no: object
    gq: object
    gk: object
    go: object
    cols: object


@lru_cache(maxsize=8)
def _layer_fn(group: int):
    """``f(raw, perm, g)`` -> :class:`_Permuted`: ``raw`` (wq, wk, wo_t, wv) per distinct head,
    ``perm`` the four (B, n) permutations in :data:`FACTORS` order, ``g`` the gains (d,)."""
    import jax
    import jax.numpy as jnp

    from ..._compiled import many_calls
    from ...stats import composition as C

    def shuffle(w, p):  # w (H, d_h, d), p (B, n) -> (B, H, d_h, d)
        h, dh, d = w.shape
        return jnp.take(w.reshape(h, dh * d), p, axis=1).reshape(h, -1, dh, d).swapaxes(0, 1)

    def f(raw, perm, g):
        (wq, wk, wo_t, wv), (pq, pk, po, pv) = raw, perm
        q, o = shuffle(wq, pq), shuffle(wo_t, po)
        k = jnp.repeat(shuffle(wk, pk), group, axis=1)
        v = jnp.repeat(shuffle(wv, pv), group, axis=1)
        q, k, v = q * g, k * g, v * g
        nq, no = C.layer_norms(q, k, o, v)
        cols = jax.vmap(lambda a, b: C.col_matrix(C.col_side(a, b)))(o, v)
        return _Permuted(q, k, v, nq, no, C.grams(q), C.grams(k), C.grams(o), cols)

    return jax.jit(f, compiler_options=many_calls())


@lru_cache(maxsize=8)
def _pair_fn(group: int, dh1: int):
    """``f(later, cols1, no1)`` -> scores (B, 3, H2, H1) of one layer pair: the later layer's
    :class:`_Permuted`, the earlier layer's columns and ‖W_OV‖_F²."""
    import jax
    import jax.numpy as jnp

    from ..._compiled import many_calls
    from ...stats import composition as C

    pq = jax.vmap(C.pair_squares, in_axes=(0, 0, None, 0, None))

    def f(later, cols1, no1):
        q, k, v = later.q, later.k, later.v
        out = []
        for rows, g_row, grp, n2 in ((q, later.gk, 1, later.nq),
                                     (k[:, ::group], later.gq, group, later.nq),
                                     (v[:, ::group], later.go, group, later.no)):
            sq = pq(rows, g_row, grp, cols1, dh1)
            out.append(jnp.sqrt(jnp.maximum(sq, 0.0) / (n2[:, :, None] * no1[:, None, :])))
        return jnp.stack(out, axis=1)

    return jax.jit(f, compiler_options=many_calls())


def permutation_counts(layers, n_kv: int, comp, *, draws: int, seed: int, ln_gains=None,
                       progress=None) -> dict:
    """Permutation null of scores ``comp`` (3, L, H, L, H) of ``layers`` (``(wq, wk, wo_t, wv)``,
    keys/values expanded): ``ge`` (#{b : s_b ≥ s}), ``m1``, ``m2`` (mean and mean square of s_b²),
    ``median`` (of the first min(B, CHUNK) draws), NaN where layer_to ≤ layer_from, and
    ``draws``."""
    import jax.numpy as jnp

    draws = int(draws)
    if draws < 1:
        raise InputError(f"draws must be a positive integer, got {draws!r}")
    n_l = len(layers)
    h, dh, d = np.shape(layers[0][0])
    group = h // n_kv
    ge = np.zeros(comp.shape, np.int64)
    s1 = np.zeros(comp.shape)
    s2 = np.zeros(comp.shape)
    med = np.full(comp.shape, np.nan)
    raw = []
    for wq, wk, wo_t, wv in layers:
        raw.append(tuple(jnp.asarray(x, jnp.float32)
                         for x in (wq, wk[::group], wo_t, wv[::group])))
    gains = [jnp.ones((d,), jnp.float32) if ln_gains is None
             else jnp.asarray(ln_gains[i], jnp.float32) for i in range(n_l)]
    lay, pair = _layer_fn(group), _pair_fn(group, dh)
    done, chunk = 0, 0
    while done < draws:
        b = min(CHUNK, draws - done)
        perm = permutations(seed, chunk, dh * d, b)
        ps = tuple(jnp.asarray(perm[x]) for x in FACTORS)
        cols, no_all = [], []
        for l2 in range(n_l):
            later = lay(raw[l2], ps, gains[l2])
            for l1 in range(l2):
                s = np.asarray(pair(later, cols[l1], no_all[l1]), np.float64)  # (B, 3, H2, H1)
                obs = comp[:, l1, :, l2, :].transpose(0, 2, 1)  # (3, H2, H1)
                sl = (slice(None), l1, slice(None), l2, slice(None))
                ge[sl] += np.sum(s >= obs[None], axis=0).transpose(0, 2, 1)
                sq = s * s
                s1[sl] += np.sum(sq, axis=0).transpose(0, 2, 1)
                s2[sl] += np.sum(sq * sq, axis=0).transpose(0, 2, 1)
                if chunk == 0:
                    med[sl] = np.median(s, axis=0).transpose(0, 2, 1)
            cols.append(later.cols)
            no_all.append(later.no)
        done += b
        chunk += 1
        if progress is not None:
            progress(done, draws)
    finite = np.isfinite(comp)
    nan = np.where(finite, 1.0, np.nan)
    return {"ge": np.where(finite, ge, 0), "m1": s1 / draws * nan, "m2": s2 / draws * nan,
            "median": med * nan, "draws": draws}


def permutation_p(comp, counts) -> np.ndarray:
    """The add-one permutation p = (1 + #{b : s_b ≥ s}) / (1 + B); NaN where comp is NaN."""
    return np.where(np.isfinite(comp), (1.0 + counts["ge"]) / (1.0 + counts["draws"]), np.nan)


def draws_to_flag(m: int, alpha: float = 0.05) -> int:
    """The fewest draws B with which Benjamini–Hochberg over ``m`` p-values can flag one whose
    permuted draws never reach it (1/(1 + B) ≤ α/m)."""
    return max(int(np.ceil(m / alpha)) - 1, 1)


def draws_note(m: int, draws: int, open_pairs: int, alpha: float = 0.05) -> str | None:
    """What B = ``draws`` leave undecided, or None: BH over ``m`` entries cannot flag any pair
    (:func:`draws_to_flag`), or ``open_pairs`` could differ at
    :data:`~rmtbase.scoring.composition.dataset.OPEN_FACTOR` × B. Only more draws resolve either."""
    if m and int(draws) < draws_to_flag(m, alpha):
        return (f"rmtbase: with {draws} permutations BH over all {m} pair entries cannot flag "
                f"any pair (it needs draws >= {draws_to_flag(m, alpha)}); "
                "composition_q_family flags within a (kind, layer pair)")
    if open_pairs:
        from .dataset import OPEN_FACTOR

        return (f"rmtbase: {open_pairs} pairs' BH flags could differ at "
                f"{OPEN_FACTOR * int(draws)} "
                "permutations (composition_open_pairs); more draws settle them")
    return None


__all__ = ["CHUNK", "FACTORS", "draws_note", "draws_to_flag", "permutation_counts", "permutation_p", "permutations", "plan"]
