"""Per-entry files of a collection: each entry written when it completes, reused by a rerun.

:func:`rmtbase.scoring.trajectory.score_collection` with ``entries=DIR`` writes each scored
entry to ``DIR/<label>.nc`` (the label percent-encoded; all or nothing,
:func:`rmtbase.files.atomic.write_netcdf`) as soon as it is scored, and before scoring an entry
looks for its file: one whose key matches is used as it is. The key (:func:`entry_key`, a
SHA-256 stored as the ``entry_key`` attribute) covers what the numbers depend on: the model (hub
id, or a local folder's absolute path with the name, size and modification time of each of its
files), the revision, every scoring option, the JAX precision (``jax_enable_x64``) and the
versions of rmtbase and of the null tables' format. An entry scored with other options, by
another version or from changed weights is scored again and its file replaced. The key itself
holds no path (issue 35: no absolute path in any attribute).

Every entry of a collection run with ``entries`` passes through its file (written, then read
back), so a collection resumed after an interruption is identical to one scored without it,
and :func:`load_entries` (``rmtbase combine``) assembles the same collection from the files,
wherever they were scored (e.g. one SLURM array task per entry, each writing into a shared
folder).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from urllib.parse import quote, unquote

import xarray as xr

from ..errors import InputError

#: Attributes an entry file adds to a single score (removed again on reading).
ENTRY_ATTRS = ("entry_key", "entry_label")
SUFFIX = ".nc"


def entries_dir(out) -> Path:
    """Where the entries of a collection written to folder ``out`` are kept: ``OUT.entries``
    beside it (the output folder itself is replaced whole when the report is written)."""
    p = Path(os.path.expanduser(os.fspath(out))).absolute()
    return p.parent / f"{p.name}.entries"


def _fingerprint(model) -> list:
    """Name, size and mtime of the files of a local model (a folder or one file)."""
    p = Path(os.fspath(model))
    files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
    out = []
    for q in files:
        st = q.stat()
        out.append([str(q.relative_to(p)) if q != p else q.name, st.st_size, st.st_mtime_ns])
    return out


def entry_key(model, revision, options: dict, x64: bool) -> str:
    """The SHA-256 key of one entry (module docstring)."""
    from .._version import __version__
    from ..baseline.tables import TABLE_FORMAT

    local = isinstance(model, str | os.PathLike) and os.path.exists(os.fspath(model))
    what = {"model": os.path.abspath(os.fspath(model)) if local else str(model),
            "files": _fingerprint(model) if local else None,
            "revision": revision, "x64": bool(x64), "rmtbase": __version__,
            "table_format": TABLE_FORMAT,
            "options": {k: repr(v) for k, v in sorted(options.items())}}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def entry_path(folder, label: str) -> Path:
    """The file of entry ``label`` in ``folder``."""
    return Path(folder) / (quote(str(label), safe="") + SUFFIX)


def read_entry(path) -> xr.Dataset:
    """A single score from an entry file (or any ``scores.nc`` of one model), loaded, with its
    entry attributes kept; InputError for a file that is not one."""
    from ..files.interrupts import deferred

    try:
        with deferred(), xr.open_dataset(path) as ds:  # no interrupt inside HDF5
            ds = ds.load()
    except (OSError, ValueError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise InputError(f"cannot read {path}: {first}") from None
    if "head_flag" not in ds or "layer" not in ds.dims:
        raise InputError(f"{path} is not a single rmtbase score")
    return ds


def strip(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` without the entry attributes (what :func:`combine` stacks)."""
    ds = ds.copy()
    for k in ENTRY_ATTRS:
        ds.attrs.pop(k, None)
    return ds


def load(folder, label: str, key: str) -> xr.Dataset | None:
    """The stored entry ``label`` if its key is ``key``, else None (absent, other options or
    versions, or unreadable: scored again)."""
    path = entry_path(folder, label)
    if not path.is_file():
        return None
    try:
        ds = read_entry(path)
    except InputError:
        return None
    return strip(ds) if ds.attrs.get("entry_key") == key else None


def save(folder, label: str, key: str, ds: xr.Dataset) -> xr.Dataset:
    """Write entry ``label`` (all or nothing) and return it as read back from its file."""
    from ..files.atomic import write_netcdf

    path = entry_path(folder, label)
    out = ds.copy()
    out.attrs.update(entry_key=key, entry_label=str(label))
    write_netcdf(out, path)
    return strip(read_entry(path))


def load_entries(paths) -> list[tuple[str, xr.Dataset]]:
    """[(label, single score)] from entry files, folders of them (``OUT.entries``) or
    ``rmtbase score`` output folders of one model (their ``scores.nc``). The label is the
    entry file's (else the score's ``model`` attribute); order as given, files of a folder by
    name."""
    out = []
    for p in map(Path, paths):
        if p.is_dir() and (p / "scores.nc").is_file():
            files = [p / "scores.nc"]
        elif p.is_dir():
            files = sorted(p.glob(f"*{SUFFIX}"))
            if not files:
                raise InputError(f"{p} holds no entry files (*{SUFFIX}) and no scores.nc")
        elif p.is_file():
            files = [p]
        else:
            raise InputError(f"{p} does not exist")
        for f in files:
            ds = read_entry(f)
            label = ds.attrs.get("entry_label") or (
                unquote(f.name[:-len(SUFFIX)]) if f.name != "scores.nc"
                else str(ds.attrs.get("model", f.parent.name)))
            out.append((str(label), strip(ds)))
    if not out:
        raise InputError("give at least one entry")
    return out


__all__ = ["ENTRY_ATTRS", "entries_dir", "entry_key", "entry_path", "load", "load_entries",
           "read_entry", "save", "strip"]
