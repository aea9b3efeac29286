"""Per-entry files of a collection: each entry written when it completes, reused by a rerun.

Each entry goes atomically to ``DIR/<label>.nc`` (CF-1.10), reused when its :func:`entry_key` (SHA-256 of
the model, revision, options, JAX precision and versions; no path) matches;
:func:`content_hash` is checked on read, and an edited or unhashed entry is rescored with a
warning. A resumed collection equals an uninterrupted one."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from urllib.parse import quote, unquote

import numpy as np
import xarray as xr

from ...errors import InputError

#: Attribute holding the SHA-256 of an entry file's content (:func:`content_hash`).
CONTENT_ATTR = "entry_sha256"
#: JSON {global attribute: its value before CF annotation, null if absent} of an entry file's
#: attributes :func:`rmtbase.files.cf.annotate` added or changed (restored on reading).
CF_ADDED_ATTR = "entry_cf_attrs"
#: Attributes an entry file adds to a single score (removed again on reading).
ENTRY_ATTRS = ("entry_key", "entry_label", CONTENT_ATTR, CF_ADDED_ATTR)
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


def _spelled(value):
    """A null by its spelling (``"gaussian"``), anything else as it is: the CLI passes the
    parsed :class:`~rmtbase.stats.null_kind.Null`, a caller of ``score_collection`` may pass its
    text, and both are one key (the keys of entries written before are unchanged)."""
    from ...stats.null_protocol import Null

    return str(value) if isinstance(value, Null) else value


def entry_key(model, revision, options: dict, x64: bool) -> str:
    """The SHA-256 key of one entry (module docstring)."""
    from ..._version import __version__
    from ...baseline.tables import TABLE_FORMAT

    local = isinstance(model, str | os.PathLike) and os.path.exists(os.fspath(model))
    what = {"model": os.path.abspath(os.fspath(model)) if local else str(model),
            "files": _fingerprint(model) if local else None,
            "revision": revision, "x64": bool(x64), "rmtbase": __version__,
            "table_format": TABLE_FORMAT,
            "options": {k: repr(_spelled(v)) for k, v in sorted(options.items())}}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def _feed(h, value) -> None:
    a = np.asarray(value)
    if a.dtype.kind in "OUS":  # text: the same whether numpy holds it as str or object
        h.update(json.dumps([a.shape, [str(x) for x in a.ravel()]]).encode())
    else:
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())


def content_hash(ds: xr.Dataset) -> str:
    """SHA-256 of what an entry holds: each variable (coordinates included, by name) with its
    dimensions, dtype, shape, values' bytes and attributes, then the global attributes but
    :data:`CONTENT_ATTR`. Taken on the decoded values, so a netCDF round trip keeps it."""
    h = hashlib.sha256()
    for name in sorted(map(str, ds.variables)):
        v = ds.variables[name]
        h.update(json.dumps(["var", name, list(map(str, v.dims))]).encode())
        _feed(h, v.values)
        for k in sorted(map(str, v.attrs)):
            h.update(json.dumps(["attr", k]).encode())
            _feed(h, v.attrs[k])
    for k in sorted(map(str, ds.attrs)):
        if k != CONTENT_ATTR:
            h.update(json.dumps(["global", k]).encode())
            _feed(h, ds.attrs[k])
    return h.hexdigest()


def verified(ds: xr.Dataset) -> bool | None:
    """True if the entry ``ds`` (as read) matches its stored hash, False if it does not (it
    changed after it was written), None if it holds none (written before the hash existed)."""
    stored = ds.attrs.get(CONTENT_ATTR)
    return None if stored is None else str(stored) == content_hash(ds)


def entry_path(folder, label: str) -> Path:
    """The file of entry ``label`` in ``folder``."""
    return Path(folder) / (quote(str(label), safe="") + SUFFIX)


def read_entry(path) -> xr.Dataset:
    """A single score from an entry file (or any ``scores.nc`` of one model), loaded, with its
    entry attributes kept; InputError for a file that is not one."""
    from ...files.interrupts import deferred

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
    """``ds`` without the entry attributes, its global attributes as before CF annotation
    (what :func:`combine` stacks)."""
    ds = ds.copy()
    for k, v in json.loads(str(ds.attrs.get(CF_ADDED_ATTR, "{}"))).items():
        if v is None:
            ds.attrs.pop(k, None)
        else:
            ds.attrs[k] = v
    for k in ENTRY_ATTRS:
        ds.attrs.pop(k, None)
    return ds


def check(folder, label: str, key: str) -> tuple[xr.Dataset | None, str | None]:
    """``(entry, None)`` for stored entry ``label`` with key ``key`` and a matching hash, else
    ``(None, why)``: why None when expected (absent, other key), else a warning clause."""
    from ...files.cache_trust import untrusted_why

    path = entry_path(folder, label)
    if not path.is_file():
        return None, None
    why = untrusted_why(path)
    if why is not None:  # another user could have written it: scored again, not read
        return None, f"is not trusted ({why})"
    try:
        ds = read_entry(path)
    except InputError:
        return None, "cannot be read as an entry"
    if ds.attrs.get("entry_key") != key:
        return None, None
    ok = verified(ds)
    if ok is None:
        return None, (f"has no content hash ({CONTENT_ATTR}; written by an earlier rmtbase), "
                      "so it cannot be verified")
    if not ok:
        return None, "changed after it was written (its content does not match its hash)"
    return strip(ds), None


def load(folder, label: str, key: str) -> xr.Dataset | None:
    """The stored entry ``label`` if its key is ``key`` and its content matches its hash, else
    None (scored again; :func:`check` says why)."""
    return check(folder, label, key)[0]


def save(folder, label: str, key: str, ds: xr.Dataset) -> xr.Dataset:
    """Write entry ``label`` (all or nothing) with CF attributes
    (:func:`rmtbase.files.cf.annotate`) and its content hash, and return it as read back from
    its file (checked against the hash)."""
    from ...files.atomic import write_netcdf
    from ...files.cf import annotate

    path = entry_path(folder, label)
    out = annotate(ds, kind="rmtbase score", name=path.name)
    before = {k: ds.attrs.get(k) for k, v in out.attrs.items()
              if k not in ds.attrs or not np.array_equal(v, ds.attrs[k])}
    out.attrs.update(entry_key=key, entry_label=str(label),
                     **{CF_ADDED_ATTR: json.dumps(before, default=str)})
    out.attrs[CONTENT_ATTR] = content_hash(out)
    write_netcdf(out, path)
    from ...files.cache_trust import keep_private

    keep_private(path)  # reused by a rerun only while nobody else can rewrite it
    back = read_entry(path)
    if not verified(back):  # a value the netCDF round trip represents otherwise: hash the file's
        back.attrs[CONTENT_ATTR] = content_hash(back)
        write_netcdf(back, path)
        keep_private(path)
        back = read_entry(path)
        if not verified(back):
            raise RuntimeError(f"entry {path.name}: its content hash does not survive a write")
    return strip(back)


def _manifest_sha(f: Path) -> str | None:
    """The SHA-256 that the ``manifest.json`` beside ``f`` (an output folder's,
    :class:`rmtbase.files.output.OutputFolder`) lists for it, or None."""
    try:
        doc = json.loads((f.parent / "manifest.json").read_text(encoding="utf-8"))
        return str(doc["files"][f.name]["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_content(f: Path, ds: xr.Dataset, unverified: bool = False) -> str | None:
    """InputError unless score file ``f`` (read as ``ds``) is verified by its :data:`CONTENT_ATTR`
    or its folder's ``manifest.json``. A mismatching hash, or a ``scores.nc`` its manifest does not
    list, is always refused; no hash at all only without ``unverified`` (then a warning clause is
    returned, else None)."""
    listed = _manifest_sha(f) if f.name == "scores.nc" else None
    if listed is None and f.name == "scores.nc" and (f.parent / "manifest.json").exists():
        raise InputError(f"{f.parent / 'manifest.json'} does not list {f.name} with its "
                         "SHA-256 (the manifest was changed after it was written); score it "
                         "again")
    if listed is not None:
        if hashlib.sha256(f.read_bytes()).hexdigest() != listed:
            raise InputError(f"{f} changed after it was written (its SHA-256 does not match "
                             f"{f.parent / 'manifest.json'}); score it again")
        return None
    ok = verified(ds)
    if ok is False:
        raise InputError(f"entry {f} changed after it was written (its content does "
                         f"not match its {CONTENT_ATTR} hash); score it again")
    if ok is None and not unverified:
        raise InputError(f"{f} cannot be verified (no {CONTENT_ATTR} hash, no manifest.json "
                         "listing it: written by an earlier rmtbase or moved out of its "
                         "folder); score it again, or pass --unverified to use it as it is")
    return None if ok else f"{f} is used unverified (no {CONTENT_ATTR}, no manifest)"


def load_entries(paths, *, unverified: bool = False, warn=None) -> list[tuple[str, xr.Dataset]]:
    """[(label, single score)] from entry files, folders of them or score folders (``scores.nc``),
    in the order given (a folder's by name), each verified by :func:`check_content` first."""
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
            note = check_content(f, ds, unverified)
            if note is not None and warn is not None:
                warn(note)
            label = ds.attrs.get("entry_label") or (
                unquote(f.name[:-len(SUFFIX)]) if f.name != "scores.nc"
                else str(ds.attrs.get("model", f.parent.name)))
            out.append((str(label), strip(ds)))
    if not out:
        raise InputError("give at least one entry")
    return out


__all__ = ["CONTENT_ATTR", "ENTRY_ATTRS", "check", "check_content", "content_hash", "entries_dir", "entry_key",
           "entry_path", "load", "load_entries", "read_entry", "save", "strip", "verified"]
