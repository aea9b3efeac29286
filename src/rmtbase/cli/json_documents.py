"""The ``--json`` documents of ``score``, ``compare``, ``probe`` and ``study``, and ``score``'s
``--fail-on-flag`` status. One object on stdout (docs/json.md):

- ``schema`` (``"rmtbase.score/2"``), ``command``, ``rmtbase_version``, ``out``, ``files``;
- ``entries``, one per scored model, checkpoint or circuit: ``label``, ``model``, ``null``,
  ``storage`` (``read``, ``null``), ``null_storage``, ``quantisation``, ``kinds`` (primary kind
  -> heads), ``decision`` (``heads``, ``flagged``, ``alpha``, ``undecided``, ``undecided_draws``,
  ``growth_budget``) and ``heads`` in ``rank`` order
  (:func:`rmtbase.report.tables.head_ranks`), each with ``layer``, ``head``, ``rank``,
  ``departure``, ``kind``, ``kinds``, ``p``, ``q``, ``flag``, ``top_stat``, ``n_spikes``,
  ``profile`` (per axis ``value``, ``effect``, ``p``, ``flag``), and for a head the growth
  budget left open ``undecided`` and ``p_bracket`` [lo, hi];
- ``components`` (``--components``): per entry the matrices scored and flagged;
- ``any_flag``: any head (or matrix) flagged, what ``--fail-on-flag`` tests."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from ..files.strict_json import number as _num

#: Exit status of ``--fail-on-flag`` when any head or matrix is flagged.
EXIT_FLAGGED = 1


def _budget(value):
    """The growth budget as JSON: CPU seconds, "none", or null where the score has none."""
    return value if isinstance(value, str) else _num(value)


def _heads(e) -> list[dict]:
    import numpy as np

    present = e["head_present"].values if "head_present" in e else None
    rows = []
    for li, layer in enumerate(e["layer"].values):
        for hi, head in enumerate(e["head"].values):
            if present is not None and not bool(present[li, hi]):
                continue
            row = {"layer": int(layer), "head": int(head),
                   "p": _num(e["head_p_value"].values[li, hi]),
                   "q": _num(e["head_q_value"].values[li, hi]) if "head_q_value" in e else None,
                   "flag": bool(e["head_flag"].values[li, hi])}
            if "head_undecided" in e and bool(e["head_undecided"].values[li, hi]):
                row["undecided"] = True  # neither flagged nor cleared: its p bracket
                row["p_bracket"] = [_num(e["head_p_lo"].values[li, hi]),
                                    _num(e["head_p_hi"].values[li, hi])]
            if "head_top_stat" in e:
                row["top_stat"] = str(e["head_top_stat"].values[li, hi])
            if "n_spikes" in e:
                row["n_spikes"] = _num(int(e["n_spikes"].values[li, hi]))
            if "profile_effect" in e:
                prof = {}
                for ai, axis in enumerate(e["axis"].values):
                    item = {"value": _num(e["profile_value"].values[li, hi, ai]),
                            "effect": _num(e["profile_effect"].values[li, hi, ai])}
                    if "profile_p" in e:
                        item["p"] = _num(e["profile_p"].values[li, hi, ai])
                    if "profile_flag" in e:
                        item["flag"] = bool(e["profile_flag"].values[li, hi, ai])
                    prof[str(axis)] = item
                row["profile"] = prof
            rows.append(row)
    from ..report.tables import head_ranks

    ranks = head_ranks(e)
    dep = None
    if "profile_effect" in e:
        from ..decision.order import departure

        dep = departure(e)
    from ..decision.kinds import kinds_of

    got = kinds_of(e)
    li = {int(x): i for i, x in enumerate(e["layer"].values)}
    hi = {int(x): i for i, x in enumerate(e["head"].values)}
    for r in rows:
        if got is not None:
            r["kind"], r["kinds"] = (str(got[k][li[r["layer"]], hi[r["head"]]]) for k in (0, 1))
        r["rank"] = int(ranks[li[r["layer"]], hi[r["head"]]])
        if dep is not None:
            r["departure"] = _num(dep[li[r["layer"]], hi[r["head"]]])
    order = np.argsort([r["rank"] for r in rows], kind="stable")
    return [rows[i] for i in order]


def score_document(ds, out, written, cds=None, command: str = "score") -> dict:
    """The ``--json`` document of ``rmtbase score`` (module docstring)."""
    from ..decision.kinds import kind_counts
    from ..report.storage_text import null_storage_read, storage_read
    from ..scoring.collection.combine import entries

    docs = []
    for label, e in entries(ds):
        heads = _heads(e)
        docs.append({
            "label": str(label),
            "model": str(e.attrs.get("model", ds.attrs.get("model", ""))),
            "null": str(e.attrs.get("null", ds.attrs.get("null", ""))),
            "storage": {"read": storage_read(e), "null": null_storage_read(e),
                        "null_storage": str(e.attrs.get("null_storage", "")),
                        "quantisation": str(e.attrs.get("quantisation", ""))},
            "kinds": kind_counts(e),
            "decision": {"heads": len(heads), "flagged": sum(h["flag"] for h in heads),
                         "alpha": _num(e.attrs.get("alpha", ds.attrs.get("alpha"))),
                         "undecided": sum(bool(h.get("undecided")) for h in heads),
                         "undecided_draws": str(e.attrs.get("undecided_draws", "")) or None,
                         "growth_budget": _budget(e.attrs.get("growth_budget",
                                                              ds.attrs.get("growth_budget")))},
            "resolution_note": str(e.attrs.get("resolution_note", "")) or None,
            "heads": heads})
    doc = {**written_doc(command, out, written), "entries": docs}
    flagged = any(d["decision"]["flagged"] for d in docs)
    if cds is not None:
        comps = []
        dim = next((d for d in ("checkpoint", "model") if d in cds.dims), None)
        labels = [str(v) for v in cds[dim].values] if dim else [str(cds.attrs.get("model", ""))]
        for i, label in enumerate(labels):
            c = cds.isel({dim: i}) if dim else cds
            flags = c["component_flag"].values if "component_flag" in c else None
            comps.append({"label": label, "matrices": 0 if flags is None else int(flags.size),
                          "flagged": 0 if flags is None else int(flags.sum())})
        doc["components"] = comps
        flagged = flagged or any(c["flagged"] for c in comps)
    doc["any_flag"] = bool(flagged)
    return doc


def any_flag(ds, cds=None) -> bool:
    """True when any head of ``ds`` (or matrix of ``cds``) is flagged."""
    hit = bool(ds["head_flag"].values.any()) if "head_flag" in ds else False
    if cds is not None and "component_flag" in cds:
        hit = hit or bool(cds["component_flag"].values.any())
    return hit


def print_json(doc: dict) -> None:
    json.dump(doc, sys.stdout, indent=1, allow_nan=False)
    sys.stdout.write("\n")


def written_doc(command: str, out, written) -> dict:
    """The common head of a command's JSON document: command, version, out, files."""
    from .._version import __version__
    from ._common import json_schema

    return {"schema": json_schema(command), "command": f"rmtbase {command}",
            "rmtbase_version": __version__, "out": str(out),
            "files": sorted(str(k) for k in (written or {}))}


def csv_rows(path) -> list[dict]:
    """The rows of a CSV file as dicts with numbers parsed (NaN as null); [] without a file."""
    import csv

    if path is None or not Path(path).is_file():
        return []
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            rows.append({k: _cell(v) for k, v in row.items()})
    return rows


def _cell(text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        return {"True": True, "False": False}.get(text, text)
    if not math.isfinite(v):
        return None
    return int(v) if v.is_integer() and "." not in str(text) and "e" not in str(text) else v


def probe_document(ds, out, written) -> dict:
    """``rmtbase probe --json``: the model and text, and per head its behaviours."""
    doc = written_doc("probe", out, written)
    keep = ("model", "n_tokens", "n_windows", "window", "attention", "text_name", "text_sha256")
    doc.update({k: (_num(ds.attrs[k]) if not isinstance(ds.attrs[k], str) else ds.attrs[k])
                for k in keep if k in ds.attrs})
    names = [v for v in ds.data_vars if ds[v].dims == ("layer", "head")]
    doc["heads"] = [{"layer": int(layer), "head": int(head),
                     **{v: _num(ds[v].values[li, hi]) for v in names}}
                    for li, layer in enumerate(ds["layer"].values)
                    for hi, head in enumerate(ds["head"].values)]
    return doc


def study_document(name: str, result: dict, seconds: float) -> dict:
    """``rmtbase study --json``: the files and summary a study returns."""
    from .._version import __version__

    def plain(v):
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        if isinstance(v, str | bool) or v is None:
            return v
        if isinstance(v, int | float):
            return _num(v)
        try:
            return _num(float(v))
        except (TypeError, ValueError):
            return str(v)

    from ._common import json_schema

    return {"schema": json_schema("study"), "command": f"rmtbase study {name}",
            "rmtbase_version": __version__,
            "seconds": round(seconds, 1), "figures": plain(result.get("figures", [])),
            "data": plain(result.get("data", [])), "summary": plain(result.get("summary", {}))}


__all__ = ["EXIT_FLAGGED", "any_flag", "csv_rows", "print_json", "probe_document", "score_document",
           "study_document", "written_doc"]
