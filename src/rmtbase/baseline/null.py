"""Monte Carlo null draws of a head's statistics: ``null_draws(key, d, d_h, n_draws, ...)``.

Draw i uses ``fold_in(key, i)`` only, in fixed batches (:func:`draw_batch`): results do not
depend on ``chunk_size``, ``n_draws`` or blocking; each goes through
:func:`rmtbase.stats.head_stats`, as model heads do. Ensembles (W_Q, W_K ``(d_h, d)``, entry std σ,
no 1/√d; every draw through the checkpoint's storage round trip):

- ``"lowrank"``: i.i.d. N(0, σ_Q²), N(0, σ_K²); spectral statistics exact in law from the
  bidiagonal and Bartlett factors (:mod:`rmtbase.ensembles.wishart`).
- ``"ginibre"`` (``"gaussian"`` deprecated): ``qk.*`` of a real Ginibre d×d matrix with entry
  std σ_Q σ_K √d_h.
- ``"residual"``: first d_h rows of ∏(I + W_l), depth ``depth``, σ² = 1/d, rescaled by
  σ √(d / 2^L) so that E[rms²] = σ²; then as ``"lowrank"``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import jax
import jax.numpy as jnp

from ..ensembles import ginibre, lowrank_factors, map_draws, named_key, residual_rows
from ..ensembles.wishart import gram_bidiagonal, gram_cholesky
from ..errors import InputError, check_dims, check_keywords, check_positive_int, check_sigma
from ..limits import MAX_BYTES
from ..stats import head_stats
from ..stats.elementwise import flat_element_stats, trim_fraction
from ..stats.precision import null_rows, round_trip
from ..stats.spectral import (
    eigvals_from_bidiagonal,
    eigvals_from_factors,
    null_eigvals_by_grams,
    spectral_stats,
)
from ..stats.storage import FLOAT32, Storage, storage_record
from .draw_route import gram_route
from .eig_route import eig_method
from .limits import CPU_BATCH_BUDGET, batch_budget, check_draw_memory, draw_memory
from .table_contents import STAT_SETS, check_ensemble, fast_spectral

MEMORY_BUDGET = CPU_BATCH_BUDGET  # bytes of working memory per CPU chunk (approximate)


def draw_batch(d, d_h, stats, ensemble, itemsize, budget=MEMORY_BUDGET,
               storage: Storage = FLOAT32, backend=None) -> int:
    """Draws evaluated together in one vectorised batch (fixed per cell, never from n_draws).

    XLA's vectorised results depend on the batch width in the last bits, so the width depends on
    cell, statistics, dtype, storage and backend only (what fits ``budget``, capped; CPU spectral
    fast path: 125, the shipped tables' width; other CPU paths: 50 per compiled call)."""

    cpu = (jax.default_backend() if backend is None else backend) == "cpu"
    fast = fast_spectral(stats, ensemble, storage)
    per = draw_memory(d, d_h, stats, ensemble, itemsize, fast)
    cap = (125 if cpu else 1024) if fast else (50 if cpu else 1024)
    return max(1, min(cap, budget // per))


def sampler(d, d_h, stats="all", ensemble="lowrank", dtype=jnp.float32, backend=None,
            storage: Storage = FLOAT32) -> str:
    """One line naming how :func:`null_draws` samples a cell (the ``sampler`` attr of table
    provenance, compared with the shipped tables'; it keeps their module name
    ``rmtbase.wishart``)."""
    if fast_spectral(stats, ensemble, storage):
        return (f"lowrank spectral fast path: W_Q bidiagonal B, W_K Bartlett L_K "
                f"(rmtbase.wishart), lambda = s^2(B^T L_K) by "
                f"{eig_method(d, d_h, dtype, backend)}")
    stored = "" if storage.is_identity else \
        f", stored as {storage.name} (rmtbase.stats.precision)"
    grams = "; lambda by the Gram route, checked per draw (rmtbase.baseline.draw_route)" \
        if gram_route(d, d_h, stats, ensemble, storage, dtype, backend) else ""
    return (f"{ensemble} factors W_Q, W_K drawn in full{stored}; statistics by "
            f"rmtbase.stats.head_stats{grams}")


@dataclass(frozen=True)
class Draws:
    """What :func:`null_draws` draws for one cell, validated: cell, σ's, statistic set, ensemble and
    depth, dtype, Weibull trim, ``spectrum``/``lam_out`` outputs and the storage record.
    Hashable: the key of the compiled per-draw function (:func:`_draw_fn`)."""

    d: int
    d_h: int
    sigma_q: float = 1.0
    sigma_k: float = 1.0
    stats: str = "all"
    ensemble: str = "lowrank"
    depth: int | None = None
    dtype: jnp.dtype = jnp.dtype(jnp.float32)
    trim: float = 0.8
    spectrum: bool = False
    lam_out: bool = False
    storage: Storage = FLOAT32
    lean: bool = False  # the fast path without its statistics (:func:`lambda_draws`)

    @property
    def fast(self) -> bool:
        """Whether the exact fast spectral path draws it (:func:`fast_spectral`)."""
        return fast_spectral(self.stats, self.ensemble, self.storage)


#: Block formats whose null draws round-trip W_Q and W_K as one pair (:func:`_factors`): the
#: symmetric ones, whose quantiser only multiplies a normal draw (x·(1/d), guarded) and takes
#: extremes of its size, so wherever XLA computes the normals the values are the same. Q4_1,
#: Q5_1 subtract a block's minimum from it, which LLVM may contract with the normal's last
#: product into a multiply-add in some fusions: stacked, their draws moved (1,000 draws each).
PAIRED = frozenset({"q4_0", "q5_0", "q8_0"})


def _factors(req: Draws, key, stack: bool):
    """W_Q, W_K of one draw of ``req`` (put through its storage) and, for a :data:`PAIRED` format
    with ``stack``, both as one ``(2, d_h, d)`` array whose round trip runs once (else None)."""
    d, d_h, dtype, storage = req.d, req.d_h, req.dtype, req.storage
    if req.ensemble == "residual":
        scale = math.sqrt(d / 2.0**req.depth)
        wq = req.sigma_q * scale * residual_rows(named_key(key, "wq"), d, req.depth, d_h,
                                                 dtype=dtype)
        wk = req.sigma_k * scale * residual_rows(named_key(key, "wk"), d, req.depth, d_h,
                                                 dtype=dtype)
    elif null_rows(storage, d_h) != d_h:  # FP8: the head inside a full 128-row tile
        rows = null_rows(storage, d_h)
        wq = ginibre(named_key(key, "wq"), (rows, d), req.sigma_q, dtype)
        wk = ginibre(named_key(key, "wk"), (rows, d), req.sigma_k, dtype)
        return round_trip(wq, storage)[:d_h], round_trip(wk, storage)[:d_h], None
    else:
        wq, wk = lowrank_factors(key, d, d_h, req.sigma_q, req.sigma_k, dtype)
    if stack and storage.name in PAIRED:
        both = round_trip(jnp.stack([wq, wk]), storage, materialise=True)
        return both[0], both[1], both
    if not storage.is_identity:  # written once, read by every statistic (materialise)
        wq, wk = (round_trip(w, storage, materialise=True) for w in (wq, wk))
    return wq, wk, None


def _factor_stats(both, trim: float, storage: Storage) -> dict:
    """``q.<stat>``, ``k.<stat>`` of the pair ``both`` in one ``lax.map`` loop, each factor read as
    its quantiser's blocks ``(d_h, d / block, block)`` (the shape that fixes XLA's summation
    order)."""
    d_h, d = both.shape[1:]
    blocks = both.reshape(2, d_h, d // storage.block, storage.block)
    st = jax.lax.map(lambda b: flat_element_stats(b.reshape(-1), trim, storage.name), blocks)
    return {f"{m}.{s}": v[i] for i, m in enumerate("qk") for s, v in st.items()}


def _lambda(req: Draws, wq, wk, both):
    """λ of one draw of ``req`` from its factors: the Gram route where
    :func:`rmtbase.baseline.draw_route.gram_route` says so, else the heads' QR route. ``both``:
    the pair from :func:`_factors`, if made."""
    if gram_route(req.d, req.d_h, req.stats, req.ensemble, req.storage, req.dtype):
        return null_eigvals_by_grams(both if both is not None else jnp.stack([wq, wk]))[0]
    return eigvals_from_factors(wq, wk)


@lru_cache(maxsize=64)
def _draw_fn(req: Draws):
    """The per-draw function of ``req`` (cached). ``req.spectrum`` adds ``"qk.spectrum"``
    (x = λ/(σ_Q²σ_K²d²)); ``req.lam_out`` adds ``"qk.lambda"``."""
    d, d_h, sigma_q, sigma_k, dtype, trim = req.d, req.d_h, req.sigma_q, req.sigma_k, \
        req.dtype, req.trim
    stats, ensemble, storage = req.stats, req.ensemble, req.storage
    spectrum, lam_out = req.spectrum, req.lam_out
    spectral = stats in ("all", "spectral")
    elementwise = stats in ("all", "elementwise")
    norm = sigma_q * sigma_q * sigma_k * sigma_k * d * d

    def finish(out, lam):
        if spectrum:
            out["qk.spectrum"] = lam / norm
        if lam_out:
            out["qk.lambda"] = lam
        return out

    if req.fast:
        method = eig_method(d, d_h, dtype)

        def fn(key):
            bq, sq = gram_bidiagonal(named_key(key, "wq"), d, d_h, sigma_q, dtype)
            lk = gram_cholesky(named_key(key, "wk"), d, d_h, sigma_k, dtype)
            lam = eigvals_from_bidiagonal(bq, sq, lk, method)
            scale = math.sqrt(d_h * d)
            out = {"q.rms": jnp.sqrt(jnp.sum(bq * bq) + jnp.sum(sq * sq)) / scale,
                   "k.rms": jnp.sqrt(jnp.sum(lk * lk)) / scale}
            out.update({} if req.lean else {f"qk.{s}": v for s, v in spectral_stats(lam).items()})
            return finish(out, lam)
        return fn

    if ensemble == "ginibre":
        def fn(key):
            wq, wk, _ = _factors(req, key, stack=False)
            out = head_stats(wq, wk, which=("q", "k"), spectral=False,
                             elementwise=elementwise, trim=trim, storage=storage)
            # the key keeps the ensemble's pre-rename name "gaussian": the draws stay bit for bit
            g = (sigma_q * sigma_k * math.sqrt(d_h)) * jax.random.normal(
                named_key(key, "gaussian"), (d, d), dtype)
            if elementwise:
                out.update({f"qk.{s}": v
                            for s, v in flat_element_stats(g.reshape(-1), trim).items()})
            lam = None
            if spectral:
                s = jnp.linalg.svd(g, compute_uv=False)
                lam = s * s
                out.update({f"qk.{k}": v for k, v in spectral_stats(lam).items()})
            return finish(out, lam)
        return fn

    def fn(key):
        wq, wk, both = _factors(req, key, stack=True)
        loop = elementwise and both is not None  # W_Q's, W_K's statistics: one loop (_factors)
        out = head_stats(wq, wk, which=("qk",) if loop else ("q", "k", "qk"), spectral=False,
                         elementwise=elementwise, trim=trim, storage=storage)
        if loop:
            out.update(_factor_stats(both, trim, storage))
        # λ once, for the statistics and for λ returned (XLA does not merge two SVD calls)
        lam = _lambda(req, wq, wk, both) if spectral or spectrum or lam_out else None
        if spectral:
            out.update({f"qk.{k}": v for k, v in spectral_stats(lam).items()})
        return finish(out, lam)
    return fn


def _checked_dtype(dtype):
    """float32, or float64 where JAX has x64 enabled; one-line InputError otherwise."""
    dtype = jnp.dtype(dtype)
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise InputError("dtype float64 needs jax_enable_x64 (jax.config.update('jax_enable_x64', True))")
    if dtype not in (jnp.float32, jnp.float64):
        raise InputError(f"dtype must be float32 or float64, got {dtype}")
    return dtype


#: :func:`null_draws`' keywords for the law drawn and the outputs, with their defaults.
DRAW_OPTIONS = {"sigma_q": 1.0, "sigma_k": 1.0, "stats": "all", "ensemble": "lowrank",
                "depth": None, "dtype": jnp.float32, "trim": 0.8, "storage": "float32",
                "return_spectrum": False, "return_lambda": False}


def null_draws(key, d, d_h, n_draws, *, chunk_size=None, memory_budget=None, progress=False,
               **options) -> dict:
    """Null draws of the head statistics: ``{"qk.npr": (n_draws,), ...}`` as numpy arrays.

    key: JAX PRNG key; draw i uses ``fold_in(key, i)``. d, d_h: width and head dimension
    (1 ≤ d_h ≤ d). chunk_size never changes the numbers; memory_budget (bytes per batch) sets the
    batch width and so the last bits; a draw beyond available memory is an :class:`InputError`
    up front. progress: bool or reporter with ``update(n)``. ``options`` (:data:`DRAW_OPTIONS`,
    with their defaults; checked into a :class:`Draws`): sigma_q, sigma_k: entry stds. stats:
    ``"all"``, ``"spectral"`` or ``"elementwise"`` (``q.rms``, ``k.rms`` always). ensemble:
    ``"lowrank"``, ``"ginibre"`` or ``"residual"`` (``depth`` ≥ 1). dtype: float32 or float64
    (``jax_enable_x64``). trim: the Weibull fit's trim. storage: the checkpoint's storage,
    applied to every draw's factors. return_spectrum: add ``"qk.spectrum"`` ``(n_draws, d_h)``,
    x = λ/(σ_Q² σ_K² d²) descending; return_lambda: ``"qk.lambda"``, λ descending (d columns
    for ginibre)."""
    check_keywords(options, DRAW_OPTIONS, "null_draws")
    o = {**DRAW_OPTIONS, **options}
    sigma_q, sigma_k, stats, ensemble, depth = (o["sigma_q"], o["sigma_k"], o["stats"],
                                                o["ensemble"], o["depth"])
    dtype, trim, storage = o["dtype"], o["trim"], o["storage"]
    return_spectrum, return_lambda = o["return_spectrum"], o["return_lambda"]
    d, d_h = check_dims(d, d_h)
    n = check_positive_int(n_draws, "n_draws")
    sigma_q = check_sigma(sigma_q, "sigma_q")
    sigma_k = check_sigma(sigma_k, "sigma_k")
    if stats not in STAT_SETS:
        raise InputError(f"stats must be one of {', '.join(STAT_SETS)}, got {stats!r}")
    ensemble = check_ensemble(ensemble)
    if ensemble == "residual":
        if depth is None:
            raise InputError("ensemble='residual' needs depth (number of residual layers, >= 1)")
        depth = check_positive_int(depth, "depth")
    elif depth is not None:
        raise InputError(f"depth applies only to ensemble='residual', got ensemble={ensemble!r}")
    if (return_spectrum or return_lambda) and stats == "elementwise":
        raise InputError("return_spectrum/return_lambda need spectral statistics "
                         "(stats='all' or 'spectral')")
    dtype = _checked_dtype(dtype)
    trim_fraction(trim)
    storage = storage_record(storage)  # the name looked up once, here
    if d % storage.block:
        raise InputError(f"storage {storage.name} needs d to be a multiple of {storage.block}, "
                         f"got d={d}")
    budget = batch_budget() if memory_budget is None else \
        check_positive_int(memory_budget, "memory_budget", MAX_BYTES)

    req = Draws(d, d_h, sigma_q, sigma_k, stats, ensemble, depth, dtype, float(trim),
                bool(return_spectrum), bool(return_lambda), storage)
    return _run(req, key, n, chunk_size, budget, progress)


def _run(req: Draws, key, n: int, chunk_size, budget: int, progress) -> dict:
    """The draws of the validated ``req`` (:func:`null_draws`' arguments, checked)."""
    d, d_h, stats, ensemble, dtype = req.d, req.d_h, req.stats, req.ensemble, req.dtype
    storage = req.storage
    batch = draw_batch(d, d_h, stats, ensemble, dtype.itemsize, budget, storage)
    use_map = not req.fast and jax.default_backend() == "cpu"
    check_draw_memory(d, d_h, stats, ensemble, dtype.itemsize, req.fast,
                      1 if use_map else batch)
    fn = _draw_fn(req)
    if use_map:
        # chunks of the full batch also for shorter runs (the extra draws are discarded): a
        # table's last, shorter block (300 draws = 250 + 50) then reuses the compiled batch
        # rather than compiling the draw function again for its length
        out = map_draws(fn, key, n, chunk_size or batch, method="map", progress=progress)
    else:
        out = map_draws(fn, key, n, chunk_size, method="vmap", batch=batch, progress=progress)
    return dict(out)


def lambda_draws(key, d, d_h, n_draws, *, statistics=True) -> dict:
    """λ (``"qk.lambda"``, descending), ``"q.rms"``, ``"k.rms"`` of the float32 lowrank fast path:
    the bits of ``null_draws(..., stats="spectral", return_lambda=True)``. ``statistics``: False
    leaves them out (:attr:`Draws.lean`), same bits. Returns ``{name: (n_draws, ...)}``."""
    if statistics:
        return null_draws(key, d, d_h, n_draws, stats="spectral", return_lambda=True)
    d, d_h = check_dims(d, d_h)
    n = check_positive_int(n_draws, "n_draws")
    req = Draws(d, d_h, stats="spectral", lam_out=True, lean=True)
    return _run(req, key, n, None, batch_budget(), False)
