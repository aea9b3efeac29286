"""The heavy-tail tables of several checkpoints or models as one Dataset:
:func:`heavy_tail_collection`.

Each entry (model × revision, :func:`.trajectory.make_specs`) is
:func:`rmtbase.scoring.matrices.heavy_tail.score_heavy_tail` of its own, in this process or as one Dask task per entry
(``workers``: a loopback cluster; ``scheduler``: an address), the same numbers either way (the
null's draws are fixed by the seed and cached). The tables are stacked along a leading ``dim``
(``checkpoint`` or ``model``) over the union of their layers and components (a missing matrix:
NaN, rows 0, ""), with a ``step`` coordinate (the training step the label ends in, NaN
otherwise) and each entry's model summaries."""

from __future__ import annotations

import os

import numpy as np
import xarray as xr

from ...errors import InputError

#: The per-entry attributes kept as variables over the collection's dimension.
_ENTRY_ATTRS = ("model",)


def _one(model, revision, base, options: dict):
    from ..matrices.heavy_tail import score_heavy_tail

    return score_heavy_tail(model, base=base, revision=revision, **options)


def _run(specs, base, options, workers, scheduler, progress) -> list:
    """Each entry's table, in the order of ``specs``."""
    from .runs import say

    if workers is None and scheduler is None:
        out = []
        for k, s in enumerate(specs):
            out.append(_one(s.model, s.revision, base, options))
            say(progress, f"heavy tails of {s.label} ({k + 1}/{len(specs)})")
        return out
    import contextlib

    from ...baseline.dask_client import cluster_client, completed, require_distributed, result

    require_distributed("--workers/--scheduler (Dask tasks)")
    done: dict[int, xr.Dataset] = {}
    with cluster_client(scheduler, workers) as client:
        futures = {client.submit(_one, os.fspath(s.model), s.revision, base,
                                 {**options, "progress": False}, pure=False): i
                   for i, s in enumerate(specs)}
        with contextlib.closing(completed(futures, client)) as finished:
            for fut in finished:
                i = futures[fut]
                done[i] = result(fut)
                say(progress, f"heavy tails of {specs[i].label} ({len(done)}/{len(specs)})")
    return [done[i] for i in range(len(specs))]


def _padded(ds: xr.Dataset, layers, comps, eig: int) -> xr.Dataset:
    """``ds`` on the union ``layers`` × ``comps`` and ``eig`` eigenvalue slots."""
    ds = ds.reindex(layer=layers, component=comps)
    for k, v in ds.data_vars.items():  # reindex fills NaN: strings "", integers 0
        if v.dtype == object or v.dtype.kind == "U":
            ds[k] = v.fillna("").astype(str)
        elif k in ("rows", "cols"):
            ds[k] = v.fillna(0).astype(np.int64)
        elif k == "alpha_flag":
            ds[k] = v.fillna(False).astype(bool)
    return ds.pad(eig=(0, eig - ds.sizes["eig"]), constant_values=np.nan)


def combine_tables(tables: list, labels: list[str], dim: str = "checkpoint") -> xr.Dataset:
    """Stack heavy-tail tables along ``dim`` (module docstring); attributes of the first, its
    ``model`` per entry in ``model_name``."""
    from .combine import step_of

    if len(set(labels)) != len(labels):
        raise InputError(f"entry labels repeat: {labels}")
    layers = sorted({int(x) for t in tables for x in t["layer"].values})
    comps = list(dict.fromkeys(str(c) for t in tables for c in t["component"].values))
    eig = max(t.sizes["eig"] for t in tables)
    out = xr.concat([_padded(t, layers, comps, eig) for t in tables], dim=dim,
                    coords="minimal", compat="override", combine_attrs="override")
    steps = [step_of(x) for x in labels]
    out = out.assign_coords({dim: list(labels),
                             "step": (dim, np.array([np.nan if s is None else s for s in steps],
                                                    dtype=np.float64))})
    out["model_name"] = (dim, np.array([str(t.attrs.get("model", "")) for t in tables]))
    out.attrs = {**tables[0].attrs, "collection": dim,
                 "model": _common([str(t.attrs.get("model", "")) for t in tables])}
    return out


def _common(names: list[str]) -> str:
    """One model's name, or ``first .. last`` of several."""
    return names[0] if len(set(names)) == 1 else f"{names[0]} .. {names[-1]}"


def heavy_tail_collection(models, *, revisions=None, labels=None, dim: str | None = None,
                          base=None, workers: int | None = None, scheduler: str | None = None,
                          **options) -> xr.Dataset:
    """The tables of every entry stacked (module docstring); ``options``:
    :func:`rmtbase.scoring.matrices.heavy_tail.score_heavy_tail`'s keywords, its ``progress``
    the collection's (a line per entry). ``dim``: "checkpoint" (default for revisions or one
    architecture) or "model"."""
    from ...models import model_info
    from .combine import COLLECTION_DIMS
    from .trajectory import _check_dask_models, _default_dim, make_specs

    progress = bool(options.pop("progress", False))
    specs = make_specs(models, revisions, labels)
    if dim is not None and dim not in COLLECTION_DIMS:
        raise InputError(f"dim must be one of {', '.join(COLLECTION_DIMS)}, got {dim!r}")
    _check_dask_models(specs, workers is None and scheduler is None)
    if dim is None:
        infos = [model_info(s.model, revision=s.revision) for s in specs]
        dim = _default_dim(revisions, infos)
    tables = _run(specs, base, options, workers, scheduler, progress)
    out = combine_tables(tables, [s.label for s in specs], dim)
    out.attrs["computed_by"] = "one process" if workers is None and scheduler is None else \
        f"{len(specs)} Dask tasks"
    return out


__all__ = ["combine_tables", "heavy_tail_collection"]
