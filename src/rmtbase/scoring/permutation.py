"""The entry-law null: each head against its own entries, shuffled.

Under ``null="permutation"`` a head is compared with random matrices that have *exactly its own
entries*: draw b permutes the d_h·d entries of W_Q by a uniformly random permutation π_b and
those of W_K by an independent σ_b, and computes the statistics of (W_Q∘π_b, W_K∘σ_b) through
the same code as the head. If the head's entries carry no structure beyond their marginal law
— an untrained model with any i.i.d. initialisation (Gaussian, Kaiming-uniform, truncated
normal) — the head is exchangeable with its shuffles, and every p-value is exact in law
(a permutation test; Good 2005, *Permutation, Parametric and Bootstrap Tests*). What remains
testable is structure across entries: the spectrum of W_QK and the entry law of the product W_QK.
The element statistics of W_Q and W_K are invariant under shuffling and are left out.

Cost. The permutations are drawn once (numpy PCG64 seeded by ``seed`` and the chunk index) and
shared by every head of every layer scored together, as in Westfall & Young's (1993) joint
resampling; each head's null draws are still an exact permutation distribution. A spectral
draw of one head gathers its permuted entries, forms the two d_h×d_h Grams (O(d_h² d)),
their Cholesky factors and the d_h singular values of L_Qᵀ L_K (O(d_h³)): no d×d product.
The product's element statistics need W_QK (O(d² d_h) per draw) and use the first
``element_draws`` permutations only.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

CHUNK = 50  # permutations per batch (memory: 2·CHUNK·d_h·d int32)


def permutations(seed: int, chunk: int, n: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` permutations of ``n`` entries for W_Q and for W_K (int32 ``(count, n)``),
    a pure function of (seed, chunk)."""
    rng = np.random.Generator(np.random.PCG64([int(seed), 0x9E37, int(chunk)]))
    pq = np.stack([rng.permutation(n) for _ in range(count)]).astype(np.int32)
    pk = np.stack([rng.permutation(n) for _ in range(count)]).astype(np.int32)
    return pq, pk


@lru_cache(maxsize=8)
def _spectral_fn(d_h: int, d: int):
    import jax
    import jax.numpy as jnp

    from ..stats.spectral import eigvals_from_cholesky, spectral_stats

    def one_head(wq, wk, pq, pk):
        gq = wq[pq].reshape(pq.shape[0], d_h, d)
        gk = wk[pk].reshape(pk.shape[0], d_h, d)
        # one batched Cholesky for both Grams: two LAPACK custom calls in flight at once can
        # deadlock jaxlib's CPU thread pool (each waits for pool workers the other holds)
        g = jnp.concatenate([gq, gk])
        chol = jnp.linalg.cholesky(g @ jnp.swapaxes(g, -1, -2))
        b = pq.shape[0]
        return spectral_stats(eigvals_from_cholesky(chol[:b], chol[b:]))

    def heads(wq, wk, pq, pk):  # wq, wk: (H, n)
        return jax.lax.map(lambda a: one_head(a[0], a[1], pq, pk), (wq, wk))

    return jax.jit(heads)


@lru_cache(maxsize=8)
def _element_fn(d_h: int, d: int, trim: float):
    import jax

    from ..stats.elementwise import _one

    def one(wq, wk, pq, pk):
        q = wq[pq].reshape(d_h, d)
        k = wk[pk].reshape(d_h, d)
        return _one((q.T @ k).reshape(-1), trim)

    def heads(wq, wk, pq, pk):  # (H, n) and (B, n)
        return jax.lax.map(
            lambda a: jax.lax.map(lambda p: one(a[0], a[1], p[0], p[1]), (pq, pk)), (wq, wk))

    return jax.jit(heads)


def permutation_null(wq, wk, *, draws: int, element_draws: int = 0, seed: int = 0,
                     trim: float = 0.8, progress=None) -> dict[str, np.ndarray]:
    """Permutation null draws of every head: ``{stat: (layer, head, draws)}``.

    wq, wk: ``(layer, head, d_h, d)`` (GQA keys expanded). Spectral statistics of W_QK for
    ``draws`` permutations; with ``element_draws`` > 0 also the element statistics of W_QK for
    the first ``element_draws`` of them (padded with NaN to ``draws``). ``q.rms``/``k.rms``
    are each head's own rms (a permutation keeps them). ``progress``: optional tqdm bar
    advanced per chunk of permutations.
    """
    import jax.numpy as jnp

    wq = np.asarray(wq, dtype=np.float32)
    wk = np.asarray(wk, dtype=np.float32)
    n_l, n_h, d_h, d = wq.shape
    n = d_h * d
    fq = jnp.asarray(wq.reshape(n_l * n_h, n))
    fk = jnp.asarray(wk.reshape(n_l * n_h, n))
    spec, elem = _spectral_fn(d_h, d), _element_fn(d_h, d, float(trim))
    parts: dict[str, list] = {}
    for c, start in enumerate(range(0, draws, CHUNK)):
        count = min(CHUNK, draws - start)
        pq, pk = permutations(seed, c, n, count)
        out = {f"qk.{k}": np.asarray(v) for k, v in spec(fq, fk, jnp.asarray(pq),
                                                           jnp.asarray(pk)).items()}
        ne = min(count, max(0, element_draws - start))
        if ne:
            el = elem(fq, fk, jnp.asarray(pq[:ne]), jnp.asarray(pk[:ne]))
            for k, v in el.items():
                arr = np.full((n_l * n_h, count), np.nan)
                arr[:, :ne] = np.asarray(v)
                out[f"qk.{k}"] = arr
        elif element_draws:
            from ..stats import ELEMENT_STATS

            for k in ELEMENT_STATS:
                out[f"qk.{k}"] = np.full((n_l * n_h, count), np.nan)
        for k, v in out.items():
            parts.setdefault(k, []).append(np.asarray(v, dtype=np.float64))
        if progress is not None:
            progress.update(count)
    res = {k: np.concatenate(v, axis=1).reshape(n_l, n_h, draws) for k, v in parts.items()}
    rms_q = np.sqrt(np.mean(wq.astype(np.float64) ** 2, axis=(-2, -1)))
    rms_k = np.sqrt(np.mean(wk.astype(np.float64) ** 2, axis=(-2, -1)))
    res["q.rms"] = np.repeat(rms_q[..., None], draws, axis=-1)
    res["k.rms"] = np.repeat(rms_k[..., None], draws, axis=-1)
    return res
