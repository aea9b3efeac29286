"""σ = 1 null tables on demand: shipped package data, then the user cache, else generated.

Lookup order of :func:`null_table` for a cell (d, d_h):

1. tables shipped in ``rmtbase/data`` (listed in ``data/index.json``, found through
   :mod:`importlib.resources`);
2. the user cache directory: ``$RMTBASE_CACHE`` if set, else the platform cache directory
   (``$XDG_CACHE_HOME/rmtbase`` or ``~/.cache/rmtbase`` on Linux, ``~/Library/Caches/rmtbase`` on
   macOS, ``%LOCALAPPDATA%\\rmtbase\\Cache`` on Windows);
3. :func:`rmtbase.baseline.tables.baseline`, written to the user cache atomically.

A table matches when ensemble, seed, dtype and table format agree, it covers the
requested statistics (an ``"all"`` table serves ``"spectral"`` and ``"elementwise"``) and it has
at least ``min_draws`` draws. Cache file names spell out every one of these keys, so two
different requests can never share a file. Because draw ``i`` of a cell depends only on
(seed, d, d_h, i), the first ``n`` draws of any matching table are the ``n``-draw table.

:func:`rescale` turns a table at (σ_Q, σ_K) into one at any other (σ_Q', σ_K') exactly, through
each variable's ``sigma_power``/``scaling`` attrs (see :data:`rmtbase.stats.STAT_INFO`): with
r the ratio of the variable's σ (σ_Qσ_K for W_QK statistics, σ_Q or σ_K for W_Q or W_K),
``value * r**p`` for ``scaling="power"`` and ``value + p ln r`` for ``scaling="log"``.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from importlib import resources
from pathlib import Path

import numpy as np

from ..errors import InputError, TableError, check_dims, check_sigma

#: Statistic sets that a table generated with ``stats=key`` can serve.
_SERVES = {"all": {"all", "spectral", "elementwise"}, "spectral": {"spectral"},
           "elementwise": {"elementwise"}}


def cache_dir() -> Path:
    """The user cache directory (not created here)."""
    env = os.environ.get("RMTBASE_CACHE")
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "rmtbase"
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "rmtbase" / "Cache"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rmtbase"


def table_filename(d: int, d_h: int, *, ensemble: str, stats: str, draws: int, seed: int,
                   dtype: str, depth: int | None = None) -> str:
    """File name that encodes every key a table's numbers depend on."""
    from .tables import TABLE_FORMAT

    dep = f"-L{depth}" if depth is not None else ""
    return (f"{ensemble}{dep}-d{d}-dh{d_h}-{stats}-n{draws}-seed{seed}-{dtype}"
            f"-v{TABLE_FORMAT}.nc")


def shipped_index() -> list[dict]:
    """Entries of ``rmtbase/data/index.json``: ``file, d, d_h, ensemble, stats, draws, seed,
    dtype, format`` (empty when no tables are shipped)."""
    index = resources.files("rmtbase").joinpath("data", "index.json")
    if not index.is_file():
        return []
    return json.loads(index.read_text(encoding="utf-8"))["tables"]


def _matches(entry: dict, d, d_h, stats, min_draws, seed, ensemble, dtype) -> bool:
    from .tables import TABLE_FORMAT

    return (entry["d"] == d and entry["d_h"] == d_h and entry["ensemble"] == ensemble
            and entry["seed"] == seed and entry["dtype"] == dtype and entry["format"] == TABLE_FORMAT and stats in _SERVES[entry["stats"]]
            and entry["draws"] >= min_draws)


def _cached_entries(directory: Path) -> list[dict]:
    """Parse the cache directory's file names back into index entries."""
    from .tables import TABLE_FORMAT

    out = []
    for p in directory.glob(f"lowrank-d*-dh*-*-n*-seed*-float*-v{TABLE_FORMAT}.nc"):
        parts = p.name[: -len(".nc")].split("-")
        try:
            out.append({"file": p, "ensemble": parts[0], "d": int(parts[1][1:]),
                        "d_h": int(parts[2][2:]), "stats": parts[3], "draws": int(parts[4][1:]),
                        "seed": int(parts[5][4:]), "dtype": parts[6],
                        "format": int(parts[7][1:])})
        except (IndexError, ValueError):
            continue
    return [e for e in out if e["stats"] in _SERVES]


def _select(ds, stats: str):
    """Keep the variables of ``stats`` (spectral: bare names plus ``q_rms``/``k_rms``)."""
    if stats == "all":
        return ds
    spectral = [v for v in ds.data_vars if ds[v].attrs.get("matrix") == "qk"
                and not str(v).startswith("qk_")]
    rms = [v for v in ("q_rms", "k_rms") if v in ds.data_vars]
    keep = spectral + rms if stats == "spectral" else [v for v in ds.data_vars if v not in spectral]
    return ds[keep]


def null_table(d: int, d_h: int, *, stats: str = "all", min_draws: int = 1000, seed: int = 0,
               ensemble: str = "lowrank", dtype: str = "float32", progress: bool = False):
    """σ = 1 null table of cell (d, d_h) with at least ``min_draws`` draws (all draws of the
    table found are returned; the largest such table is preferred). Only the ``lowrank``
    ensemble is cached."""
    from .tables import baseline, read_table

    d, d_h = check_dims(d, d_h)
    if ensemble != "lowrank":
        raise InputError(f"null_table serves the lowrank ensemble only, got {ensemble!r}")
    if stats not in _SERVES:
        raise InputError(f"stats must be one of all, spectral, elementwise, got {stats!r}")
    key = dict(d=d, d_h=d_h, stats=stats, min_draws=int(min_draws), seed=seed,
               ensemble=ensemble, dtype=np.dtype(dtype).name)
    shipped = [e for e in shipped_index() if _matches(e, **key)]
    if shipped:
        best = max(shipped, key=lambda e: e["draws"])
        ref = resources.files("rmtbase").joinpath("data", best["file"])
        with resources.as_file(ref) as path:
            return _select(read_table(path), stats)
    directory = cache_dir()
    cached = [e for e in _cached_entries(directory) if _matches(e, **key)] \
        if directory.is_dir() else []
    for entry in sorted(cached, key=lambda e: -e["draws"]):
        try:
            return _select(read_table(entry["file"]), stats)
        except TableError:
            continue  # a damaged cache file is regenerated below
    ds = baseline(d, d_h, draws=int(min_draws), seed=seed, stats=stats, ensemble=ensemble,
                  dtype=key["dtype"], progress=progress)
    name = table_filename(d, d_h, ensemble=ensemble, stats=stats, draws=int(min_draws),
                          seed=seed, dtype=key["dtype"])
    try:
        directory.mkdir(parents=True, exist_ok=True)
        from .tables import write_table

        write_table(ds, directory / name)
    except (OSError, TableError) as exc:
        warnings.warn(f"rmtbase: could not cache the table in {directory}: {exc}",
                      RuntimeWarning, stacklevel=2)
    return ds


def rescale(ds, sigma_q: float, sigma_k: float):
    """The table ``ds`` at entry std (σ_Q, σ_K), by exact rescaling of every variable."""
    from .tables import reference_values

    sigma_q, sigma_k = check_sigma(sigma_q, "sigma_q"), check_sigma(sigma_k, "sigma_k")
    try:
        old_q, old_k = float(ds.attrs["sigma_q"]), float(ds.attrs["sigma_k"])
    except KeyError as exc:
        raise TableError("table has no sigma_q/sigma_k attributes; not an rmtbase table") from exc
    ratio = {"sigma_q": sigma_q / old_q, "sigma_k": sigma_k / old_k,
             "sigma_q*sigma_k": (sigma_q / old_q) * (sigma_k / old_k)}
    out = ds.copy()
    for name, var in ds.data_vars.items():
        r = ratio[var.attrs["sigma_of"]]
        p = int(var.attrs["sigma_power"])
        if var.attrs["scaling"] == "power":
            new = var.values * (r**p)
        elif var.attrs["scaling"] == "log":
            new = var.values + p * np.log(r)
        else:
            raise TableError(f"variable {name} has unknown scaling {var.attrs['scaling']!r}")
        out[name] = var.copy(data=new.astype(var.dtype, copy=False))
    out.attrs = dict(ds.attrs, sigma_q=sigma_q, sigma_k=sigma_k)
    if ds.attrs.get("ensemble") == "lowrank":
        cells = [c.split("x") for c in str(ds.attrs.get("cells", "")).split(",") if c]
        refs = {f"{a}x{b}": reference_values(int(a), int(b), sigma_q, sigma_k) for a, b in cells}
        out.attrs["analytic_reference_values"] = json.dumps(refs, sort_keys=True)
    out.attrs["history"] = (ds.attrs.get("history", "") + f"rescaled from sigma_q={old_q}, "
                            f"sigma_k={old_k} to sigma_q={sigma_q}, sigma_k={sigma_k}; ").strip()
    return out
