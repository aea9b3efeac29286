"""Whether a null table holds what its name promises, and which variables it must hold.

:func:`verify_table` checks a table against its index entry or file name; :func:`missing_variables`
lists what it lacks for a run (spectral statistics are never missing where ``lambda`` is stored)."""

from __future__ import annotations

import numpy as np

from ..errors import TableError
from .table_contents import LAMBDA_VAR


def verify_table(ds, entry: dict, path) -> None:
    """:class:`TableError` naming ``path`` unless the table matches its index entry or file name:
    cell, draws, seed, statistic set, ensemble, dtype, storage and σ_Q = σ_K = 1, every variable
    of the set present (or derivable from ``lambda``) with at least one finite draw."""
    a = ds.attrs
    found = {
        "d": [int(x) for x in np.atleast_1d(ds["d"].values)] if "d" in ds.coords else None,
        "d_h": [int(x) for x in np.atleast_1d(ds["d_h"].values)] if "d_h" in ds.coords else None,
        "draws": ds.sizes.get("draw"), "seed": _int_or_none(a.get("seed")),
        "stats": a.get("stats"), "ensemble": a.get("ensemble"), "dtype": a.get("dtype"),
        "storage": a.get("storage_dtype", "float32"),
        "sigma": (_float_or_none(a.get("sigma_q")), _float_or_none(a.get("sigma_k"))),
    }
    want = {"d": [entry["d"]], "d_h": [entry["d_h"]], "draws": entry["draws"],
            "seed": entry["seed"], "stats": entry["stats"], "ensemble": entry["ensemble"],
            "dtype": entry["dtype"], "storage": entry.get("storage", "float32"),
            "sigma": (1.0, 1.0)}
    bad = [f"{k}={found[k]!r} (expected {want[k]!r})" for k in want if found[k] != want[k]]
    if not bad:
        missing = missing_variables(ds.data_vars, entry["stats"])
        if missing:
            bad = [f"missing variables {missing[:3]}{'…' if len(missing) > 3 else ''}"]
    if not bad and "draw" in ds.dims:
        empty = [v for v in ds.data_vars if "draw" in ds[v].dims
                 and not np.isfinite(ds[v].values).any()]
        if empty:  # the entry's storage name, looked up once where it is needed
            from ..stats.storage import storage_record

            storage = storage_record(want["storage"])
            empty = [v for v in empty if not _may_be_undefined(v, storage)]
        if empty:
            bad = [f"variables with no finite draw {empty[:3]}"]
    if bad:
        raise TableError(f"{path} does not hold the table its name promises: {bad[0]}")


def _may_be_undefined(var: str, storage) -> bool:
    """Whether ``var`` may hold no finite draw: the Weibull fits of a block-quantised storage (exact
    zeros among the fitted ranks), left out when scoring
    (:func:`rmtbase.scoring.nulls.checks.undefined_under_null`)."""
    return "weibull" in str(var) and not storage.is_float


def missing_variables(names, stats: str, wanted: str = "all") -> list[str]:
    """The variables a ``stats`` table holding ``names`` lacks, of those a run of ``wanted``
    statistics reads (derivable spectral statistics are not missing)."""
    need = _expected_vars(stats) & _expected_vars(wanted)
    if LAMBDA_VAR in names:
        from ..stats import SPECTRAL_STATS

        need -= set(SPECTRAL_STATS)
    return sorted(need - set(names))


def _expected_vars(stats: str) -> set[str]:
    from ..stats import ELEMENT_STATS, SPECTRAL_STATS

    spectral = set(SPECTRAL_STATS)
    element = {f"{m}_{s}" for m in ("q", "k", "qk") for s in ELEMENT_STATS}
    rms = {"q_rms", "k_rms"}
    return {"all": spectral | element | rms, "spectral": spectral | rms,
            "elementwise": element | rms}[stats]


def _int_or_none(x):
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def _float_or_none(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None
