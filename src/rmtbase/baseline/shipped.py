"""The null tables shipped in ``rmtbase/data``: their index, the spectrum bands, their check.

:func:`shipped_index`, :func:`shipped_band`; :func:`check_shipped_tables` refuses, before any
weight is read, a run that a shipped table cannot serve."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np

from ..errors import TableError
from ..stats.storage import storage_record
from .table_check import missing_variables
from .table_contents import SERVES


def shipped_index() -> list[dict]:
    """Entries of ``rmtbase/data/index.json`` (``file, d, d_h, ensemble, stats, draws, seed, dtype,
    storage, format``; ``storage`` defaults to float32); empty when none are shipped."""
    index = resources.files("rmtbase").joinpath("data", "index.json")
    if not index.is_file():
        return []
    entries = json.loads(index.read_text(encoding="utf-8"))["tables"]
    return [dict(e, storage=e.get("storage", "float32")) for e in entries]


def shipped_band(d: int, d_h: int, n_draws: int, seed: int, quantiles) -> np.ndarray | None:
    """The shipped null spectrum band (len(quantiles), d_h) of
    :func:`rmtbase.scoring.score.null_spectrum_band` for (d, d_h, n_draws, seed), or None."""
    ref = resources.files("rmtbase").joinpath("data", "spectrum_bands.json")
    if not ref.is_file():
        return None
    for e in json.loads(ref.read_text(encoding="utf-8"))["bands"]:
        if (e["d"], e["d_h"], e["draws"], e["seed"]) == (d, d_h, n_draws, seed) \
                and tuple(e["quantiles"]) == tuple(quantiles):
            band = np.asarray(e["band"], dtype=np.float64)
            if band.shape == (len(quantiles), d_h):
                return band
    return None


def check_shipped_tables(d: int, d_h: int, wanted: str = "all") -> None:
    """TableError (one line naming the rebuild command), before any weight is read, if a shipped
    table of cell (d, d_h) lacks a variable that a run of ``wanted`` statistics reads (a list of
    statistics counts as all). Reads the tables' headers only."""
    import netCDF4

    from .tables import TABLE_FORMAT

    wanted = wanted if wanted in SERVES else "all"
    for e in shipped_index():
        if (e["d"], e["d_h"]) != (d, d_h) or e["format"] != TABLE_FORMAT:
            continue
        ref = resources.files("rmtbase").joinpath("data", e["file"])
        with resources.as_file(ref) as path, netCDF4.Dataset(str(path)) as ds:
            missing = missing_variables(set(ds.variables), e["stats"], wanted)
        if missing:
            storage = e.get("storage", "float32")
            cmd = (f"python sims/make_shipped_tables.py --stats {e['stats']} --draws "
                   f"{e['draws']} --cells {d}x{d_h}"
                   + ("" if storage_record(storage).is_identity else f" --storage {storage}")
                   + (" --extension" if e.get("extension") else ""))
            raise TableError(f"the shipped null table {e['file']} lacks "
                             f"{', '.join(missing[:3])}{'…' if len(missing) > 3 else ''} "
                             f"(statistics added since it was made); rebuild it: {cmd}")
