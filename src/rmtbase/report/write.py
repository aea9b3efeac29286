"""One entry point for every report: the report's shape is decided here, once.

A score is one model's (dims ``layer``, ``head``, ``stat``) or a collection's (leading
``checkpoint``/``model``); a whole-matrix score (``components``) must have the same shape.
:func:`report_shape` reads it, :func:`write_report` hands it to :mod:`.model_report` or
:mod:`.collection_report`, which never re-check it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import xarray as xr

from ..errors import InputError
from ..scoring.collection.combine import collection_dim, labels_of


@dataclass(frozen=True)
class ReportShape:
    """What a report holds: ``dim`` is ``None`` for one model, else ``"checkpoint"`` or
    ``"model"``; ``components`` whether a whole-matrix score is written alongside."""

    dim: str | None
    components: bool = False


def report_shape(ds: xr.Dataset, components: xr.Dataset | None = None) -> ReportShape:
    """The shape of the report of ``ds`` (refuses whole-matrix scores of another shape: a
    single score beside a collection or the reverse, another dimension or other entries)."""
    dim = collection_dim(ds)
    if components is not None:
        cdim = collection_dim(components)
        if cdim != dim:
            raise InputError(f"the whole-matrix scores are {_what(cdim)} but the head scores "
                             f"are {_what(dim)}; give both for the same entries")
        if dim and labels_of(components) != labels_of(ds):
            raise InputError(f"the whole-matrix scores and the head scores name different "
                             f"{dim}s: {', '.join(labels_of(components)[:4])} vs "
                             f"{', '.join(labels_of(ds)[:4])}")
    return ReportShape(dim, components is not None)


def _what(dim) -> str:
    return f"a collection along '{dim}'" if dim else "one model's"


def write_report(ds, out_dir, *, figures: bool = True, top: int = 3,
                 n_spectra: int = 3, components: xr.Dataset | None = None,
                 extras: dict[str, xr.Dataset] | None = None,
                 heavy_tail: xr.Dataset | None = None) -> dict[str, Path]:
    """Write a score's report into ``out_dir`` all-or-nothing; returns {file name: final path}.
    ``ds``: a score (``xr.Dataset``) or a whole run (:class:`rmtbase.pipeline.ScoreRun`: its
    scores, whole matrices and further files, as ``rmtbase score`` writes them). ``out_dir``
    must be absent, empty or an earlier rmtbase output (replaced). ``extras``: further netCDF
    files ({file name: Dataset}); with ``composition.nc`` the report leads with what was found
    and, with ``figures``, draws ``figures/composition.png``. ``heavy_tail``: one model's
    heavy-tail table (:mod:`.heavy_tail_report`), or a collection's along its dimension."""
    from ..pipeline.run import ScoreRun

    if isinstance(ds, ScoreRun):
        if components is not None or extras is not None or heavy_tail is not None:
            raise InputError("write_report: a ScoreRun carries its own components, extras and "
                             "heavy-tail table")
        ds, components, extras, heavy_tail = (ds.scores, ds.components, ds.extras or None,
                                              ds.heavy_tail)
    shape = report_shape(ds, components)
    if shape.dim and heavy_tail is not None and heavy_tail.attrs.get("collection") != shape.dim:
        raise InputError(f"the heavy-tail table is not a collection along {shape.dim} "
                         "(rmtbase.scoring.collection.heavy_tail)")
    if shape.dim:
        from .collection_report import write_collection_report

        return write_collection_report(ds, out_dir, shape.dim, figures=figures,
                                       top=min(top, 3), components=components, extras=extras,
                                       heavy_tail=heavy_tail)
    from .model_report import write_model_report

    return write_model_report(ds, out_dir, figures=figures, top=top, n_spectra=n_spectra,
                              components=components, extras=extras, heavy_tail=heavy_tail)


__all__ = ["ReportShape", "report_shape", "write_report"]
