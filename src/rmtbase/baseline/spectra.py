"""The spectrum a head table stores, and spectral statistics derived from it at read time.

``lambda`` ``(d, d_h, draw, eig)``: each draw's nonzero squared singular values of
W_QK = W_Qᵀ W_K, descending (d_h; d for ``ginibre``), at the table's dtype and σ (NaN-padded;
``sigma_power`` = 2 of ``sigma_q*sigma_k``). :func:`spectral_from_table` computes any missing
statistic named (default the shipped ones) from it with the heads' function."""

from __future__ import annotations

import numpy as np

from .table_contents import EIG_DIM, LAMBDA_ATTRS, LAMBDA_KEY, LAMBDA_VAR  # noqa: F401


def cell_spectrum(lam) -> np.ndarray:
    """The ``(draws, n)`` spectrum of one cell from its NaN-padded ``(draws, eig)`` values:
    the eigenvalue columns that are not all NaN."""
    lam = np.asarray(lam)
    keep = ~np.all(np.isnan(lam), axis=tuple(range(lam.ndim - 1)))
    return lam[..., keep]


def derive_stats(lam, names, statistics=None) -> dict:
    """``{name: array}`` of spectral statistics ``names`` (bare, e.g. ``"npr"``) from one cell's
    spectrum ``lam`` ``(..., n)``, in ``lam``'s dtype. ``statistics``: the records (default
    those of ``names``)."""
    import jax

    from ..stats.spectral import spectral_stats
    from ..stats.statistic import statistic

    if statistics is None:
        statistics = tuple(statistic(n) for n in names)
    lam = cell_spectrum(lam)
    with jax.enable_x64(lam.dtype == np.float64):  # a float64 table is derived in float64
        st = spectral_stats(lam, statistics)
    return {n: np.asarray(st[n]).astype(lam.dtype, copy=False) for n in names}


def missing_spectral(ds, names, statistics=None) -> list[str]:
    """Bare spectral statistics among ``names`` (bare or ``"qk."`` keys; others ignored) that
    ``ds`` lacks as variables."""
    from ..stats.statistic import records, spectral

    SPECTRAL_STATS = [st.name for st in spectral(records() if statistics is None else statistics)]
    bare = [n.split(".", 1)[1] if n.startswith("qk.") else n for n in names]
    return [n for n in dict.fromkeys(bare) if n in SPECTRAL_STATS and n not in ds.data_vars]


def spectral_from_table(ds, names=None, statistics=None):
    """``ds`` with every spectral statistic of ``names`` (default all) that it lacks computed from
    its ``lambda``, per cell, with a generated table's attrs; present ones untouched.
    :class:`~rmtbase.errors.TableError` if one is missing and there is no ``lambda``.
    ``statistics``: the records (default those of ``names``; ``names`` default the shipped)."""
    import xarray as xr

    from ..errors import TableError
    from ..stats.spectral import SHIPPED_SPECTRAL

    names = SHIPPED_SPECTRAL if names is None else names
    missing = missing_spectral(ds, names, statistics)
    if not missing:
        return ds
    if LAMBDA_VAR not in ds.data_vars:
        raise TableError(f"the table lacks {missing[0]!r} and stores no spectrum ({LAMBDA_VAR!r}) "
                         "to derive it from: regenerate it with this rmtbase")
    from .table_dataset import variable_attrs

    lam = ds[LAMBDA_VAR]
    cell_dims = [dim for dim in lam.dims if dim not in ("draw", EIG_DIM)]
    shape = tuple(lam.sizes[dim] for dim in (*cell_dims, "draw"))
    out = {n: np.full(shape, np.nan, dtype=lam.dtype) for n in missing}
    values = lam.transpose(*cell_dims, "draw", EIG_DIM).values
    for idx in np.ndindex(*shape[:-1]):
        cell = values[idx]
        if np.all(np.isnan(cell)):
            continue
        for n, v in derive_stats(cell, missing, statistics).items():
            out[n][idx] = v
    new = ds.copy()
    for n in missing:
        new[n] = xr.Variable((*cell_dims, "draw"), out[n], variable_attrs(f"qk.{n}", statistics))
    return new
