"""The Dataset of a head table: its variables, coordinates and provenance attrs.

:func:`assemble` builds it from ``{(d, d_h): {"qk.npr": array, ...}}`` in a canonical order, with
CF-style attrs, ``lambda`` and the global attrs (layout: :mod:`rmtbase.baseline.tables`)."""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .._version import __version__
from .references import reference_values
from .table_file import TABLE_FORMAT
from .table_spec import DRAW_BLOCK, TableSpec

if TYPE_CHECKING:
    import xarray as xr


def variable_attrs(name: str, statistics=None) -> dict:
    """CF-style attrs of the table variable of ``head_stats`` key ``name``, from its record."""
    from ..stats.statistic import records, stat_info

    matrix, stat = name.split(".", 1)
    info = stat_info(records() if statistics is None else statistics)[stat]
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
    """The ``lambda`` variable ``(d, d_h, draw, eig)`` from ``results[(d, d_h)]["qk.lambda"]`` (NaN
    elsewhere), or None when no cell has a spectrum."""
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
        data[table_name(name)] = xr.Variable(("d", "d_h", "draw"), arr, variable_attrs(name))
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
