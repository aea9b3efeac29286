"""The compact JSON embedded in ``report.html``: per head, its statistics beside the null.

:func:`report_data` turns a score into plain lists (4 significant digits, NaN -> null) in
(layer, head, stat) order:

- per entry: facts, ids, statistic names and groups; per head ``p``, ``q``, ``flag``, ``top``,
  ``rank`` (:func:`rmtbase.report.tables.head_ranks`; ``order``, ``key``), ``kind``/``kinds``/
  ``kind_axes``, and where scored ``prof`` (profile: ``v``, ``e``, ``f``, ``k``), ``ns``,
  ``sx``, ``beh``; with ``detail``, per test ``v``, ``m``/``s``, ``z``, ``e``, ``d``, ``p``,
  ``q``, ``pm`` (:data:`P_METHODS`), ``es`` with ``bl``/``bh``, ``ek``, and ``spec``, ``band``,
  ``hist``;
- per (d, d_h): MP_c ⊠ MP_c of the normalised spectrum and the N(0, 1) and variance-gamma
  densities of standardised W_QK entries;
- the fixed colour scales and 64 colours of each map, to match the PNGs.

A collection embeds every entry's detail while within ``budget`` bytes, else evenly spaced ones."""

from __future__ import annotations

import json
import math

import numpy as np
import xarray as xr

from ..decision.kinds import kinds_of, kinds_phrase
from ..decision.order import EVIDENCE, sort_key
from ..scoring.collection.combine import entries
from .storage_text import null_storage_read, storage_read
from .tables import head_order, head_ranks

#: key -> (variable, significant digits)
_TEST_VARS = {"v": ("value", 4), "m": ("null_mean", 4), "s": ("null_std", 3), "z": ("z", 3),
              "e": ("effect", 3), "p": ("p_value", 3), "q": ("q_value", 3)}
#: p_method codes in ``pm`` (one character per test).
P_METHODS = {"empirical": "e", "gpd": "g", "floor": "f", "": "-"}
#: Facts shown at the top of the page: (attribute, label).
FACTS = (("model", "model"), ("revision", "revision"), ("architecture", "architecture"),
         ("d", "d (model width)"), ("d_h", "d_h (head dim)"), ("storage_dtypes", "storage"),
         ("quantisation", "quantisation detected"), ("null_storage", "null storage"),
         ("null", "null"), ("decision", "decision"), ("alpha", "alpha (BH over heads)"),
         ("rmtbase_version", "rmtbase"), ("created", "created"))
DEFAULT_BUDGET = 6_000_000


def _r(x, digits: int = 4) -> float | int | None:
    x = float(x)
    if not math.isfinite(x):
        return None
    if x == 0:
        return 0
    return float(f"{x:.{digits}g}")


def _flat(a, digits: int = 4) -> list:
    return [_r(x, digits) for x in np.asarray(a, dtype=float).ravel()]


def _colours(name: str, n: int = 64) -> list[str]:
    import matplotlib as mpl
    from matplotlib.colors import to_hex

    cmap = mpl.colormaps[name]
    return [to_hex(cmap(i / (n - 1))) for i in range(n)]


def _shape_refs(d: int, d_h: int) -> dict:
    from ..analytic import product
    from ..analytic import variance_gamma as vg
    from ..scoring.measures.qk_histogram import QK_HIST_EDGES

    c = d_h / d
    lo, hi = (float(e) for e in product.edges(c))
    x = np.geomspace(max(lo, 1e-9), hi, 160)
    z = 0.5 * (QK_HIST_EDGES[1:] + QK_HIST_EDGES[:-1])
    zz = np.linspace(QK_HIST_EDGES[0], QK_HIST_EDGES[-1], 161)
    return {"c": _r(c), "edges": [_r(lo), _r(hi)], "mp_x": _flat(x),
            "mp_y": _flat(np.asarray(product.density(x, c), dtype=float)),
            "z": _flat(zz), "gauss": _flat(np.exp(-zz**2 / 2) / math.sqrt(2 * math.pi)),
            "vg": _flat(vg.pdf(zz, d_h, 1 / math.sqrt(d_h))), "d_h": d_h,
            "hist_lo": _r(QK_HIST_EDGES[0]), "hist_w": _r(QK_HIST_EDGES[1] - QK_HIST_EDGES[0]),
            "hist_z": _flat(z)}


def _facts(ds: xr.Dataset) -> list:
    a = ds.attrs
    out = []
    for key, label in FACTS:
        v = a.get(key, a.get("storage_dtype") if key == "storage_dtypes" else None)
        if key == "storage_dtypes":  # the storage read: Q4_1, Q5_0, fp8_e4m3 … (tables)
            v = storage_read(ds)
        elif key == "null_storage":
            v = null_storage_read(ds)
        if v is not None and str(v) != "":
            out.append([label, str(v)])
    out.insert(5, ["layers × heads", f"{ds.sizes['layer']} × {ds.sizes['head']}"])
    if kinds_phrase(ds):  # primary kinds, as the first line counts them
        out.append(["heads by kind", kinds_phrase(ds)])
    return out


def _heads(ds: xr.Dataset, stats: list[str]) -> dict:
    top = [stats.index(t) if t in stats else -1 for t in
           np.asarray(ds["head_top_stat"].values).ravel().tolist()]
    out = {"p": _flat(ds["head_p_value"]), "q": _flat(ds["head_q_value"]),
           "flag": [int(f) for f in np.asarray(ds["head_flag"].values).ravel()],
           "top": top, "sq": _flat(ds["sigma_q"]), "sk": _flat(ds["sigma_k"])}
    out["rank"] = [int(r) for r in head_ranks(ds).ravel()]  # ties share a rank
    got = kinds_of(ds)
    if got is not None:  # primary kind, every kind ('+'-joined) and the axes that put it there
        out["kind"] = [str(k) for k in got[0].ravel()]
        out["kinds"] = [str(k) for k in got[1].ravel()]
        out["kind_axes"] = [str(k) for k in got[2].ravel()]
    out["order"] = head_order(ds)
    if out["order"] != EVIDENCE:  # the value the rank orders by (departure or an axis's)
        out["key"] = _flat(sort_key(ds, out["order"]), 3)
    if "profile_effect" in ds:  # the profile (rmtbase.scoring.profile.axes): axis -> per head
        out["prof"] = {str(a): {"v": _flat(ds["profile_value"].sel(axis=a).transpose(
            "layer", "head"), 3), "e": _flat(ds["profile_effect"].sel(axis=a).transpose(
                "layer", "head"), 3), "f": [int(f) for f in np.asarray(
                    ds["profile_flag"].sel(axis=a).transpose("layer", "head").values).ravel()],
            "k": str(ds["axis_effect"].sel(axis=a).values)} for a in ds["axis"].values}
    if "n_spikes" in ds:
        ns = np.asarray(ds["n_spikes"].values, dtype=float).ravel()
        out["ns"] = [int(n) if np.isfinite(n) and n >= 0 else None for n in ns]
        if "spike_x" in ds:
            sx = np.asarray(ds["spike_x"].transpose("layer", "head", "spike").values, dtype=float)
            sx = sx.reshape(ns.size, -1)
            out["sx"] = [_flat(row[: int(n)], 3) if n and np.isfinite(n) else []
                         for row, n in zip(sx, ns, strict=True)]
    beh = [str(v) for v in ds.data_vars if str(v).startswith("behaviour_")]
    if beh:  # the probe's behaviours (rmtbase.probe.join): name -> per-head values
        out["beh"] = {v[len("behaviour_"):]: _flat(ds[v].transpose("layer", "head"), 3)
                      for v in beh}
    return out


def _detail(ds: xr.Dataset) -> dict:
    out = {k: _flat(ds[v].transpose("layer", "head", "stat"), n)
           for k, (v, n) in _TEST_VARS.items()}
    if "distance" in ds:
        out["d"] = _flat(ds["distance"].transpose("layer", "head", "stat"), 3)
    if "effect_size" in ds:  # rmtbase.decision.effect.natural_effect
        for k, v in (("es", "effect_size"), ("bl", "null_band_lo"), ("bh", "null_band_hi")):
            out[k] = _flat(ds[v].transpose("layer", "head", "stat"), 3)
        out["ek"] = [str(k) for k in np.asarray(ds["effect_kind"].values).ravel()]
    pm = np.asarray(ds["p_method"].transpose("layer", "head", "stat").values).ravel()
    out["pm"] = "".join(P_METHODS.get(str(m), "?") for m in pm.tolist())
    if "qk_spectrum" in ds:
        out["spec"] = _flat(ds["qk_spectrum"].transpose("layer", "head", "rank"))
        out["R"] = int(ds.sizes["rank"])
    if "null_spectrum" in ds:
        out["band"] = [_flat(ds["null_spectrum"].isel(quantile=i))
                       for i in range(ds.sizes["quantile"])]
    if "qk_hist" in ds:
        out["hist"] = _flat(ds["qk_hist"].transpose("layer", "head", "qk_z"), 3)
    return out


def entry_data(label: str, ds: xr.Dataset, detail: bool = True) -> dict:
    """The JSON-ready dict of one single score (module docstring)."""
    stats = [str(s) for s in ds["stat"].values]
    e = {"label": str(label), "facts": _facts(ds),
         "L": [int(v) for v in ds["layer"].values], "H": [int(v) for v in ds["head"].values],
         "stats": stats, "groups": [str(g) for g in ds["group"].values],
         "fam": [int(f) for f in ds["in_family"].values], "alpha": _r(ds.attrs.get("alpha")),
         "shape": f"{int(ds.attrs['d'])}x{int(ds.attrs['d_h'])}", "head": _heads(ds, stats),
         "detail": bool(detail)}
    if detail:
        e.update(_detail(ds))
    return e


def report_data(ds: xr.Dataset, *, budget: int = DEFAULT_BUDGET) -> dict:
    """The whole embedded JSON of a score or collection (module docstring)."""
    from .figures import (
        EFFECT_CMAP,
        EFFECT_LIM,
        MAX_TEXT_CELLS,
        VERDICT_CMAP,
        VERDICT_LIM,
    )

    items = entries(ds)
    light = [entry_data(lab, e, detail=False) for lab, e in items]
    full_one = len(json.dumps(entry_data(*items[0], detail=True)))
    n_fit = max(2, budget // max(full_one, 1))
    n = len(items)
    pick = set(range(n)) if n <= n_fit else \
        set(np.linspace(0, n - 1, n_fit).round().astype(int).tolist())
    data_entries = [entry_data(lab, e, detail=True) if i in pick else light[i]
                    for i, (lab, e) in enumerate(items)]
    refs = {}
    for _, e in items:
        d, d_h = int(e.attrs["d"]), int(e.attrs["d_h"])
        refs.setdefault(f"{d}x{d_h}", _shape_refs(d, d_h))
    return {"entries": data_entries, "refs": refs, "n_detail": len(pick),
            "scale": {"effect_lim": EFFECT_LIM, "verdict_lim": VERDICT_LIM,
                      "text_cells": MAX_TEXT_CELLS,
                      "effect": _colours(EFFECT_CMAP), "verdict": _colours(VERDICT_CMAP)}}


def to_script_json(obj) -> str:
    """JSON safe inside ``<script type="application/json">`` (every ``<`` escaped, no NaN)."""
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


__all__ = ["DEFAULT_BUDGET", "FACTS", "P_METHODS", "entry_data", "report_data", "to_script_json"]
