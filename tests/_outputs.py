"""Open and parse each file a tour step writes: one checker per kind of file, by
extension. :func:`problems` returns what is wrong with a file (nothing when it reads as its
kind); a file of a kind without a checker is itself a problem, so a new output cannot go
unread.

- ``.nc``: xarray opens and loads it; CF ``Conventions`` (not on the user cache's tables and
  a collection's entries); at least one data variable; every float variable finite, but for
  the NaN :data:`NAN_OK` allows (padding, undefined cases), exactly where it says;
- ``.csv``: a header of distinct names, rows as long as it, every column that holds a number
  all numbers (or empty), no Python ``repr`` (``np.float64(``) anywhere;
- ``.json`` / ``.jsonl``: strict JSON (no NaN, Infinity); a ``manifest.json`` lists exactly the
  folder's other files with their size and SHA-256;
- ``.png``: Pillow decodes it; ``.svg`` and ``.graphml``: XML of that root; ``.dot``: one
  balanced ``digraph``;
- ``.html``: one document whose tags balance, with a title, its :data:`SECTIONS`, strict JSON
  in its data script, decodable embedded PNGs and links to files that exist;
- ``.txt``: non-empty UTF-8 without a Python ``repr``.

:data:`REQUIRED` names variables / columns a file of that name must have.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

#: Text of a Python or NumPy repr in place of a value.
REPR = re.compile(r"\bnp\.\w+\(|\barray\(|<built-in|object at 0x")


def _mask(v, a: str, b: str, op):
    """``op(v[a], v[b])`` over all of ``v``'s dimensions (None when ``v`` lacks ``b``)."""
    return op(v[a], v[b]).broadcast_like(v).transpose(*v.dims).values if b in v.dims else None


def _pairs_that_compose(v):
    return _mask(v, "layer_from", "layer_to", lambda a, b: a >= b)


def _same_head(v):
    return _mask(v, "head_from", "head_to", lambda a, b: a == b)


def _every_head(v):
    """NaN for every head of the model or for none (its other coordinates decide)."""
    heads = [d for d in ("layer", "head") if d in v.dims]
    return v.isnull().any(heads).broadcast_like(v).transpose(*v.dims).values


def _tail(v):
    """NaN from some index of ``spike`` on (padding after the outliers found)."""
    return (v.isnull().cumsum("spike") > 0).transpose(*v.dims).values


def _unlabelled(v, ds):
    return (ds["label"] == "none").transpose(*v.dims).values


#: Variables that may hold NaN, by name (a regular expression): why, and where exactly (a
#: function of the variable, and of its dataset if it takes two, giving the NaN mask) or None
#: (wherever the reason applies).
NAN_OK = {
    r"spike_(x|p)": ("padding: a head has fewer outliers than the spike dimension", _tail),
    r"q_value": ("a statistic counted once through another has no q", _every_head),
    r"profile_(effect|band_lo|band_hi|p|q)": ("an axis a model's shape does not test",
                                              _every_head),
    r"composition(_\w+)?": ("a pair whose source is not earlier", _pairs_that_compose),
    r"qk_overlap_\w+": ("a head with itself", _same_head),
    r"(behaviour_)?next_token": ("a causal model: no query sees its next token", _every_head),
    r"effect_resample": ("a candidate not patched under resample ablation", None),
    r"label_score": ("a head labelled none", _unlabelled),
    r"screen_attribution": ("a source not screened for that receiver", None),
}
#: Of those, the variables that may be NaN everywhere.
ALL_NAN_OK = {r"(behaviour_)?next_token", r"spike_(x|p)"}  # and: no head has an outlier

#: Variables (.nc) or columns (.csv) a file of that name must have.
REQUIRED = {
    "scores.nc": {"head_p_value", "head_flag", "profile_effect", "value", "p_value"},
    "heads.csv": {"layer", "head", "head_p_value", "head_flag"},
    "scores.csv": {"layer", "head", "stat", "value", "p_value"},
    "components.nc": {"value", "p_value", "component_p_value", "component_flag"},
    "components.csv": {"layer", "component", "stat", "value", "component_flag"},
    "composition.nc": {"composition", "composition_p", "qk_overlap", "qk_overlap_p"},
    "circuits.nc": {"label", "label_score", "effect_causal", "effect_se"},
    "probe.nc": {"entropy", "prev_token", "first_token", "induction"},
    "probe.csv": {"layer", "head", "entropy", "prev_token", "first_token", "induction"},
    "curve.csv": {"k", "metric", "faithfulness"},
    "flags.csv": {"model", "heads", "flagged"},
    "profiles.csv": {"model", "layer", "stat", "mean"},
}

#: The ``<h2>`` sections of a report, by the start of its title.
SECTIONS = {
    "rmtbase score:": ("Model and null", "Per-head verdict", "Heads and their profile",
                       "Figures"),
    "rmtbase compare:": ("Heads that differ from the null, per model", "Figures"),
    "rmtbase circuits --task:": ("The circuit", "Figures", "Edges patched exactly",
                                 "The circuit's strongest edges"),
}

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
         "source", "track", "wbr"}


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def _no_repr(text: str) -> list[str]:
    m = REPR.search(text)
    return [f"Python repr in the text: {text[max(0, m.start() - 30):m.end() + 20]!r}"] if m \
        else []


def _nc(path: Path, cf: bool = True) -> list[str]:
    import numpy as np
    import xarray as xr

    out = []
    with xr.open_dataset(path) as ds:
        ds.load()
        if cf and not str(ds.attrs.get("Conventions", "")).startswith("CF-"):
            out.append(f"no CF Conventions attribute ({ds.attrs.get('Conventions')!r})")
        if not ds.data_vars:
            out.append("no data variables")
        out += [f"variable {v} missing" for v in sorted(REQUIRED.get(path.name, set())
                                                        - set(ds.variables))]
        for name in ds.variables:
            var = ds[name]
            if var.dtype.kind not in "fc" or var.size == 0:
                continue
            values = np.asarray(var.values)
            if np.isinf(values).any():
                out.append(f"{name}: {int(np.isinf(values).sum())} infinite values")
            nan = np.isnan(values)
            ok = [p for p in NAN_OK if re.fullmatch(p, str(name))]
            if nan.all() and not any(p in ALL_NAN_OK for p in ok):
                out.append(f"{name}: every value NaN")
            elif nan.any() and not ok:
                out.append(f"{name}: {int(nan.sum())} of {values.size} values NaN")
            rule = NAN_OK[ok[0]][1] if ok else None
            where = None if rule is None else (
                rule(var, ds) if rule.__code__.co_argcount == 2 else rule(var))
            if where is not None and not np.array_equal(nan, where):
                out.append(f"{name}: NaN not exactly where {NAN_OK[ok[0]][0]}")
    return out


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _csv(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or not rows[0]:
        return ["no header"]
    header, body = rows[0], rows[1:]
    out = _no_repr(text)
    if len(set(header)) != len(header) or not all(header):
        out.append(f"header names empty or repeated: {header}")
    if not body:
        out.append("no rows")
    out += [f"row {i}: {len(r)} fields, header {len(header)}"
            for i, r in enumerate(body, 2) if len(r) != len(header)][:3]
    out += [f"column {c} missing" for c in sorted(REQUIRED.get(path.name, set()) - set(header))]
    numeric = 0
    for j, name in enumerate(header):
        cells = [r[j] for r in body if j < len(r) and r[j] != ""]
        if not any(_is_number(c) for c in cells):
            continue
        numeric += 1
        bad = [c for c in cells if not _is_number(c)]
        if bad:
            out.append(f"column {name}: numbers beside text {bad[:3]}")
    if body and not numeric:
        out.append("no numeric column")
    return out


def _manifest(path: Path, doc) -> list[str]:
    folder = path.parent
    listed = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(listed, dict) or not listed:
        return ["no 'files' in the manifest"]
    out = []
    present = {str(p.relative_to(folder)) for p in folder.rglob("*")
               if p.is_file() and p != path}
    out += [f"{f} is in the folder, not in the manifest" for f in sorted(present - set(listed))]
    for name, meta in listed.items():
        f = folder / name
        if not f.is_file():
            out.append(f"{name} listed, missing")
            continue
        data = f.read_bytes()
        if len(data) != meta.get("bytes") or hashlib.sha256(data).hexdigest() != meta.get(
                "sha256"):
            out.append(f"{name}: size or SHA-256 differs from the manifest")
    return out


def _json(path: Path) -> list[str]:
    doc = _strict(path.read_text(encoding="utf-8"))
    if not doc:
        return ["empty document"]
    return _manifest(path, doc) if path.name == "manifest.json" else []


def _jsonl(path: Path) -> list[str]:
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    docs = [_strict(ln) for ln in lines]
    return [] if docs and all(isinstance(d, dict) for d in docs) else ["not JSON objects"]


def _png_bytes(data: bytes) -> list[str]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        if im.format != "PNG":
            return [f"format {im.format}, not PNG"]
        im.load()
        if min(im.size) < 16:
            return [f"{im.size[0]}x{im.size[1]} pixels"]
    return []


def _png(path: Path) -> list[str]:
    return _png_bytes(path.read_bytes())


def _xml_root(path: Path, root: str) -> list[str]:
    tag = ET.parse(path).getroot().tag
    return [] if tag.rsplit("}", 1)[-1] == root else [f"root <{tag}>, not <{root}>"]


def _graphml(path: Path) -> list[str]:
    out = _xml_root(path, "graphml")
    tags = {e.tag.rsplit("}", 1)[-1] for e in ET.parse(path).iter()}
    return out + [f"no <{t}>" for t in ("node", "edge") if t not in tags]


def _dot(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8").strip()
    ok = re.match(r"(strict\s+)?digraph\b", text) and text.endswith("}")
    depth = 0
    for ch in re.sub(r'"(\\.|[^"\\])*"', '""', text):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        ok = ok and depth >= 0
    return [] if ok and depth == 0 and "->" in text else ["not one balanced digraph with edges"]


class _Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.h2, self.title = [], [], [], ""
        self.doctype, self.data_json, self.images, self.links = False, [], [], []
        self._text = None

    def handle_decl(self, decl):
        self.doctype = self.doctype or decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img" and (a.get("src") or "").startswith("data:image/png;base64,"):
            self.images.append(a["src"].split(",", 1)[1])
        if tag == "a" and a.get("href") and not re.match(r"[a-z]+:|#", a["href"]):
            self.links.append(a["href"])
        if tag in _VOID:
            return
        self.stack.append(tag)
        if tag in ("h2", "title") or (tag == "script" and a.get("type") == "application/json"):
            self._text = [tag, ""]

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else ''}>")
            return
        self.stack.pop()
        if self._text and self._text[0] == tag:
            kind, text = self._text
            self._text = None
            if kind == "h2":
                self.h2.append(text.strip())
            elif kind == "title":
                self.title = text.strip()
            else:
                self.data_json.append(text)

    def handle_data(self, data):
        if self._text:
            self._text[1] += data


def _html(path: Path) -> list[str]:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8"))
    p.close()
    out = p.errors[:3] + ([f"unclosed {p.stack}"] if p.stack else [])
    if not p.doctype:
        out.append("no <!doctype html>")
    if not p.title:
        out.append("no <title>")
    if not p.h2:
        out.append("no <h2> section")
    for start, wanted in SECTIONS.items():
        if p.title.startswith(start):
            out += [f"no section {w!r} (has {p.h2})" for w in wanted if w not in p.h2]
    for text in p.data_json:
        _strict(text)
    for data in p.images:
        out += [f"embedded image: {e}" for e in _png_bytes(base64.b64decode(data))]
    out += [f"link to {h}: no such file" for h in p.links
            if not (path.parent / h.split("#")[0]).exists()]
    return out


def _txt(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return _no_repr(text) + ([] if text.strip() else ["empty"])


CHECKERS = {".nc": _nc, ".csv": _csv, ".json": _json, ".jsonl": _jsonl, ".png": _png,
            ".svg": lambda p: _xml_root(p, "svg"), ".graphml": _graphml, ".dot": _dot,
            ".html": _html, ".txt": _txt}


def problems(path: Path, *, cf: bool = True) -> list[str]:
    """What is wrong with ``path`` read as its kind (by extension); [] when nothing. ``cf``:
    a netCDF file must say it follows CF, but for rmtbase's own records (a collection's
    ``OUT.entries/``, kept for resuming: docs/scale.md)."""
    check = CHECKERS.get(path.suffix)
    if check is None:
        return [f"{path.name}: no checker for {path.suffix or 'extension-less'} files"]
    try:
        found = _nc(path, cf and not path.parent.name.endswith(".entries")) \
            if check is _nc else check(path)
    except Exception as e:  # any failure to open or parse is the finding
        found = [f"does not parse: {type(e).__name__}: {str(e)[:200]}"]
    return [f"{path.name}: {f}" for f in found]


def strict_json(text: str):
    """``text`` as JSON, refusing NaN and infinities."""
    return _strict(text)


__all__ = ["ALL_NAN_OK", "CHECKERS", "NAN_OK", "REQUIRED", "SECTIONS", "problems", "strict_json"]
