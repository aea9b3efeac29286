"""The entry-law null: each head against its own entries, shuffled.

Draw b scores (W_Q∘π_b, W_K∘σ_b), independent uniform permutations shared by all heads (Westfall
& Young 1993); with no structure beyond the entries' marginal law every p is exact (Good 2005).
W_Q, W_K element statistics are invariant and left out. Spectral draws from the d_h×d_h Grams;
LAPACK calls stay in the calling thread (concurrent calls deadlock jaxlib's CPU pool)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

#: Permutations per batch, and part of the random stream's definition: batch k holds draws
#: k·CHUNK … (k + 1)·CHUNK − 1, drawn from the PRNG stream (seed, k) (:func:`permutations`: W_Q's
#: then W_K's), so a changed CHUNK changes the permutations and with them every number of the
#: permutation null (a run's p-values, the profile's permutation draws, growth continuing a
#: stream, :mod:`rmtbase.scoring.stopping.head_growth`). It also bounds memory: 2·CHUNK·d_h·d
#: int32 per batch.
CHUNK = 50
HEAD_BLOCK = 16  # heads per thread and step (memory: 2·HEAD_BLOCK·CHUNK·d_h² float32 Grams)


def permutations(seed: int, chunk: int, n: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` permutations of ``n`` entries for W_Q and for W_K (int32 ``(count, n)``),
    a pure function of (seed, chunk)."""
    rng = np.random.Generator(np.random.PCG64([int(seed), 0x9E37, int(chunk)]))
    pq = np.stack([rng.permutation(n) for _ in range(count)]).astype(np.int32)
    pk = np.stack([rng.permutation(n) for _ in range(count)]).astype(np.int32)
    return pq, pk


@lru_cache(maxsize=8)
def _gram_fn(d_h: int, d: int):
    """(H, n) heads of W_Q and W_K, (B, n) permutations of each -> two (H, B, d_h, d_h) Grams.
    No LAPACK."""
    import jax
    import jax.numpy as jnp

    from ..._compiled import many_calls
    from ..._matmul import mm

    def gram(w, p):
        def one(a):
            g = a[p].reshape(p.shape[0], d_h, d)
            return mm(g, jnp.swapaxes(g, -1, -2))
        return jax.lax.map(one, w)

    return jax.jit(lambda wq, wk, pq, pk: (gram(wq, pq), gram(wk, pk)),
                   compiler_options=many_calls())


@lru_cache(maxsize=4)
def _lapack_fns(statistics=None):
    """The LAPACK stage: tridiagonal (d, e) of L_Kᵀ G_Q L_K, or the ``statistics`` (records;
    None: shipped) of λ by the SVD of L_Qᵀ L_K."""
    import jax
    import jax.numpy as jnp

    from ..._matmul import mm
    from ...stats.spectral import eigvals_from_cholesky, spectral_stats

    def tridiagonal(gq, gk):
        lk = jnp.linalg.cholesky(gk)
        m = mm(mm(jnp.swapaxes(lk, -1, -2), gq), lk)
        m = 0.5 * (m + jnp.swapaxes(m, -1, -2))
        _, dd, e, _ = jax.lax.linalg.tridiagonal(m, lower=True)
        return dd, e

    def svd(gq, gk):
        # one batched Cholesky of both Grams: two LAPACK custom calls in flight at once can
        # deadlock jaxlib's CPU thread pool (each waits for pool workers the other holds)
        b = gq.shape[0]
        chol = jnp.linalg.cholesky(jnp.concatenate([gq, gk]))
        return spectral_stats(eigvals_from_cholesky(chol[:b], chol[b:]), statistics)

    return jax.jit(tridiagonal), jax.jit(svd)


@lru_cache(maxsize=4)
def _bisect_fn(statistics=None):
    """Sturm bisection of (..., n) diagonals and (..., n-1) off-diagonals -> statistics. No
    LAPACK."""
    import jax
    import jax.numpy as jnp

    from ...stats._bisection import tridiagonal_eigvals  # eigh_tridiagonal's bits, rolled loop
    from ...stats.spectral import spectral_stats

    def f(dd, e):
        shape = dd.shape
        solve = jax.vmap(tridiagonal_eigvals)
        lam = solve(dd.reshape(-1, shape[-1]), e.reshape(-1, shape[-1] - 1))
        lam = jnp.maximum(lam[..., ::-1], 0.0).reshape(shape)
        return spectral_stats(lam, statistics)

    return jax.jit(f)


@lru_cache(maxsize=8)
def _element_fn(d_h: int, d: int, trim: float):
    """Element statistics of W_QK for every (head, permutation). No LAPACK."""
    import jax

    from ...stats.elementwise import qk_element_stats

    def one(wq, wk, pq, pk):
        return qk_element_stats(wq[pq].reshape(d_h, d), wk[pk].reshape(d_h, d), trim)

    def heads(wq, wk, pq, pk):  # (H, n) and (B, n)
        return jax.lax.map(
            lambda a: jax.lax.map(lambda p: one(a[0], a[1], p[0], p[1]), (pq, pk)), (wq, wk))

    return jax.jit(heads)


def _map_blocks(pool, fn, blocks, sliced, shared=()):
    """``fn(*(x[a:b] for x in sliced), *shared)`` for each block (a, b), in the pool's threads
    (each waits for its result, so no execution outlives the call)."""
    import jax

    def one(block):
        a, b = block
        return jax.block_until_ready(fn(*(x[a:b] for x in sliced), *shared))

    return list(pool.map(one, blocks))


def _spectral_chunk(fq, fk, perms, dims, method, pool, threads, statistics=None):
    """Spectral statistics ``{stat: (H, B)}`` of every head for one chunk of permutations
    ``perms`` (W_Q's, W_K's); ``dims``: the heads' (d_h, d); ``statistics``: the records
    (None: shipped)."""
    import jax
    import jax.numpy as jnp

    from ...baseline.eig_route import eigh_accurate
    from ...stats.statistic import STATISTICS, spectral

    names = [st.name for st in spectral(STATISTICS if statistics is None else statistics)]
    d_h, d = dims
    pq, pk = perms
    n_heads, count = fq.shape[0], pq.shape[0]
    gram = _gram_fn(d_h, d)
    tridiagonal, svd = _lapack_fns(statistics)
    bisect = _bisect_fn(statistics)
    out = {k: np.empty((n_heads, count)) for k in names}
    step = HEAD_BLOCK * threads
    for h0 in range(0, n_heads, step):
        blocks = [(a, min(a + HEAD_BLOCK, n_heads)) for a in range(h0, min(h0 + step, n_heads),
                                                                    HEAD_BLOCK)]
        g = _map_blocks(pool, gram, blocks, (fq, fk), (pq, pk))  # LAPACK-free, in parallel
        gq = jnp.concatenate([x[0] for x in g]).reshape(-1, d_h, d_h)
        gk = jnp.concatenate([x[1] for x in g]).reshape(-1, d_h, d_h)
        n_blk = blocks[-1][1] - h0
        if method == "eigh":
            dd, e = jax.block_until_ready(tridiagonal(gq, gk))  # LAPACK, alone
            dd, e = dd.reshape(n_blk, count, d_h), e.reshape(n_blk, count, d_h - 1)
            parts = _map_blocks(pool, bisect, [(a - h0, b - h0) for a, b in blocks], (dd, e))
            st = {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in names}
            bad = ~np.all(eigh_accurate(d_h, st["condition_number"], jnp.float32), axis=1)
            if bad.any():  # a head with an ill-conditioned draw: all its draws by the SVD
                rows = np.flatnonzero(bad)
                gq3, gk3 = gq.reshape(n_blk, count, d_h, d_h), gk.reshape(n_blk, count, d_h, d_h)
                redo = svd(gq3[rows].reshape(-1, d_h, d_h), gk3[rows].reshape(-1, d_h, d_h))
                for k in names:
                    st[k][rows] = np.asarray(redo[k]).reshape(rows.size, count)
        else:
            st = {k: np.asarray(v).reshape(n_blk, count) for k, v in svd(gq, gk).items()}
        for k in names:
            out[k][h0:h0 + n_blk] = st[k]
    return out


def _draw_range(draws) -> tuple[int, int]:
    """(first, stop) of ``draws`` (a count, or a pair, ``first`` a multiple of :data:`CHUNK`). Draws
    first … stop − 1 equal those of a run of ``stop``: chunks depend on (seed, chunk) only."""
    first, stop = (0, int(draws)) if np.ndim(draws) == 0 else map(int, draws)
    if first % CHUNK or not 0 <= first < stop:
        raise ValueError(f"draws {first} to {stop}: the first must be a multiple of {CHUNK}")
    return first, stop


def permutation_null(wq, wk, *, draws, element_draws: int = 0, seed: int = 0,
                     progress=None, threads: int | None = None,
                     statistics=None) -> dict[str, np.ndarray]:
    """Permutation null draws of every head: ``{stat: (layer, head, draws)}``.

    wq, wk: (layer, head, d_h, d), GQA keys expanded. ``draws``: a count or ``(first, stop)``;
    W_QK element statistics for the first ``element_draws`` (NaN after); ``q.rms``/``k.rms`` the
    head's own, W_QK's trimmed at the scoring's ``qk_elements.TRIM``; ``threads`` never
    changes the values; ``statistics``: spectral records (None: shipped)."""
    from concurrent.futures import ThreadPoolExecutor

    import jax.numpy as jnp

    from ...baseline.eig_route import eig_method

    first, stop = _draw_range(draws)
    wq = np.asarray(wq, dtype=np.float32)
    wk = np.asarray(wk, dtype=np.float32)
    n_l, n_h, d_h, d = wq.shape
    n = d_h * d
    fq = jnp.asarray(wq.reshape(n_l * n_h, n))
    fk = jnp.asarray(wk.reshape(n_l * n_h, n))
    if threads is None:
        from ..measures.qk_elements import scoring_threads

        threads = scoring_threads()
    threads = max(1, int(threads))
    method = eig_method(d, d_h, jnp.float32)
    from ..measures.qk_elements import TRIM

    elem = _element_fn(d_h, d, TRIM)
    parts: dict[str, list] = {}
    with ThreadPoolExecutor(threads) as pool:
        for start in range(first, stop, CHUNK):
            count = min(CHUNK, stop - start)
            pq_np, pk_np = permutations(seed, start // CHUNK, n, count)
            pq, pk = jnp.asarray(pq_np), jnp.asarray(pk_np)
            out = {f"qk.{k}": v for k, v in
                   _spectral_chunk(fq, fk, (pq, pk), (d_h, d), method, pool, threads,
                                   statistics).items()}
            ne = min(count, max(0, element_draws - start))
            if ne:
                bounds = np.linspace(0, n_l * n_h, threads + 1).astype(int)
                blocks = [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
                el = _map_blocks(pool, elem, blocks, (fq, fk), (pq[:ne], pk[:ne]))
                for k in el[0]:
                    arr = np.full((n_l * n_h, count), np.nan)
                    arr[:, :ne] = np.concatenate([np.asarray(x[k]) for x in el])
                    out[f"qk.{k}"] = arr
            elif element_draws:
                from ...stats import ELEMENT_STATS

                for k in ELEMENT_STATS:
                    out[f"qk.{k}"] = np.full((n_l * n_h, count), np.nan)
            for k, v in out.items():
                parts.setdefault(k, []).append(np.asarray(v, dtype=np.float64))
            if progress is not None:
                progress.update(count)
    return _assembled(parts, wq, wk, stop - first)


def _assembled(parts: dict, wq, wk, draws: int) -> dict[str, np.ndarray]:
    """``{stat: (layer, head, draws)}`` from the chunks, with each head's own rms (a
    permutation keeps it) as ``q.rms``/``k.rms``."""
    n_l, n_h = wq.shape[:2]
    res = {k: np.concatenate(v, axis=1).reshape(n_l, n_h, draws) for k, v in parts.items()}
    rms_q = np.sqrt(np.mean(wq.astype(np.float64) ** 2, axis=(-2, -1)))
    rms_k = np.sqrt(np.mean(wk.astype(np.float64) ** 2, axis=(-2, -1)))
    res["q.rms"] = np.repeat(rms_q[..., None], draws, axis=-1)
    res["k.rms"] = np.repeat(rms_k[..., None], draws, axis=-1)
    return res


#: Memory for one group of layers under the permutation null (their factors held together).
PERMUTATION_GROUP_BYTES = 256 * 2**20


def permutation_draws(factors, draws, element_draws, seed, kind, progress,
                      statistics=None) -> dict:
    """Permutation null of all layers, in memory-bounded groups of layers sharing permutations
    (``statistics``: spectral records, None: shipped)."""
    wq0 = factors[0][0]
    per_layer = 2 * wq0.size * 4
    size = max(1, PERMUTATION_GROUP_BYTES // max(per_layer, 1))
    bar = None
    if progress:
        from ...progress import progress_bar

        bar = progress_bar(draws * -(-len(factors) // size), desc="permutation null",
                           unit="perm")
    parts = []
    try:
        for g in range(0, len(factors), size):
            wq = np.stack([f[0] for f in factors[g:g + size]])
            wk = np.stack([f[1] for f in factors[g:g + size]])
            parts.append(permutation_null(wq, wk, draws=int(draws),
                                          element_draws=int(element_draws) if kind != "spectral"
                                          else 0, seed=seed, progress=bar,
                                          statistics=statistics))
    finally:
        if bar is not None:
            bar.close()
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    if kind == "elementwise":
        from ...decision.family import group_of

        out = {k: v for k, v in out.items() if group_of(k) != "spectrum"}
    return out
