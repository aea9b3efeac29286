"""``rmtbase heavy-tail --json``: one document (schema ``rmtbase.heavy-tail/1``) of the table.

Keys after the command's common head (``command``, ``rmtbase_version``, ``out``, ``files``):
``model``,
``draws``, ``fdr``, ``folklore_band``, ``entries`` (one per model or checkpoint: ``label``,
``step``, ``kinds`` (:func:`.heavy_tail_text.kind_rows`), ``summaries`` (the model's means with
their null: ``value``, ``p``, ``null_lo``, ``null_median``, ``null_hi``, ``matrices``),
``matrices`` [per matrix: ``layer``, ``component``, ``rows``, ``cols``, ``storage``,
``null_storage``, ``alpha``, ``alpha_p``, ``alpha_q``, ``alpha_null_median``,
``alpha_null_lo``, ``alpha_null_hi``, ``flag``, ``folklore``, ``alpha_weighted``,
``rand_distance``, ``reason``]). Undefined numbers are ``null``."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..files.strict_json import number as _num


def _entry(ds: xr.Dataset, label: str, step) -> dict:
    from .heavy_tail_text import kind_rows
    from .heavy_tail_write import frame

    rows = []
    for r in frame(ds).to_dict("records"):
        rows.append({
            "layer": int(r["layer"]), "component": r["component"], "rows": int(r["rows"]),
            "cols": int(r["cols"]), "storage": r["storage"], "null_storage": r["null_storage"],
            "alpha": _num(r["alpha"]), "alpha_p": _num(r["alpha_p"]),
            "alpha_q": _num(r.get("alpha_q")), "alpha_null_median": _num(r["alpha_null_median"]),
            "alpha_null_lo": _num(r["alpha_null_lo"]), "alpha_null_hi": _num(r["alpha_null_hi"]),
            "flag": bool(r.get("alpha_flag", False)), "folklore": r["folklore"] or None,
            "alpha_weighted": _num(r["alpha_weighted"]),
            "rand_distance": _num(r["rand_distance"]), "reason": r.get("reason") or None})
    kinds = [{k: (list(map(_num, v)) if isinstance(v, tuple) else
                  (_num(v) if isinstance(v, float) else v)) for k, v in row.items()}
             for row in kind_rows(ds)]
    sums = {str(s): {f: _num(ds[f"summary_{f}"].sel(summary=s).item())
                     for f in ("value", "p", "null_lo", "null_median", "null_hi", "matrices")}
            for s in ds["summary"].values}
    return {"label": label, "step": _num(step), "kinds": kinds, "summaries": sums,
            "matrices": rows}


def heavy_tail_document(ds: xr.Dataset, dim: str | None = None) -> dict:
    """The document's keys after the common head (module docstring) of the table ``ds`` (a
    collection along ``dim``)."""
    doc = dict(model=str(ds.attrs.get("model", "")), draws=_num(ds.attrs.get("draws")),
               fdr=_num(ds.attrs.get("fdr")),
               folklore_band=[_num(x) for x in str(ds.attrs.get("folklore_band", "2,6"))
                              .split(",")])
    if dim is None:
        doc["entries"] = [_entry(ds, str(ds.attrs.get("model", "")), None)]
    else:
        steps = ds["step"].values if "step" in ds.coords else [np.nan] * ds.sizes[dim]
        doc["entries"] = [_entry(ds.sel({dim: label}), str(label), step)
                          for label, step in zip(ds[dim].values, steps, strict=True)]
    return doc


__all__ = ["heavy_tail_document"]
