"""Output helpers shared by the studies: a fresh folder, figures, CSV and netCDF written
atomically (temporary file, then rename), and a matplotlib Figure that does not touch pyplot."""

from __future__ import annotations

import csv
import os
import tempfile
from pathlib import Path

from ..errors import InputError


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


def _atomic(path: Path, write):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def save_figure(fig, path, dpi=110) -> Path:
    """Write ``fig`` as PNG to ``path`` atomically."""
    return _atomic(Path(path), lambda tmp: fig.savefig(tmp, dpi=dpi, format="png"))


def write_csv(rows: list[dict], path) -> Path:
    """Write a list of dicts (same keys) as CSV atomically."""
    rows = list(rows)
    fields = list(rows[0]) if rows else []

    def w(tmp):
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            wr = csv.DictWriter(fh, fieldnames=fields)
            wr.writeheader()
            wr.writerows(rows)

    return _atomic(Path(path), w)


def write_netcdf(ds, path) -> Path:
    """Write an xarray Dataset to netCDF atomically."""
    return _atomic(Path(path), lambda tmp: ds.to_netcdf(tmp))


def write_text(text: str, path) -> Path:
    """Write a text file (markdown) atomically."""

    def w(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return _atomic(Path(path), w)
