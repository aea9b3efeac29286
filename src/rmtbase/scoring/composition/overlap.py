"""The QK overlap's null test: a p, a z and Benjamini–Hochberg for every pair of heads of a layer.

c_ab = ⟨W_QK^a, W_QK^b⟩_F / (‖W_QK^a‖_F ‖W_QK^b‖_F) against independent Gaussian factors
(:mod:`rmtbase.analytic.composition_moments`). p = (1 + #{|null| ≥ |c|}) / (1 + N);
``qk_overlap_z`` = c / √Var c; ``qk_overlap_p_tail`` the tail-resolving p of |c| (none for d_h
< 4); BH over all layers' pairs (``qk_overlap_q``, ``qk_overlap_flag``) and per layer
(``qk_overlap_q_layer``); both triangles carry the pair.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np
import xarray as xr

from ...analytic.composition_moments import overlap_moments
from ...baseline.composition_bidiagonal import overlap_bidiagonal
from ...baseline.composition_null import Part, null_overlap, null_overlap_full
from ...decision.significance import benjamini_hochberg
from ...ensembles.gaussian import named_key
from ...stats.storage import storage_record


def overlap_null(key, d: int, d_h: int, draws: int, shared_key: bool,
                 storage="float32") -> np.ndarray:
    """Sorted |c| of ``draws`` null overlaps (reduced sampler for float32 storage when
    2 d_h ≤ d, whole factors through the storage round trip otherwise). ``storage``: a name
    (looked up here, once) or its record (:mod:`rmtbase.stats.storage`)."""
    return np.sort(overlap_draws(key, d, d_h, 0, draws, shared_key, storage))


def overlap_draws(key, d: int, d_h: int, start: int, n: int, shared_key: bool,
                  storage="float32", bar=None) -> np.ndarray:
    """|c| of null draws ``start`` … n−1 (float64, in draw order) by the sampler
    :func:`overlap_null` picks (first
    :func:`~rmtbase.baseline.composition_bidiagonal.overlap_bidiagonal`); ``bar`` is advanced
    per compiled call."""
    storage = storage_record(storage)
    kw = {"part": Part(int(start), bar)}
    if storage.is_narrow_float or 2 * d_h > d:
        c = null_overlap_full(key, d, d_h, n, shared_key, storage=storage, **kw)
    elif overlap_bidiagonal(d, d_h, shared_key, storage):
        from ...baseline.composition_bidiagonal import null_overlap_shared_bidiagonal

        c = null_overlap_shared_bidiagonal(key, d, d_h, n, **kw)
    else:
        c = null_overlap(key, d, d_h, n, shared_key, **kw)
    return np.abs(np.asarray(c, np.float64))


def _two_sided_p(values, null_abs):
    n = null_abs.size
    v = np.abs(np.asarray(values, np.float64))
    ge = n - np.searchsorted(null_abs, v, side="left")
    return np.where(np.isfinite(v), (1.0 + ge) / (1.0 + n), np.nan)


def _tail(values, null_abs):
    """Two-sided p of ``values`` from |c| against the sorted |null|
    (:class:`rmtbase.decision.tails.TailModel`)."""
    from ...decision.tails import TailModel

    v = np.abs(np.asarray(values, np.float64))
    return np.where(np.isfinite(v), TailModel(null_abs).evaluate(v)["p_hi"], np.nan)


class _Null(NamedTuple):
    """The overlap null a test draws from: shape, key, seed (None: not cached), storage."""

    d: int
    d_h: int
    key: object
    seed: int | None
    storage: object


def _settled(ov, tables: dict, null: _Null, draws: int, alpha: float, progress: bool):
    """({table: sorted |null|}, {table: n}): "distinct" and "shared" drawn until no pair's flag
    could differ at ``draws`` (:func:`rmtbase.scoring.composition.stopping.settle`), cached with a
    seed."""
    d, d_h, key, seed, storage = null
    from ...progress import message, progress_bar
    from .cache import cached_null
    from .stopping import continued, settle

    h = ov.shape[1]
    upper = np.triu(np.ones((h, h), dtype=bool), 1)
    values = {t: np.abs(ov[:, sel & upper]) for t, sel in tables.items()}

    def draw(t, n, previous):
        start = 0 if previous is None else previous.size

        def fresh():
            with progress_bar(n - start, desc=f"rmtbase QK-overlap null ({t} key heads)",
                              unit="draw", enabled=progress) as bar:
                return continued(previous, overlap_draws(named_key(key, t), d, d_h, start, n,
                                                         t == "shared", storage, bar))
        if seed is None:
            return fresh()
        return cached_null(f"overlap-{t}", d, d_h, n, seed, storage.name, fresh)

    def said(t, n):
        if progress:
            message(f"rmtbase: some QK-overlap flags are not settled; drawing the overlap null "
                    f"({t} key heads) to {n:,}")

    return settle(values, draw, draws, alpha=alpha, on_grow=said)


def overlap_tests(overlap, d: int, d_h: int, n_kv: int, key, draws: int,
                  storage: str = "float32", alpha: float = 0.05, progress: bool = False) -> dict:
    """p, tail p, z, q (all layers), q (per layer) and flag (L, H, H) of ``overlap`` (L, H, H);
    heads a, b share a key head when a // (H / n_kv) = b // (H / n_kv). ``key``: a JAX key, or a
    seed (then the null is cached, :mod:`rmtbase.scoring.composition.cache`). Nulls are drawn as far
    as the flags need, at most ``draws``; ``drawn`` {table: n} says how far. ``storage``: name or
    record."""
    storage = storage_record(storage)
    seed = key if isinstance(key, int) else None
    if seed is not None:
        key = named_key(jax.random.key(seed), "overlap")

    ov = np.asarray(overlap, np.float64)
    n_l, h, _ = ov.shape
    group = h // int(n_kv)
    kv = np.arange(h) // group
    shared = (kv[:, None] == kv[None, :]) & ~np.eye(h, dtype=bool)
    upper = np.triu(np.ones((h, h), dtype=bool), 1)
    p = np.full(ov.shape, np.nan)
    pt = np.full(ov.shape, np.nan)
    z = np.full(ov.shape, np.nan)
    n_used = np.full(ov.shape, np.nan)
    var = {}
    tables = {name: (shared if sk else ~shared) & ~np.eye(h, dtype=bool)
              for sk, name in ((False, "distinct"), (True, "shared"))}
    tables = {name: sel for name, sel in tables.items() if sel.any()}
    nulls, drawn = _settled(ov, tables, _Null(d, d_h, key, seed, storage), draws, alpha,
                            progress)
    for sk in (False, True):
        name = "shared" if sk else "distinct"
        if name not in tables:
            continue
        sel = tables[name]
        null = nulls[name]
        n_used[:, sel] = null.size
        var[sk] = overlap_moments(d, d_h, sk)[1]
        p[:, sel] = _two_sided_p(ov[:, sel], null)
        pt[:, sel] = _tail(ov[:, sel], null) if d_h >= 4 else p[:, sel]
        z[:, sel] = ov[:, sel] / np.sqrt(var[sk])
    q = np.full(ov.shape, np.nan)
    ql = np.full(ov.shape, np.nan)
    pu = pt[:, upper]
    q[:, upper] = benjamini_hochberg(pu.reshape(-1), alpha)[1].reshape(pu.shape)
    for layer in range(n_l):
        ql[layer][upper] = benjamini_hochberg(pt[layer][upper], alpha)[1]
    for a in (q, ql):
        a[:] = np.where(upper[None], a, np.swapaxes(a, 1, 2))
    flag = np.where(np.isfinite(q), q <= alpha, False).astype(np.int8)
    return {"p": p, "p_tail": pt, "z": z, "q": q, "q_layer": ql, "flag": flag, "var": var,
            "drawn": drawn, "n": n_used}


def add_overlap_tests(ds: xr.Dataset, *, seed: int, draws: int, storage: str = "float32",
                      alpha: float = 0.05, progress: bool = False) -> xr.Dataset:
    """Add the ``qk_overlap_*`` tests to a composition Dataset (needs ``qk_overlap``, attrs ``d``,
    ``d_h``, ``n_kv_heads``); key ``named_key(key(seed), "overlap")``; ``storage``: name or
    record."""
    storage = storage_record(storage)
    d, d_h, n_kv = int(ds.attrs["d"]), int(ds.attrs["d_h"]), int(ds.attrs["n_kv_heads"])
    t = overlap_tests(ds.qk_overlap.values, d, d_h, n_kv, int(seed), int(draws), storage, alpha,
                      progress)
    dims = ("layer", "head_from", "head_to")
    defs = {
        "p": ("two-sided add-one Monte Carlo p-value of the QK overlap",
              "(1 + #{|null| >= |c|}) / (1 + draws), independent Gaussian factors (shared key "
              "head within a GQA group)"),
        "p_tail": ("QK overlap p-value with a tail beyond the draws",
                   "qk_overlap_p where >= 10 null draws reach |c|; further out a generalized "
                   "Pareto tail of |c| with a conservative shape (rmtbase.decision.tails."
                   "TailModel), floored at 1e-16; add-one only for d_h < 4"),
        "z": ("QK overlap over its exact null sd", "c / sqrt(Var c), Var c = 1/d^2 (distinct key "
              "heads, exact) or about (d + d_h + 1)/(d (d d_h + 2)) (shared key head; exact "
              "for d_h <= 2)"),
        "q": ("Benjamini-Hochberg q of the QK overlap over all layers' pairs",
              "BH of qk_overlap_p_tail over a < b"),
        "q_layer": ("Benjamini-Hochberg q of the QK overlap within the layer",
                    "BH of qk_overlap_p_tail over a < b"),
        "flag": ("BH flag of the QK overlap at alpha", f"qk_overlap_q <= {alpha}"),
    }
    for name, (ln, definition) in defs.items():
        ds[f"qk_overlap_{name}"] = xr.DataArray(t[name], dims=dims, attrs={
            "long_name": ln, "units": "1", "definition": definition})
    ds.attrs["qk_overlap_null_var"] = float(t["var"].get(False, np.nan))
    ds.attrs["qk_overlap_null_var_shared_key"] = float(t["var"].get(True, np.nan))
    ds.attrs["qk_overlap_null_storage"] = storage.name
    used = max(t["drawn"].values(), default=int(draws))
    for name in ("p", "p_tail"):  # the draws behind the p a flag reads
        ds[f"qk_overlap_{name}"].attrs["draws"] = int(used)
    for table, n in t["drawn"].items():  # each null's draws (composition_stopping)
        ds.attrs[f"qk_overlap_null_draws_{table}"] = int(n)
    ds.attrs["qk_overlap_null_draws_cap"] = int(draws)
    p = ds["qk_overlap_p"].values
    with np.errstate(invalid="ignore"):
        se = np.sqrt(p * (1.0 - p) / t["n"])
    ds["qk_overlap_p_se"] = xr.DataArray(se.astype(np.float32), dims=dims, attrs={
        "long_name": "Monte Carlo se of qk_overlap_p", "units": "1", "draws": int(used),
        "definition": "sqrt(p (1 - p) / n), p = qk_overlap_p, n its null's draws "
                      "(qk_overlap_null_draws_distinct or _shared)"})
    return ds


__all__ = ["add_overlap_tests", "overlap_null", "overlap_tests"]
