"""A head's profile on named axes: what kind of structure it has, in units that mean the same
for every model (issue 31 step 3).

Axes (``axis`` coordinate of ``profile_*`` in a score; each value, effect, null band, p, q and
flag per head):

- ``scale``: σ_Q·σ_K, the rms of W_Q's entries times that of W_K's (descriptive: no null; the
  baseline every other axis should be read against);
- ``concentration``: ``qk.npr``'s effect, a ratio to the null median (0.4 = energy in fewer
  directions than random);
- ``outliers``: ``n_spikes``, eigenvalues of W_QK above the null's largest (descriptive here;
  spectral concentration, not a count of learned directions: :mod:`rmtbase.decision.spikes`);
- ``alignment``: ⟨W_Q, W_K⟩_F/(‖W_Q‖‖W_K‖), a shift from the null median (~0): how much query
  and key read the same residual directions (attention of a token to tokens like itself);
- ``symmetry``: tr(W_QK²)/‖W_QK‖_F², a shift (null ~1/d): symmetric (+) or directional (−)
  attention;
- ``q_input_focus``, ``k_input_focus``: the squared coefficient of variation of W_Q's (W_K's)
  column energies, a shift from the null median (~2/d_h): how unevenly the factor reads the d
  residual dimensions;
- ``entry_tails``: ``k.excess_kurtosis``'s effect, a ratio of β₂ = excess + 3 to the null's.

The statistics of the new axes are :mod:`rmtbase.stats.alignment`'s; their Gaussian null
(:func:`profile_null`) is :data:`PROFILE_DRAWS` heads of i.i.d. N(0, 1) factors at the model's
(d, d_h); the statistics are σ-free, so σ = 1 serves every head. p is two-sided about the null
median, add-one (Phipson & Smyth 2010); q is Benjamini–Hochberg over the heads, per axis; flag
is q ≤ alpha. The axes from scored statistics take their p from the score. The profile is
descriptive beside the per-head decision (``head_flag``), which it does not enter. The Gaussian
null's draws are cached per (d, d_h, null storage) like the null tables
(:mod:`rmtbase.scoring.profile_cache`).

How the Gaussian null is drawn — exactly the law of the factor statistics, at a fraction of
the cost (the profile's analogue of the spectral tables' fast path, :mod:`rmtbase.ensembles.wishart`):

- **alignment and symmetry** depend on the factors only through the Gram of the stacked
  X = [W_Q; W_K] (2d_h × d): ⟨W_Q, W_K⟩ = tr G_QK, ‖W‖² = tr G, tr(W_QK²) = tr(G_QK²),
  ‖W_QK‖² = tr(G_Q G_K). For i.i.d. N(0, 1) entries and d ≥ 2d_h, X = L Q with Q orthonormal
  rows and L L^T = X X^T ~ Wishart W_{2d_h}(I, d), L its Bartlett factor
  (:func:`rmtbase.ensembles.wishart.gram_cholesky`); so the reduced factors
  (L[:d_h], L[d_h:]), each d_h × 2d_h, have the Gram — and the statistics — of the factors
  in law, and go through the same functions (:func:`rmtbase.stats.alignment.alignment`,
  :func:`~rmtbase.stats.alignment.symmetry`). For d < 2d_h the factors are drawn as they are.
  Cost: 2d_h² normals instead of 2 d_h d (at the LLaMA-3-8B shape 4096 × 128, 1/16).
- **input focus** is the squared coefficient of variation of the d column energies
  e_j = Σ_i W[i, j]², which for i.i.d. N(0, 1) entries are i.i.d. χ²_{d_h}: they are drawn as
  such (:func:`rmtbase.ensembles.chisquare.chisquare`, exact) and go through the same
  :func:`~rmtbase.stats.alignment.energy_cv2` as a head's energies.
- The axes are read one at a time (p, band and BH per axis), so drawing them from
  independent variates, rather than jointly from one pair of factors, leaves every output's
  law unchanged.
- **Storage**: float16 and bfloat16 heads share the float32 null (:func:`null_storage`), as
  their spectral statistics do (:func:`rmtbase.baseline.limits.fast_spectral`): rounding the
  factors to bfloat16 moves a draw's four statistics by ≤ 3·10⁻² of their null standard
  deviation and their mean by ≤ 2·10⁻³ of it (paired, 200 draws at 64 × 8 to 4096 × 128;
  float16 ten times less; ``tests/test_profile.py`` checks it), far below the null's Monte
  Carlo error (its median's standard error is ≈ 3·10⁻² sd at 2,000 draws). Block formats and
  FP8 move entries by ~0.08 σ: their null draws the factors (FP8 inside its 128-row tile) and
  puts them through the storage round trip (:func:`rmtbase.stats.precision.round_trip`).

Measured (CPU seconds per 250 null heads, one process, 2 cores, bfloat16 heads): 4.2 s → 1.8 s
at the Gemma-3 shape (640 × 256), 11.6 s → 0.6 s at 4096 × 128.

Under the permutation null (``null="permutation"``) each head's new axes are compared with
its own entries shuffled (:func:`permutation_profile_null`): draw b permutes W_Q's d_h·d entries
by π_b and W_K's by an independent σ_b — the permutations of
:func:`rmtbase.scoring.permutation.permutations`, shared by every head as in the spectral
permutation null — and computes the four statistics of (W_Q∘π_b, W_K∘σ_b) through the same
functions as the head's. Effect, band and p are then per head, against its own shuffles:
alignment and symmetry keep a null median near 0 and 1/d, the input focus's null is that of
the head's own entry law (heavy-tailed entries make uneven columns without any structure).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import xarray as xr

from ..decision.significance import benjamini_hochberg

#: Gaussian null draws of the new axes per storage.
PROFILE_DRAWS = 2000
_CHUNK = 250
#: axis -> (how its effect is read, what it means)
AXES = {
    "scale": ("value", "rms(W_Q) rms(W_K); descriptive, the baseline of the other axes"),
    "concentration": ("ratio", "qk.npr / null median: < 1, energy in fewer directions"),
    "outliers": ("value", "n_spikes: eigenvalues of W_QK above the null's largest (spectral "
                          "concentration, not a count of learned directions)"),
    "alignment": ("shift", "<W_Q, W_K>/(|W_Q||W_K|) - null median: query and key read the "
                           "same residual directions"),
    "symmetry": ("shift", "tr(W_QK^2)/|W_QK|^2 - null median: symmetric (+) or directional (-)"),
    "q_input_focus": ("shift", "CV^2 of W_Q's column energies - null median: uneven reading "
                               "of the residual stream"),
    "k_input_focus": ("shift", "CV^2 of W_K's column energies - null median"),
    "entry_tails": ("ratio", "beta_2 of W_K's entries / null median's (excess kurtosis + 3)"),
}
#: The new axes and the statistic of :mod:`rmtbase.stats.alignment` each reads.
FACTOR_AXES = ("alignment", "symmetry", "q_input_focus", "k_input_focus")


def factor_profile(wq, wk) -> dict[str, np.ndarray]:
    """The new axes' values of heads ``(..., d_h, d)`` (:mod:`rmtbase.stats.alignment`), by
    one compiled program per shape (:func:`_compiled_profile`), the same for model heads and
    for the Gaussian null's draws."""
    out = _compiled_profile()(wq, wk)
    return {a: np.asarray(v, dtype=np.float64) for a, v in out.items()}


@lru_cache(maxsize=1)
def _compiled_profile():
    """``jit(factor_profile_jax)``: the four statistics in fused passes over the factors. Run
    op by op, each reduction wrote a temporary as large as the factors; compiled, a chunk of
    250 Gaussian null heads at the Gemma-3 shape (640 × 256) takes 2.1 s of CPU rather than
    3.3 s (values move by float32 rounding, ~1e-9)."""
    import jax

    return jax.jit(factor_profile_jax)


def null_storage(storage: str) -> str:
    """The storage whose Gaussian profile null serves heads stored as ``storage``: float32 for
    every float storage, the storage itself for block formats and FP8 (module docstring)."""
    from ..stats.names import FLOAT_STORAGES

    return "float32" if storage in FLOAT_STORAGES else str(storage)


def profile_null(d: int, d_h: int, storage: str = "float32", n: int = PROFILE_DRAWS,
                 seed: int = 0, client=None) -> dict[str, np.ndarray]:
    """``{axis: (n,)}`` Gaussian null draws of :data:`FACTOR_AXES` at (d, d_h) for heads stored
    as ``storage`` (module docstring: float storages share the float32 draws), in chunks of 250
    heads; the same seed gives the same draws. The chunks are tasks of the Dask ``client`` when
    one is given, and inside a Dask task of its cluster
    (:mod:`rmtbase.baseline.task_cluster`); chunk ``i`` depends on (seed, i) alone, so the
    draws are the same bit for bit."""
    import contextlib

    import jax

    from ..baseline.task_cluster import map_in_order, task_client
    from ..stats.precision import check_storage

    storage = null_storage(check_storage(storage))
    x64 = bool(jax.config.read("jax_enable_x64"))  # a chunk on another worker runs as here
    args = [(d, d_h, storage, seed, i, min(_CHUNK, n - start), x64)
            for i, start in enumerate(range(0, n, _CHUNK))]
    with contextlib.nullcontext(client) if client is not None else task_client() as c:
        parts = [_profile_chunk(*a) for a in args] if c is None else \
            map_in_order(c, _profile_chunk, args)
    return {a: np.concatenate([p[a] for p in parts]) for a in FACTOR_AXES}


def _profile_chunk(d: int, d_h: int, storage: str, seed: int, i: int, m: int,
                   x64: bool) -> dict:
    """Chunk ``i`` (``m`` heads) of :func:`profile_null` for a null storage, under
    ``jax_enable_x64 = x64``: float32 by the exact reduced draws (head j of the chunk from
    ``fold_in(chunk key, j)``), other storages by factors through their round trip."""
    import jax
    import jax.numpy as jnp

    from ..ensembles import named_key
    from ..stats.precision import null_rows, round_trip

    with jax.enable_x64(x64):
        key = jax.random.fold_in(named_key(jax.random.key(int(seed)), "profile"), i)
        if storage == "float32":
            heads = jax.vmap(lambda j: jax.random.fold_in(key, j))(jnp.arange(m))
            out = _reduced_null(int(d), int(d_h))(heads)
            return {a: np.asarray(v, dtype=np.float64) for a, v in out.items()}
        kq, kk = jax.random.split(key)
        rows = null_rows(storage, d_h)  # FP8: each head drawn inside a full 128-row tile
        wq = jax.random.normal(kq, (m, rows, d), dtype=np.float32)
        wk = jax.random.normal(kk, (m, rows, d), dtype=np.float32)
        wq, wk = round_trip(wq, storage)[:, :d_h], round_trip(wk, storage)[:, :d_h]
        return factor_profile(wq, wk)


@lru_cache(maxsize=16)
def _reduced_null(d: int, d_h: int):
    """``jit``: head keys ``(m,)`` -> ``{axis: (m,)}``, one head at a time (bounded memory),
    by the reduced factors and drawn column energies of the module docstring."""
    import jax
    import jax.numpy as jnp

    from ..ensembles import named_key
    from ..ensembles.chisquare import chisquare
    from ..ensembles.wishart import gram_cholesky
    from ..stats.alignment import alignment, energy_cv2, symmetry

    dof = np.full((d,), d_h, dtype=np.float32)

    def one(key):
        if d >= 2 * d_h:  # the Bartlett factor of the stacked Gram [W_Q; W_K][W_Q; W_K]^T
            low = gram_cholesky(named_key(key, "gram"), d, 2 * d_h)
            wq, wk = low[:d_h], low[d_h:]
        else:
            wq = jax.random.normal(named_key(key, "wq"), (d_h, d), jnp.float32)
            wk = jax.random.normal(named_key(key, "wk"), (d_h, d), jnp.float32)
        return {"alignment": alignment(wq, wk), "symmetry": symmetry(wq, wk),
                "q_input_focus": energy_cv2(chisquare(named_key(key, "q_energy"), dof)),
                "k_input_focus": energy_cv2(chisquare(named_key(key, "k_energy"), dof))}

    return jax.jit(lambda keys: jax.lax.map(one, keys))


#: Memory for one block of heads' permuted factors (two (heads, chunk, d_h, d) float32 arrays).
_PERM_BLOCK_BYTES = 128 * 2**20


def _perm_profile_fn(d_h: int, d: int):
    """(H, n) heads of W_Q and W_K, (B, n) permutations of each -> {axis: (H, B)}."""
    import jax
    import jax.numpy as jnp

    def one(fq, fk, pq, pk):
        wq = jnp.take(fq, pq, axis=0).reshape(pq.shape[0], d_h, d)
        wk = jnp.take(fk, pk, axis=0).reshape(pk.shape[0], d_h, d)
        return factor_profile_jax(wq, wk)

    return jax.jit(jax.vmap(one, in_axes=(0, 0, None, None)))


def factor_profile_jax(wq, wk) -> dict:
    """:func:`factor_profile` without leaving JAX (for use under ``jit``)."""
    from ..stats.alignment import alignment, input_focus, symmetry

    return {"alignment": alignment(wq, wk), "symmetry": symmetry(wq, wk),
            "q_input_focus": input_focus(wq), "k_input_focus": input_focus(wk)}


def permutation_profile_null(wq, wk, draws: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``{axis: (..., draws)}`` permutation null of :data:`FACTOR_AXES` for heads
    ``wq, wk`` of shape ``(..., d_h, d)`` (module docstring): the permutations of
    :func:`rmtbase.scoring.permutation.permutations` (chunks of
    :data:`rmtbase.scoring.permutation.CHUNK`), the same for every head; heads in blocks of
    bounded memory."""
    import jax.numpy as jnp

    from .permutation import CHUNK, permutations

    wq = np.asarray(wq, dtype=np.float32)
    wk = np.asarray(wk, dtype=np.float32)
    lead, (d_h, d) = wq.shape[:-2], wq.shape[-2:]
    n = d_h * d
    fq, fk = wq.reshape(-1, n), wk.reshape(-1, n)
    n_heads = fq.shape[0]
    block = max(1, _PERM_BLOCK_BYTES // (2 * CHUNK * n * 4))
    fn = _perm_profile_fn(d_h, d)
    parts: dict[str, list] = {a: [] for a in FACTOR_AXES}
    for c, start in enumerate(range(0, int(draws), CHUNK)):
        count = min(CHUNK, int(draws) - start)
        pq, pk = (jnp.asarray(x) for x in permutations(seed, c, n, count))
        res: dict[str, list] = {a: [] for a in FACTOR_AXES}
        for h in range(0, n_heads, block):
            out = fn(jnp.asarray(fq[h:h + block]), jnp.asarray(fk[h:h + block]), pq, pk)
            for a in FACTOR_AXES:
                res[a].append(np.asarray(out[a], dtype=np.float64))
        for a in FACTOR_AXES:
            parts[a].append(np.concatenate(res[a]))
    return {a: np.concatenate(v, axis=1).reshape(*lead, int(draws))
            for a, v in parts.items()}


def _against(value, draws):
    """(effect, band lo, band hi, p) of ``value`` against ``draws``: shift from the median,
    the 2.5 %/97.5 % quantiles likewise, two-sided add-one p about the median."""
    x = np.sort(draws[np.isfinite(draws)])
    med, lo, hi = np.quantile(x, (0.5, 0.025, 0.975))
    dev = np.abs(x - med)
    v = np.asarray(value, dtype=np.float64)
    exceed = (dev[None, :] >= np.abs(v.ravel() - med)[:, None] - 1e-15).sum(axis=1)
    p = ((1 + exceed) / (1 + x.size)).reshape(v.shape)
    return v - med, lo - med, hi - med, np.where(np.isfinite(v), p, np.nan)


def add_profile(ds: xr.Dataset, profiles: list[dict], null_storages: list[str], d: int,
                d_h: int, *, alpha: float, seed: int, permutation: dict | None = None) -> None:
    """Add ``profile_value``, ``profile_effect``, ``profile_band_lo``/``_hi``, ``profile_p``,
    ``profile_q``, ``profile_flag`` over (layer, head, axis) to score ``ds`` (module
    docstring). ``profiles``: per layer :func:`factor_profile` of its heads; ``null_storages``:
    per layer the storage of its null; ``permutation``: under the permutation null,
    :func:`permutation_profile_null`'s ``{axis: (layer, head, draws)}`` (else the Gaussian
    null at each layer's storage)."""
    shape = (ds.sizes["layer"], ds.sizes["head"])
    axes = [a for a in AXES if _available(ds, a)]
    val = {v: np.full(shape + (len(axes),), np.nan) for v in
           ("value", "effect", "band_lo", "band_hi", "p")}
    from .profile_cache import cached_profile_null

    nulls = {} if permutation is not None else {
        s: cached_profile_null(d, d_h, s, seed=seed)
        for s in dict.fromkeys(map(null_storage, null_storages))}
    for j, a in enumerate(axes):
        if a in FACTOR_AXES:
            for li, (prof, s) in enumerate(zip(profiles, null_storages, strict=True)):
                val["value"][li, :, j] = prof[a]
                heads = ([(slice(None), nulls[null_storage(s)][a])] if permutation is None else
                         [(h, permutation[a][li, h]) for h in range(shape[1])])
                for h, draws in heads:
                    eff, lo, hi, p = _against(np.asarray(prof[a])[h], draws)
                    val["effect"][li, h, j], val["p"][li, h, j] = eff, p
                    val["band_lo"][li, h, j], val["band_hi"][li, h, j] = lo, hi
        elif a == "scale":
            val["value"][..., j] = ds["sigma_q"].values * ds["sigma_k"].values
        elif a == "outliers":
            val["value"][..., j] = ds["n_spikes"].values
        else:
            stat = "qk.npr" if a == "concentration" else "k.excess_kurtosis"
            for v, src in (("value", "value"), ("effect", "effect_size"), ("p", "p_value"),
                           ("band_lo", "null_band_lo"), ("band_hi", "null_band_hi")):
                val[v][..., j] = ds[src].sel(stat=stat).values
    q = np.full_like(val["p"], np.nan)
    flag = np.zeros(q.shape, dtype=bool)
    for j in range(len(axes)):
        if np.isfinite(val["p"][..., j]).any():
            flag[..., j], q[..., j] = benjamini_hochberg(val["p"][..., j], alpha)
    dims = ("layer", "head", "axis")
    ds.coords["axis"] = axes
    for v, arr in val.items():
        ds[f"profile_{v}"] = (dims, arr)
    ds["profile_q"] = (dims, q)
    ds["profile_flag"] = (dims, flag)
    ds["axis_effect"] = (("axis",), np.array([AXES[a][0] for a in axes], dtype=str))
    ds["axis_meaning"] = (("axis",), np.array([AXES[a][1] for a in axes], dtype=str))
    ds.attrs["profile"] = (
        "per-head axes (rmtbase.scoring.profile); new axes against " +
        (f"{PROFILE_DRAWS} Gaussian null draws at each layer's null storage (float storages "
         "share float32's)" if permutation is None
         else f"{next(iter(permutation.values())).shape[-1]} permutations of each head's own "
              "entries"))


def _available(ds, axis: str) -> bool:
    if axis in FACTOR_AXES or axis == "scale":
        return True
    if axis == "outliers":
        return "n_spikes" in ds
    stat = "qk.npr" if axis == "concentration" else "k.excess_kurtosis"
    return "stat" in ds.coords and stat in ds["stat"].values and "effect_size" in ds


__all__ = ["AXES", "FACTOR_AXES", "PROFILE_DRAWS", "add_profile", "factor_profile",
           "factor_profile_jax", "null_storage", "permutation_profile_null", "profile_null"]
