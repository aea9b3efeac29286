#!/usr/bin/env python
"""Digest of rmtbase outputs, for before/after checks of a restructure.

``output_digest.py PATH [PATH ...]`` prints one line per item, sorted, paths relative to the
folder given (a file given alone is named by its base name):

- netCDF (``.nc``): one line per variable (coordinates included) ``file:var dtype shape
  sha256(raw bytes)``, read with ``netCDF4`` without any decoding (no mask, no scale, no
  time/CF conversion), so the hash is of the stored values; one line ``file:var@attrs
  sha256`` per variable with attributes, and ``file:@attrs sha256`` for the global
  attributes, both after stripping (below) and serialised as sorted JSON.
- JSON: parsed, stripped (below), re-serialised with sorted keys.
- CSV, text, HTML, Markdown: sha256 of the text after the text rules (below).
- anything else (PNG, ...): sha256 of the raw bytes.

What is stripped (run-time and provenance, which differ between two runs of the same code):

- attribute / JSON keys: ``created``, ``creation_time`` and any key ending ``_creation_time``
  or ``_created``, ``history`` (and ``*_history``), ``date``, ``timestamp``, ``elapsed*``,
  ``*seconds``, ``duration*``, ``wall*``, ``cpu_s``, ``version`` and any key ending
  ``_version`` (rmtbase, jax, numpy, ...), ``commit``, ``git*``, ``host*``, ``hostname``,
  ``platform``, ``python``; in a ``manifest.json`` the per-file ``sha256``/``bytes`` (each
  file is digested here itself, with its stripping).
- string variables of a netCDF file: each item by the text rules, or, holding a JSON object
  (a collection's ``entry_attrs``), as JSON (keys above).
- text: ISO-8601 date-times (``2026-11-26T01:46:32+00:00`` → ``<time>``), durations
  ``in 48.3 s`` / ``48.3 s`` after "in" or "took" (→ ``<dur>``), ``rmtbase X.Y.Z`` version
  strings (→ ``rmtbase <version>``), 40-hex commit hashes (→ ``<commit>``).
- ``--alias DIR`` (repeatable): occurrences of DIR in text and attributes become ``<root>``
  (outputs that name the folder they were run from).

Float values are hashed as stored: byte-identical only within one machine and program; two
commits compared on the same machine by ``scripts/restructure_check.sh``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np

_STRIP_EXACT = {"created", "creation_time", "history", "date", "timestamp", "version", "commit",
                "hostname", "platform", "python", "cpu_s"}
_STRIP_PREFIX = ("elapsed", "duration", "wall", "git", "host")
_STRIP_SUFFIX = ("_creation_time", "_created", "_history", "_version", "seconds", "_elapsed",
                 "_duration", "_commit")
_TEXT = {".csv", ".txt", ".html", ".htm", ".md", ".tsv", ".entries"}
_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)?")
_DUR = re.compile(r"\b(in|took)\s+\d+(?:\.\d+)?\s*(s|ms|min)\b")
_VERSION = re.compile(r"\brmtbase(_version)?([ =:\"']+)v?\d+\.\d+(?:\.\d+)?[\w.+-]*")
_HASH = re.compile(r"\b[0-9a-f]{40}\b")


def stripped_key(key: str) -> bool:
    """Whether an attribute / JSON key is run-time or provenance (module docstring)."""
    k = key.lower()
    return (k in _STRIP_EXACT or k.startswith(_STRIP_PREFIX) or k.endswith(_STRIP_SUFFIX))


def clean_text(text: str, aliases=()) -> str:
    """``text`` with date-times, durations, rmtbase versions, commit hashes and aliased
    folders replaced (module docstring)."""
    for a in aliases:
        text = text.replace(a, "<root>")
    text = _TIME.sub("<time>", text)
    text = _DUR.sub(lambda m: f"{m.group(1)} <dur>", text)
    text = _VERSION.sub(lambda m: f"rmtbase{m.group(1) or ''}{m.group(2)}<version>", text)
    return _HASH.sub("<commit>", text)


def clean_json(obj, aliases=(), *, manifest: bool = False):
    """``obj`` without stripped keys (recursively); strings cleaned as text."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if stripped_key(str(k)):
                continue
            if manifest and k == "files" and isinstance(v, dict):
                out[k] = sorted(v)
                continue
            out[k] = clean_json(v, aliases)
        return out
    if isinstance(obj, list):
        return [clean_json(v, aliases) for v in obj]
    if isinstance(obj, str):
        return clean_text(obj, aliases)
    return obj


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _attrs_sha(attrs: dict, aliases) -> str:
    def plain(v):
        if isinstance(v, np.ndarray):
            return [plain(x) for x in v.tolist()]
        if isinstance(v, (np.generic,)):
            return v.item()
        if isinstance(v, bytes):
            return v.decode("utf-8", "replace")
        if isinstance(v, float) and v != v:
            return "nan"
        return v

    kept = {k: plain(v) for k, v in attrs.items() if not stripped_key(k)}
    return _sha(json.dumps(clean_json(kept, aliases), sort_keys=True, default=str).encode())


def _clean_item(item, aliases):
    """A string value: JSON objects (e.g. a collection's ``entry_attrs``, each entry's whole
    attributes) stripped as JSON, other text by the text rules."""
    if isinstance(item, bytes):
        item = item.decode("utf-8", "replace")
    if not isinstance(item, str):
        return item
    if item[:1] in "{[":
        try:
            return json.dumps(clean_json(json.loads(item), aliases), sort_keys=True)
        except ValueError:
            pass
    return clean_text(item, aliases)


def _raw_bytes(var, aliases=()) -> tuple[str, tuple, bytes]:
    """(dtype, shape, bytes) of a netCDF4 variable's stored values, undecoded (strings: each
    item cleaned, :func:`_clean_item`)."""
    var.set_auto_maskandscale(False)
    try:
        var.set_auto_chartostring(False)
    except AttributeError:  # pragma: no cover - old netCDF4
        pass
    data = var[...]
    if var.dtype is str or getattr(data, "dtype", None) is np.dtype(object):  # vlen strings
        items = [_clean_item(x, aliases) for x in np.asarray(data, dtype=object).ravel()]
        return "str", tuple(var.shape), json.dumps(items).encode()
    arr = np.ascontiguousarray(np.asarray(data))
    return str(arr.dtype), tuple(arr.shape), arr.tobytes()


def netcdf_lines(path: Path, name: str, aliases) -> list[str]:
    """One line per variable and attribute set of netCDF file ``path`` (groups walked)."""
    import netCDF4

    lines = []
    with netCDF4.Dataset(path) as ds:
        groups = [("", ds)]
        while groups:
            prefix, g = groups.pop()
            attrs = {k: g.getncattr(k) for k in g.ncattrs()}
            lines.append(f"{name}:{prefix}@attrs {_attrs_sha(attrs, aliases)}")
            for vname, var in g.variables.items():
                dtype, shape, raw = _raw_bytes(var, aliases)
                lines.append(f"{name}:{prefix}{vname} {dtype} {list(shape)} {_sha(raw)}")
                vattrs = {k: var.getncattr(k) for k in var.ncattrs()}
                if vattrs:
                    lines.append(f"{name}:{prefix}{vname}@attrs {_attrs_sha(vattrs, aliases)}")
            groups.extend((f"{prefix}{k}/", sub) for k, sub in g.groups.items())
    return lines


def file_lines(path: Path, name: str, aliases=()) -> list[str]:
    """Digest lines of one file (module docstring)."""
    suffix = path.suffix.lower()
    if suffix == ".nc":
        return netcdf_lines(path, name, aliases)
    if suffix == ".json":
        obj = json.loads(path.read_text(encoding="utf-8"))
        manifest = path.name == "manifest.json"
        text = json.dumps(clean_json(obj, aliases, manifest=manifest), sort_keys=True)
        return [f"{name} json {_sha(text.encode())}"]
    if suffix in _TEXT:
        text = clean_text(path.read_text(encoding="utf-8", errors="replace"), aliases)
        return [f"{name} text {_sha(text.encode())}"]
    return [f"{name} bytes {_sha(path.read_bytes())}"]


def digest(paths, aliases=()) -> list[str]:
    """Sorted digest lines of files and folders ``paths`` (folders walked recursively)."""
    aliases = sorted((str(a) for a in aliases), key=len, reverse=True)
    lines = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(x for x in p.rglob("*") if x.is_file()):
                if "__pycache__" in f.parts:
                    continue
                lines += file_lines(f, str(f.relative_to(p)), aliases)
        elif p.is_file():
            lines += file_lines(p, p.name, aliases)
        else:
            raise SystemExit(f"output_digest: no such file or folder: {p}")
    return sorted(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="output folders or files")
    ap.add_argument("--alias", action="append", default=[],
                    help="folder whose occurrences in text/attributes become <root>")
    ap.add_argument("--prefix", default="", help="prefix for every line (e.g. the run's name)")
    args = ap.parse_args(argv)
    for line in digest(args.paths, args.alias):
        print(f"{args.prefix}{line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
