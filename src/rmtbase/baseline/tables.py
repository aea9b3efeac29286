"""Baseline tables: Monte Carlo null draws over a (d, d_h) grid as an xarray Dataset.

A table holds one data variable per statistic with dims ``(d, d_h, draw)``: spectral statistics of
W_QK = W_Qᵀ W_K by their bare names (``npr``, ``lambda_max``, ...), element statistics as
``<matrix>_<stat>`` (``qk_std``, ``q_weibull_k``, ...); see :func:`rmtbase.stats.table_name`.
W_Q, W_K are (d_h, d) with i.i.d. N(0, σ_Q²), N(0, σ_K²) entries; no 1/√d or 1/√d_h factor is
applied (``attrs["scaling_factor"] == "none"``). Each variable carries CF-style attrs
(``long_name``, ``units``, ``definition``) and ``sigma_power``/``scaling`` from
:data:`rmtbase.stats.STAT_INFO`, so :func:`rmtbase.baseline.cache.rescale` serves any σ exactly from a
σ = 1 table. The draws themselves are stored, so empirical p-values are exact (add-one floor
1/(draws + 1)). A table with spectral statistics also stores every draw's spectrum, ``lambda``
with dims ``(d, d_h, draw, eig)`` (:mod:`rmtbase.baseline.spectra`), so a spectral statistic
added later is derived from it without regenerating the table.

Key derivation (fixed by ``TABLE_FORMAT``; any chunking or Dask split gives the same numbers):
``cell = fold_in(fold_in(jax.random.key(seed), d), d_h)`` (then ``fold_in(cell, depth)`` for the
residual ensemble); draws are cut into blocks of :data:`DRAW_BLOCK` = 250; block ``b`` is
``rmtbase.baseline.null.null_draws(fold_in(cell, b), d, d_h, n_b, ...)``, whose draw ``j`` uses
``fold_in(block_key, j)``. So draw ``i`` is a pure function of (seed, d, d_h, i) and a shorter
table is a prefix of a longer one. Blocks run under ``jax.enable_x64(dtype == "float64")``
whatever the caller's JAX setting, so a float32 table is the same bit for bit in a 64-bit
session (tests), a 32-bit one (CLI) and on a Dask worker.

Tables are sampled at σ = 1 and moved to (σ_Q, σ_K) by each statistic's exact rule in float64
(:mod:`.sigma_range`), so a table at σ is exactly the σ = 1 table rescaled (one rounding to the
table's dtype); a σ outside the dtype's range is refused.

:func:`write_table` writes netCDF4 atomically (temporary file in the same directory, fsync,
``os.replace``); :func:`read_table` turns a foreign or truncated file into
:class:`~rmtbase.errors.TableError` naming the file; :func:`summary` gives mean, std and quantiles
per statistic beside the analytic references of :func:`reference_values`.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .._version import __version__
from ..errors import InputError
from .limits import check_cells
from .references import QUANTILES, REFERENCE_NOTES, reference_values, summary  # noqa: F401
from .table_contents import ENSEMBLES, STAT_SETS, stat_names  # noqa: F401
from .table_file import (  # noqa: F401
    TABLE_FORMAT,
    check_output_file,
    check_writable,
    read_table,
    write_table,
)
from .table_spec import DRAW_BLOCK, DTYPES, TableSpec, grid_cells, make_spec  # noqa: F401

if TYPE_CHECKING:
    import xarray as xr


def cell_key(seed: int, d: int, d_h: int, depth: int | None = None):
    """The PRNG key of cell (d, d_h): ``fold_in(fold_in(key(seed), d), d_h)`` (+ depth)."""
    import jax

    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), d), d_h)
    return key if depth is None else jax.random.fold_in(key, depth)


def generate_blocks(spec: TableSpec, d: int, d_h: int, start: int = 0, stop: int | None = None,
                    bar=None, store=None) -> dict:
    """Draws of blocks ``start .. stop-1`` of cell (d, d_h): ``{"qk.npr": array, ...}`` (see
    the module docstring for the keys), sampled at σ = 1 and moved to the spec's (σ_Q, σ_K) by
    :func:`rmtbase.baseline.sigma_range.scale_draws`. ``bar``: optional progress object, updated in
    draws. ``store``: optional :class:`rmtbase.baseline.partial.PartialStore`; blocks found
    there are not computed again, computed ones are added."""
    import jax

    from .null import null_draws
    from .sigma_range import scale_draws
    from .table_contents import LAMBDA_KEY, stores_spectrum
    from .table_file import fault_point

    stop = spec.n_blocks() if stop is None else stop
    if not 0 <= start < stop <= spec.n_blocks():
        raise InputError(f"block range [{start}, {stop}) outside [0, {spec.n_blocks()})")
    parts = []
    spectrum = stores_spectrum(spec.stats)
    with jax.enable_x64(spec.x64):
        key = cell_key(spec.seed, d, d_h, spec.depth)
        for b in range(start, stop):
            n = min(DRAW_BLOCK, spec.draws - b * DRAW_BLOCK)
            got = store.load(d, d_h, b, n) if store is not None else None
            if got is not None and spectrum and LAMBDA_KEY not in got:
                got = None  # a block stored without its spectrum is computed again
            if got is None:
                got = null_draws(jax.random.fold_in(key, b), d, d_h, n, stats=spec.stats,
                                 ensemble=spec.ensemble, depth=spec.depth,
                                 chunk_size=spec.chunk_size,
                                 dtype=getattr(jax.numpy, spec.dtype), storage=spec.storage,
                                 return_lambda=spectrum)
                if store is not None:
                    store.save(d, d_h, b, got)
                    fault_point(f"block:{store.blocks()}")
            parts.append(scale_draws(got, spec.sigma_q, spec.sigma_k, spec.dtype))
            if bar is not None:
                bar.update(n)
    return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0]}


def table_size(spec: TableSpec, cells) -> int:
    """Bytes to reserve on disk for the table (and the blocks kept to resume it)."""
    from .table_contents import n_eigenvalues, stores_spectrum
    from .table_file import table_bytes

    n_d = len({c[0] for c in cells})
    n_dh = len({c[1] for c in cells})
    n_eig = max(n_eigenvalues(d, d_h, spec.ensemble) for d, d_h in cells) \
        if stores_spectrum(spec.stats) else 0
    return table_bytes((len(stat_names(spec)) + n_eig) * n_d * n_dh * spec.draws,
                       np.dtype(spec.dtype).itemsize)


def _variable_attrs(name: str, statistics=None) -> dict:
    """CF-style attrs of table variable for ``head_stats`` key ``name`` (``"qk.npr"``), from
    its record (:mod:`rmtbase.stats.statistic`; ``statistics``: the records, default the
    registry)."""
    from ..stats.statistic import STATISTICS, stat_info

    matrix, stat = name.split(".", 1)
    info = stat_info(STATISTICS if statistics is None else statistics)[stat]
    sigma = {"qk": "sigma_q*sigma_k", "q": "sigma_q", "k": "sigma_k"}[matrix]
    return {"long_name": f"{info['long_name']} of {'W_QK' if matrix == 'qk' else 'W_' + matrix.upper()}",
            "units": info["units"], "definition": info["definition"],
            "sigma_power": int(info["sigma_power"]), "scaling": info["scaling"],
            "matrix": matrix, "sigma_of": sigma, "statistic": stat}


def _order(name: str):
    """Canonical variable order: W_QK spectral statistics, then element statistics of W_Q, W_K,
    W_QK (each in ELEMENT_STATS order, rms last)."""
    from ..stats import ELEMENT_STATS, SPECTRAL_STATS

    matrix, stat = name.split(".", 1)
    if matrix == "qk" and stat in SPECTRAL_STATS:
        return (0, SPECTRAL_STATS.index(stat), "")
    known = (*ELEMENT_STATS, "rms")
    return (1 + ("q", "k", "qk").index(matrix), known.index(stat) if stat in known else len(known),
            stat)


def lambda_variable(results: dict, draws: int, dtype, ds_vals, dh_vals):
    """The ``lambda`` :class:`xarray.Variable` ``(d, d_h, draw, eig)`` from
    ``results[(d, d_h)]["qk.lambda"]`` ``(draws, n)`` arrays (NaN elsewhere), or None when no
    cell has a spectrum."""
    import xarray as xr

    from .table_contents import EIG_DIM, LAMBDA_ATTRS, LAMBDA_KEY

    got = {c: np.asarray(r[LAMBDA_KEY]) for c, r in results.items() if LAMBDA_KEY in r}
    if not got:
        return None
    n_eig = max(v.shape[-1] for v in got.values())
    arr = np.full((len(ds_vals), len(dh_vals), draws, n_eig), np.nan, dtype=dtype)
    for (d, d_h), v in got.items():
        arr[ds_vals.index(d), dh_vals.index(d_h), :, : v.shape[-1]] = v
    return xr.Variable(("d", "d_h", "draw", EIG_DIM), arr, dict(LAMBDA_ATTRS))


def assemble(spec: TableSpec, cells: Sequence[tuple[int, int]], results: dict) -> xr.Dataset:
    """Build the Dataset from ``results[(d, d_h)] = {"qk.npr": (draws,) array, ...}``."""
    import xarray as xr

    from ..stats import table_name

    ds_vals = sorted({c[0] for c in cells})
    dh_vals = sorted({c[1] for c in cells})
    names = sorted({k for r in results.values() for k in r
                    if k not in ("qk.spectrum", "qk.lambda")}, key=_order)
    data = {}
    for name in names:
        arr = np.full((len(ds_vals), len(dh_vals), spec.draws), np.nan, dtype=spec.dtype)
        for (d, d_h), r in results.items():
            arr[ds_vals.index(d), dh_vals.index(d_h)] = r[name]
        data[table_name(name)] = xr.Variable(("d", "d_h", "draw"), arr, _variable_attrs(name))
    lam = lambda_variable(results, spec.draws, spec.dtype, ds_vals, dh_vals)
    if lam is not None:
        data["lambda"] = lam
    coords = {"d": ("d", np.array(ds_vals, dtype=np.int64), {"long_name": "model width d"}),
              "d_h": ("d_h", np.array(dh_vals, dtype=np.int64), {"long_name": "head dimension d_h"}),
              "draw": ("draw", np.arange(spec.draws, dtype=np.int64),
                       {"long_name": "Monte Carlo draw index"})}
    if lam is not None:
        coords["eig"] = ("eig", np.arange(lam.shape[-1], dtype=np.int64),
                         {"long_name": "eigenvalue rank (0 = largest)"})
    ds = xr.Dataset(data, coords=coords)
    ds.attrs = _global_attrs(spec, cells)
    return ds


def _global_attrs(spec: TableSpec, cells) -> dict:
    import jax

    from .null import sampler

    refs = {f"{d}x{d_h}": reference_values(d, d_h, spec.sigma_q, spec.sigma_k)
            for d, d_h in cells} if spec.ensemble == "lowrank" else {}
    attrs = {
        "title": "rmtbase Monte Carlo null baseline table",
        "Conventions": "CF-1.10",
        "rmtbase_table_format": TABLE_FORMAT,
        "rmtbase_version": __version__,
        "ensemble": spec.ensemble, "stats": spec.stats, "seed": spec.seed, "draws": spec.draws,
        "sigma_q": spec.sigma_q, "sigma_k": spec.sigma_k, "dtype": spec.dtype,
        "storage_dtype": spec.storage.name,
        "backend": jax.default_backend(), "jax_version": jax.__version__,
        "jax_enable_x64": int(spec.x64), "prng_impl": str(jax.config.jax_default_prng_impl),
        "draw_block": DRAW_BLOCK,
        "sampler": "; ".join(f"{d}x{d_h}: " + sampler(d, d_h, spec.stats, spec.ensemble,
                                                      spec.dtype, storage=spec.storage)
                             for d, d_h in cells),
        "cells": ",".join(f"{d}x{d_h}" for d, d_h in cells),
        "key_derivation": ("cell=fold_in(fold_in(jax.random.key(seed), d), d_h)"
                           + (", then fold_in(cell, depth)" if spec.depth is not None else "")
                           + f"; draw i = null_draws(fold_in(cell, i // {DRAW_BLOCK}), d, d_h, "
                           f"n_block)[i % {DRAW_BLOCK}], which uses fold_in(block_key, "
                           f"i % {DRAW_BLOCK})"),
        "conventions": ("W_Q, W_K shape (d_h, d), iid N(0, sigma_q^2), N(0, sigma_k^2); "
                        "W_QK = W_Q^T W_K (d, d); lambda = squared singular values of W_QK, "
                        "d_h nonzero, descending; element std ddof=0"),
        "scaling_factor": "none",
        "analytic_reference_values": json.dumps(refs, sort_keys=True),
        "creation_time": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    if spec.depth is not None:
        attrs["depth"] = spec.depth
    return attrs


def _progress(total: int, enabled, desc: str, unit: str = "draw"):
    """A :func:`rmtbase.progress.progress_bar`, or ``enabled`` itself when it is a reporter
    (an object with ``update``) the caller made."""
    if hasattr(enabled, "update"):
        return enabled
    from ..progress import progress_bar

    return progress_bar(total, desc=desc, unit=unit, enabled=enabled)


def run_cells(spec: TableSpec, cells: Iterable[tuple[int, int]], progress: bool = True,
              store=None) -> dict:
    """Generate every draw of every cell in this process: ``{(d, d_h): draws dict}``."""
    cells = list(cells)
    with _progress(len(cells) * spec.draws, progress, "rmtbase baseline") as bar:
        return {(d, d_h): generate_blocks(spec, d, d_h, bar=bar, store=store)
                for d, d_h in cells}


def cell_table(spec: TableSpec, cell: tuple[int, int], progress=True) -> xr.Dataset:
    """The table of ``spec`` at one validated cell (d, d_h), drawn in this process after
    :func:`check_cells`: what :func:`baseline` returns for it without ``out`` (the request
    record :func:`rmtbase.baseline.cache.null_table` forwards)."""
    check_cells(spec, [cell])
    return assemble(spec, [cell], run_cells(spec, [cell], progress))


def baseline(d, d_h, *, sigma=None, sigma_q=None, sigma_k=None, ensemble="lowrank", draws=2000,
             seed=0, stats="all", depth=None, dtype="float32", chunk_size=None, out=None,
             progress=True, storage="float32", resume=True):
    """Monte Carlo null table of head statistics for W_Q, W_K (d_h, d) at (σ_Q, σ_K).

    ``d``, ``d_h``: ints, or sequences for a grid (cells with d_h > d are left NaN).
    ``stats``: ``"all"``, ``"spectral"`` (W_QK spectrum + ``q_rms``, ``k_rms``) or
    ``"elementwise"``. ``storage``: the checkpoint precision the null models (``"float32"``,
    ``"float16"``, ``"bfloat16"``, ``"q4_0"``, ``"q4_1"``, ``"q8_0"``; see
    :func:`rmtbase.baseline.null.null_draws`), recorded as ``attrs["storage_dtype"]``; draws of
    every storage use the same keys, so a bfloat16 table holds the rounded versions of the
    float32 table's factors. Draws are sampled at σ = 1 (the storage rounding too) and moved
    to (σ_Q, σ_K) by each statistic's exact rule in float64 (:mod:`rmtbase.baseline.sigma_range`):
    a σ whose statistics leave the dtype's range is refused with :class:`InputError`, never
    stored as zeros or infinities. Returns an :class:`xarray.Dataset` with dims
    ``(d, d_h, draw)``. ``out``: also write it to netCDF4, atomically; the target is checked
    first (:func:`rmtbase.baseline.table_file.check_output_file`: an existing file there is
    replaced only if it is an earlier rmtbase table), and with ``resume`` completed blocks are
    kept beside it so that the same call continues after an interrupt
    (:mod:`rmtbase.baseline.partial`). Memory, array size and σ range are checked before any
    draw. ``progress``: :func:`rmtbase.progress.progress_bar` (a bar on a terminal, a line
    every ~30 s otherwise), or a reporter of the caller's (an object with ``update(n)``). Same arguments, same numbers, bit for bit on the same backend
    (``chunk_size`` included; see the module docstring for the key derivation).
    """
    spec = make_spec(sigma=sigma, sigma_q=sigma_q, sigma_k=sigma_k, ensemble=ensemble,
                     draws=draws, seed=seed, stats=stats, depth=depth, dtype=dtype,
                     chunk_size=chunk_size, storage=storage)
    cells = grid_cells(d, d_h)
    check_cells(spec, cells)
    store = None
    if out is not None:
        out = check_output_file(out, size=2 * table_size(spec, cells))
        if resume:
            from .partial import PartialStore

            store = PartialStore(out, spec)
    ds = assemble(spec, cells, run_cells(spec, cells, progress, store))
    if out is not None:
        write_table(ds, out)
        if store is not None:
            store.finish()
    return ds
