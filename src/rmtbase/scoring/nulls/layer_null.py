"""The null of each layer: the storage it is drawn at and, under the Gaussian null, its tables.

:func:`layer_quantisation` names what a layer was stored in, :func:`layer_null` the storage its
heads are measured and its null drawn at, :func:`null_arrays` a table's draws,
:func:`baseline_attrs` the tables' provenance (rules: :mod:`rmtbase.scoring.score`)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ...errors import TableError
from ...stats.storage import one_quantisation
from ..description import layer_range


def is_spectral(name: str) -> bool:
    from ...stats import SPECTRAL_STATS

    return name.startswith("qk.") and name.split(".", 1)[1] in SPECTRAL_STATS


def null_arrays(table: xr.Dataset, names, d: int, d_h: int) -> dict:
    """{stat: 1-d numpy draws} from a σ = 1 baseline table (cell (d, d_h) if gridded); a
    spectral statistic the table lacks is computed from its stored spectrum
    (:func:`rmtbase.baseline.spectra.spectral_from_table`)."""
    from ...baseline.spectra import spectral_from_table
    from ...stats import table_name

    sel = {k: v for k, v in (("d", d), ("d_h", d_h)) if k in table.dims}
    cell = spectral_from_table(table.sel(sel) if sel else table, names)
    out = {}
    for name in (*names, "q.rms", "k.rms"):
        var = table_name(name)
        if var not in cell.data_vars:
            raise TableError(f"baseline table for d={d}, d_h={d_h} lacks {var!r} (for {name})")
        out[name] = np.asarray(cell[var].values, dtype=np.float64).ravel()
    return out


def layer_quantisation(lh, wq, wk, storage, group):
    """The block quantisation layer ``lh`` was dequantised from, as a record
    (:class:`~rmtbase.stats.storage.Storage`, or :class:`~rmtbase.stats.storage.MixedStorage` where
    W_Q and W_K differ): as its GGUF file says, else as detected on W_Q and W_K
    (:func:`rmtbase.stats.detection.detect_record`), else None."""
    from ...stats.detection import detect_record
    from ...stats.storage import MixedStorage, quantisation_record

    said = getattr(lh, "quantisation", None)
    if said:
        return quantisation_record(said)
    dq = detect_record(wq, storage=storage)
    if dq is None:
        return None
    dk = detect_record(wk[::group], storage=storage)
    return dq if dk in (None, dq) else MixedStorage((dq, dk))


def layer_null(storage, detected, quantized_null):
    """(measured storage, null storage, whether histogram statistics lack a matched null) for one
    layer of float ``storage`` and ``detected`` format under ``quantized_null`` (records)."""
    forced = None if quantized_null in ("auto", "none") else quantized_null
    est, null_storage, unmatched = storage, storage, False
    # W_Q and W_K in different block types (a MixedStorage, "q4_k+q8_0": Mixtral-style Q4_K_M
    # files): the null puts both factors through one round trip and cannot match them, so
    # under "auto" the layer gets its float null with histogram statistics left out (what
    # "none" does), and the ``null`` attr names the layer and both types
    one = one_quantisation(detected)
    if one and quantized_null != "none":
        est = detected if forced is None else forced
    if detected is not None:
        if quantized_null == "none" or (quantized_null == "auto" and not one):
            unmatched = True
        else:
            null_storage = detected if forced is None else forced
    elif forced is not None:
        null_storage = forced
    return est, null_storage, unmatched


#: Table attributes that say when and by which rmtbase release a file was made, not what its
#: draws are: left out of an output, whose attributes then never depend on the cache's history
#: (a cold run and a warm one give the same file).
MAKING_ATTRS = frozenset({"creation_time", "created", "history", "rmtbase_version"})


def baseline_attrs(nulls, layer_ids) -> dict:
    """``baseline_<attr>`` from the tables' attrs but :data:`MAKING_ATTRS`: a shared value as is;
    differing numbers by their minimum, text as "value (layers ...)"; Python scalars either way."""
    out = {}
    keys = [k for k in dict.fromkeys(k for g in nulls for k in g.table.attrs)
            if k not in MAKING_ATTRS]
    for k in keys:
        vals = [g.table.attrs.get(k) for g in nulls]
        if not all(isinstance(v, str | int | float | np.integer | np.floating) for v in vals):
            continue
        vals = [v.item() if isinstance(v, np.generic) else v for v in vals]
        if all(_same_attr(v, vals[0]) for v in vals):
            out[f"baseline_{k}"] = vals[0]
        elif all(isinstance(v, int | float | np.integer | np.floating) for v in vals):
            out[f"baseline_{k}"] = min(vals)
        else:
            out[f"baseline_{k}"] = "; ".join(
                f"{v} ({layer_range([layer_ids[i] for i in g.rows])})"
                for v, g in zip(vals, nulls, strict=True))
    return out


def _same_attr(a, b) -> bool:
    return type(a) is type(b) and a == b


def has_lambda_max(ref) -> bool:
    refs = [r for _, r in ref] if isinstance(ref, list) else [ref]
    return all("qk.lambda_max" in r for r in refs)


__all__ = ["baseline_attrs", "has_lambda_max", "is_spectral", "layer_null", "layer_quantisation",
           "null_arrays"]
