"""Several scores in one Dataset: a leading ``checkpoint`` or ``model`` dimension.

:func:`combine` stacks scores; :func:`entry` gives one back exactly. Labels are revisions or
folder names (repeats get their shortest distinct path ends); integer-ending ``checkpoint``
labels give ``step``. Shapes are padded to the union with NaN, False, −1 or ""
(``head_present``); per-entry attributes become variables (:data:`ENTRY_VARS`) and
``entry_attrs``. :func:`combine_components`: the same for matrix scores."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from ...errors import InputError

#: Names of the leading dimension.
COLLECTION_DIMS = ("checkpoint", "model", "circuit")
#: Per-entry variable name -> attribute of a single score.
ENTRY_VARS = {"model_name": "model", "revision": "revision", "architecture": "architecture",
              "d": "d", "d_h": "d_h", "n_layers": "n_layers", "n_heads": "n_heads",
              "storage_dtype": "storage_dtype", "null_storage": "null_storage",
              "quantisation": "quantisation", "null_description": "null"}
#: Per-entry variable name -> attribute of a whole-matrix score.
COMPONENT_ENTRY_VARS = {"model_name": "model", "revision": "revision",
                        "architecture": "architecture", "n_layers": "n_layers",
                        "storage_dtypes": "storage_dtypes", "quantisation": "quantisation"}
_PAD_DIMS = ("layer", "head", "rank", "stat", "qk_z", "quantile")
_STEP = re.compile(r"(\d+)$")


def collection_dim(ds: xr.Dataset) -> str | None:
    """The leading collection dimension of ``ds``, or None for a single score."""
    for dim in COLLECTION_DIMS:
        if dim in ds.dims:
            return dim
    return None


def step_of(label: str) -> int | None:
    """The training step a checkpoint label ends in (``step1000`` -> 1000), or None."""
    m = _STEP.search(str(label).rstrip("/"))
    return int(m.group(1)) if m else None


def distinct_suffixes(paths) -> list[str]:
    """The shortest trailing part of each path (at least its last name) no other path ends in
    (``runs/a/x``, ``runs/b/x`` -> ``a/x``, ``b/x``); never the root."""
    parts = [Path(os.path.abspath(os.fspath(p))).parts[1:] for p in paths]
    out = []
    for i, mine in enumerate(parts):
        others = [q for j, q in enumerate(parts) if j != i]
        if mine in others or not mine:
            out.append(mine[-1] if mine else os.fspath(paths[i]))
            continue
        k = next(k for k in range(1, len(mine) + 1)
                 if k == len(mine) or all(q[-k:] != mine[-k:] for q in others))
        out.append("/".join(mine[-k:]))
    return out


def folder_labels(labels, folders) -> list[str]:
    """Labels of entries read from ``folders``, made unique: a shared label becomes its folder's
    name or shortest distinct path end (:func:`distinct_suffixes`); an entry of a folder holding
    several becomes ``<folder>:<label>``; what still repeats gets ``#i`` (:func:`unique_labels`)."""
    labels = [str(s) for s in labels]
    folders = [os.fspath(f) for f in folders]
    if len(folders) != len(labels):
        raise InputError("folder_labels needs one folder per label")
    repeated = [i for i, s in enumerate(labels) if labels.count(s) > 1]
    where = list(dict.fromkeys(folders[i] for i in repeated))
    name = dict(zip(where, distinct_suffixes(where), strict=True))
    for i in repeated:
        f = folders[i]
        labels[i] = name[f] if folders.count(f) == 1 else f"{name[f]}:{labels[i]}"
    return unique_labels(labels)


def unique_labels(labels) -> list[str]:
    """``labels`` with repeats made unique by a ``#i`` suffix (i = position)."""
    labels = [str(s) for s in labels]
    seen = {s: labels.count(s) for s in labels}
    return [f"{s}#{i}" if seen[s] > 1 else s for i, s in enumerate(labels)]


def _fill(da: xr.DataArray):
    k = da.dtype.kind
    if k == "f":
        return np.nan
    if k == "b":
        return False
    if k in "iu":
        return -1
    return ""


def _json(attrs: dict) -> str:
    def plain(v):
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, np.ndarray):
            return v.tolist()
        return v

    return json.dumps({k: plain(v) for k, v in attrs.items() if k != "created"}, sort_keys=True)


def _union(values) -> list:
    out, seen = [], set()
    for arr in values:
        for v in np.asarray(arr).tolist():
            if v not in seen:
                seen.add(v)
                out.append(v)
    return out


def combine(datasets, labels, dim: str = "checkpoint") -> xr.Dataset:
    """Stack single scores along a new leading ``dim`` (module docstring). ``labels`` name the
    entries (made unique). A ``checkpoint`` collection whose labels all end in distinct
    integers gets a ``step`` coordinate and is ordered by it."""
    datasets, labels, steps = _ordered(datasets, labels, dim)
    union = {d: _union(ds[d].values for ds in datasets if d in ds.coords)
             for d in _PAD_DIMS if any(d in ds.coords for ds in datasets)}
    padded = []
    for ds in datasets:
        ds = ds.copy()
        ds["head_present"] = (("layer", "head"), np.ones((ds.sizes["layer"], ds.sizes["head"]),
                                                          dtype=bool))
        for d in ("rank",):
            if d in ds.dims and d not in ds.coords:
                ds.coords[d] = np.arange(ds.sizes[d])
        target = {d: v for d, v in union.items() if d in ds.dims}
        fill = {name: _fill(ds[name]) for name in ds.data_vars}
        padded.append(ds.reindex(target, fill_value=fill))
    for name in {n for ds in padded for n in ds.data_vars}:  # a variable missing in some entry
        proto = next(ds[name] for ds in padded if name in ds)
        for i, ds in enumerate(padded):
            if name not in ds:
                shape = tuple(ds.sizes.get(d, proto.sizes[d]) for d in proto.dims)
                padded[i][name] = (proto.dims, np.full(shape, _fill(proto), dtype=proto.dtype))
    return _stack(padded, datasets, labels, steps, dim, ENTRY_VARS)


def _ordered(datasets, labels, dim):
    """Checked single scores and unique labels, ordered by step where a ``checkpoint``
    collection's labels all end in distinct integers; steps None otherwise."""
    if dim not in COLLECTION_DIMS:
        raise InputError(f"collection dimension must be one of {COLLECTION_DIMS}, got {dim!r}")
    datasets, labels = list(datasets), unique_labels(labels)
    if not datasets or len(datasets) != len(labels):
        raise InputError("combine needs one label per score and at least one score")
    for ds in datasets:
        if collection_dim(ds):
            raise InputError("combine takes single scores; this one is already a collection")
    steps = [step_of(s) for s in labels] if dim == "checkpoint" else [None]
    if None in steps or len(set(steps)) < len(steps):
        return datasets, labels, None
    order = sorted(range(len(labels)), key=lambda i: steps[i])
    return ([datasets[i] for i in order], [labels[i] for i in order],
            [steps[i] for i in order])


def _stack(padded, datasets, labels, steps, dim, entry_vars) -> xr.Dataset:
    """Concatenate the padded entries along ``dim``; per-entry variables, ``entry_attrs``,
    ``step`` and the global attributes (module docstring)."""
    out = xr.concat([ds.drop_attrs(deep=False) for ds in padded],
                    dim=pd.Index(labels, name=dim), data_vars="all", coords="minimal",
                    compat="override", join="outer", combine_attrs="override")
    out.attrs = {}
    for var, key in entry_vars.items():
        vals = [ds.attrs.get(key, "") for ds in datasets]
        kind = int if all(isinstance(v, int | np.integer) for v in vals) else str
        out[var] = ((dim,), np.array([kind(v) for v in vals]))
    out["entry_attrs"] = ((dim,), np.array([_json(ds.attrs) for ds in datasets]))
    if steps is not None:
        out.coords["step"] = ((dim,), np.array(steps, dtype=np.int64))
    common = dict(datasets[0].attrs)
    for ds in datasets[1:]:
        common = {k: v for k, v in common.items() if k in ds.attrs and _same(v, ds.attrs[k])}
    common.pop("created", None)
    out.attrs.update(common)
    out.attrs.update(collection=dim, n_entries=len(datasets),
                     created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    return out


def combine_components(datasets, labels, dim: str = "checkpoint") -> xr.Dataset:
    """Stack whole-matrix scores along a new leading ``dim``, as :func:`combine` stacks head scores;
    padding NaN, 0, "" or False (``storage == ""``: no such matrix)."""
    datasets, labels, steps = _ordered(datasets, labels, dim)
    for ds in datasets:
        if "component" not in ds.dims or "storage" not in ds:
            raise InputError("combine_components takes whole-matrix scores (score_components)")
    union = {d: _union(ds[d].values for ds in datasets) for d in ("layer", "component", "stat")}
    padded = [ds.reindex(union, fill_value={n: 0 if ds[n].dtype.kind in "iu" else _fill(ds[n])
                                            for n in ds.data_vars}) for ds in datasets]
    return _stack(padded, datasets, labels, steps, dim, COMPONENT_ENTRY_VARS)


def _same(a, b) -> bool:
    try:
        return bool(np.all(np.asarray(a) == np.asarray(b))) and type(a) is type(b)
    except (TypeError, ValueError):
        return False


def labels_of(ds: xr.Dataset) -> list[str]:
    """The entries' labels (the leading coordinate), or the model name of a single score."""
    dim = collection_dim(ds)
    if dim is None:
        return [str(ds.attrs.get("model", "model"))]
    return [str(v) for v in ds[dim].values]


def entry(ds: xr.Dataset, which) -> xr.Dataset:
    """One entry of a collection as a single score (its attributes restored, padding dropped).
    ``which``: position (int) or label (str). A single score is returned as it is."""
    dim = collection_dim(ds)
    if dim is None:
        return ds
    labels = labels_of(ds)
    if isinstance(which, str):
        if which not in labels:
            raise InputError(f"no entry {which!r} in this collection ({', '.join(labels[:5])}…)")
        which = labels.index(which)
    e = ds.isel({dim: int(which)})
    attrs = json.loads(str(e["entry_attrs"].values))
    if "created" in ds.attrs:
        attrs["created"] = ds.attrs["created"]
    if "head_present" not in e:  # a whole-matrix score
        e = e.drop_vars([dim, "step", "entry_attrs", *COMPONENT_ENTRY_VARS], errors="ignore")
        present = e["storage"].values != ""
        e = e.isel(layer=np.nonzero(present.any(axis=1))[0],
                   component=np.nonzero(present.any(axis=0))[0])
        e.attrs = attrs
        return e
    e = e.drop_vars([dim, "step", "entry_attrs", *ENTRY_VARS], errors="ignore")
    present = e["head_present"].values
    keep = {"layer": present.any(axis=1), "head": present.any(axis=0)}
    if "qk_spectrum" in e and "rank" in e.dims:
        keep["rank"] = np.isfinite(e["qk_spectrum"].values).any(axis=(0, 1))
    if "group" in e:
        keep["stat"] = e["group"].values != ""
    e = e.isel({d: np.nonzero(m)[0] for d, m in keep.items()})
    e = e.drop_vars("head_present")
    if "rank" in e.coords:  # a single score's rank has no coordinate
        e = e.drop_vars("rank")
    e.attrs = attrs
    return e


def entries(ds: xr.Dataset) -> list[tuple[str, xr.Dataset]]:
    """[(label, single score)] of a collection, or [(model, ds)] of a single score."""
    if collection_dim(ds) is None:
        return [(labels_of(ds)[0], ds)]
    return [(label, entry(ds, i)) for i, label in enumerate(labels_of(ds))]


__all__ = ["COLLECTION_DIMS", "COMPONENT_ENTRY_VARS", "ENTRY_VARS", "collection_dim", "combine",
           "combine_components", "distinct_suffixes", "entries", "entry", "folder_labels",
           "labels_of", "step_of", "unique_labels"]
