"""Output helpers of the studies: folder, figures, CSV, text and netCDF each written atomically
(:mod:`rmtbase.files.atomic`), and a matplotlib Figure that does not touch pyplot."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from ..errors import InputError
from ..files import atomic


def prepare(out_dir) -> Path:
    """Create ``out_dir`` (and parents); InputError if it exists as a file."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"output path {out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    return out


def figure(nrows=1, ncols=1, *, size=(5.0, 3.6), **kwargs):
    """(fig, axes) without pyplot: an Agg-rendered :class:`matplotlib.figure.Figure`."""
    import matplotlib.figure

    fig = matplotlib.figure.Figure(figsize=(size[0] * ncols, size[1] * nrows),
                                   layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    return fig, axes


def save_figure(fig, path, dpi=110) -> Path:
    """Write ``fig`` as PNG to ``path`` all or nothing."""
    return atomic.save_figure(fig, path, dpi=dpi)


def write_csv(rows: list[dict], path) -> Path:
    """Write a list of dicts (same keys) as CSV all or nothing."""
    rows = list(rows)
    buf = io.StringIO(newline="")
    wr = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else [])
    wr.writeheader()
    wr.writerows(rows)
    return atomic.write_text(path, buf.getvalue())


def _study_name(path: Path) -> str:
    """The study a file is written for: its folder's name, as :func:`rmtbase.studies.run`
    builds it in a temporary sibling ``.<name>.tmp-<pid>-<hex>`` (:mod:`rmtbase.files.output`)."""
    folder = path.parent.name
    m = re.fullmatch(r"\.(.+)\.tmp-.*", folder)
    return m.group(1) if m else folder


def write_netcdf(ds, path) -> Path:
    """Write a Dataset to netCDF atomically with rmtbase's CF attributes
    (:func:`rmtbase.files.cf.annotate`)."""
    from ..files.cf import annotate

    path = Path(path)
    name = _study_name(path)
    return atomic.write_netcdf(annotate(ds, kind=f"rmtbase study {name}", name=path.name), path)


def write_text(text: str, path) -> Path:
    """Write a text file (markdown) all or nothing."""
    return atomic.write_text(path, text)
