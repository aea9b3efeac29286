"""The heavy-tail table in words: the terminal's and ``summary.txt``'s lines (at most
:data:`MAX_LINES`, each at most 200 characters) and the ``--json`` document.

Per component kind: α's range, how many matrices the folklore band 2 ≤ α ≤ 6 calls "well trained"
beside the share of the null's Gaussian draws it calls so, and how many differ from random by α's
p (Benjamini–Hochberg at the table's fdr); then the model's means against their null
(WeightWatcher's ``get_summary()``), the matrices furthest from their null, and those the metrics
do not describe. A collection (checkpoints): one line per entry."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

#: The terminal block's longest length in lines.
MAX_LINES = 24
#: Entries of a collection listed before "+N more".
_ENTRIES = 14


def _g(x, digits: int = 3) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.{digits}g}"


def kind_rows(ht: xr.Dataset) -> list[dict]:
    """One dict per component kind with a described matrix: kind, n (matrices), shape, lo and
    hi (α's range), well (folklore 'well trained'), null_well (the null draws' share), flagged
    (BH), null (median, lo, hi of the null's α median and band over the layers)."""
    out = []
    for comp in ht["component"].values:
        cell = ht.sel(component=comp)
        a = cell.sel(metric="alpha")
        ok = (cell["rows"].values > 0) & np.isfinite(a["value"].values)
        if not ok.any():
            continue
        v = a["value"].values[ok]
        first = int(np.argmax(ok))
        out.append({
            "kind": str(comp), "n": int(ok.sum()),
            "shape": f"{int(cell['rows'].values[first])}x{int(cell['cols'].values[first])}",
            "lo": float(v.min()), "hi": float(v.max()),
            "well": int((cell["folklore"].values[ok] == "well trained").sum()),
            "null_well": float(np.mean(cell["null_well_trained"].values[ok])),
            "flagged": int(cell["alpha_flag"].values[ok].sum()) if "alpha_flag" in cell else 0,
            "null": tuple(float(np.median(a[k].values[ok]))
                          for k in ("null_median", "null_lo", "null_hi"))})
    return out


def _arrays(ht: xr.Dataset, *names, metric: str = "alpha"):
    """(layer, component, *arrays) over the present matrices: each variable of ``names`` at
    ``metric`` where it has that dimension."""
    li, ci = np.nonzero(ht["rows"].transpose("layer", "component").values > 0)
    out = []
    for n in names:
        v = ht[n].sel(metric=metric) if "metric" in ht[n].dims else ht[n]
        out.append(v.transpose("layer", "component").values[li, ci])
    return (ht["layer"].values[li].astype(int), ht["component"].values[ci].astype(str), *out)


def side_units(value, lo, median, hi):
    """(value − median) in units of the null's band on value's side: / (hi − median) above the
    median, / (median − lo) below (α's null is skewed: a symmetric half band mis-ranks)."""
    value, lo, median, hi = (np.asarray(x, float) for x in (value, lo, median, hi))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(value >= median, (value - median) / (hi - median),
                        (value - median) / (median - lo))


def furthest(ht: xr.Dataset, top: int = 3) -> list[tuple]:
    """(layer, component, α, null median, lo, hi, p) of the ``top`` matrices most unlike their
    null: smallest p first, then furthest in :func:`side_units`."""
    layer, comp, *rest = _arrays(ht, "value", "null_median", "null_lo", "null_hi", "p_value")
    v, med, lo, hi, p = (r.astype(float) for r in rest)
    away = np.abs(side_units(v, lo, med, hi))
    ok = np.flatnonzero(np.isfinite(away) & np.isfinite(p))
    order = ok[np.lexsort((-away[ok], p[ok]))][:top]
    return [(int(layer[i]), str(comp[i]), *(float(r[i]) for r in rest)) for i in order]


def undescribed(ht: xr.Dataset) -> list[tuple[int, str, str]]:
    """(layer, component, reason) of the matrices without α."""
    layer, comp, value, reason = _arrays(ht, "value", "reason")
    return [(int(layer[i]), str(comp[i]), str(reason[i]) or "no power-law fit")
            for i in np.flatnonzero(~np.isfinite(value.astype(float)))]


def _listed(items: list[str], width: int) -> str:
    """``items`` joined by ", " within ``width`` characters, the rest as "+N more"."""
    out, used = [], 0
    for k, text in enumerate(items):
        if used + len(text) + 12 > width:
            return ", ".join(out) + f" +{len(items) - k} more"
        out.append(text)
        used += len(text) + 2
    return ", ".join(out)


def _table(rows: list[dict]) -> list[str]:
    head = (f"{'kind':<10} {'n':>3} {'shape':>10}  {'alpha range':<13} {'WW well trained':>15}"
            f"  {'null draws so':>13}  {'unlike random':>13}  null alpha median [95 %]")
    lines = [head]
    for r in rows:
        med, lo, hi = r["null"]
        lines.append(f"{r['kind'][:10]:<10} {r['n']:>3} {r['shape']:>10}  "
                     f"{_g(r['lo']) + '..' + _g(r['hi']):<13} "
                     f"{str(r['well']) + ' of ' + str(r['n']):>15}  "
                     f"{r['null_well']:>13.0%}  {str(r['flagged']) + ' of ' + str(r['n']):>13}"
                     f"  {_g(med)} [{_g(lo)}, {_g(hi)}]")
    return lines


def summary_means(ht: xr.Dataset, names=("alpha", "alpha_weighted", "rand_distance")) -> str:
    """"alpha 3.9 [7.9, 9.5] p 0.005; …": the model's means, the null's 95 % band, the p."""
    from .tables import fmt_p

    parts = []
    for name in names:
        s = ht.sel(summary=name)
        if int(s["summary_matrices"]) == 0:
            continue
        parts.append(f"{name} {_g(float(s['summary_value']))} [{_g(float(s['summary_null_lo']))}"
                     f", {_g(float(s['summary_null_hi']))}] p {fmt_p(float(s['summary_p']))}")
    return "; ".join(parts)


def terminal_lines(ht: xr.Dataset, top: int = 3) -> list[str]:
    """The block (module docstring) of one model's table, at most :data:`MAX_LINES` lines."""
    from .tables import fmt_p

    rows = kind_rows(ht)
    n = sum(r["n"] for r in rows)
    fdr = float(ht.attrs.get("fdr", 0.05))
    lines = [f"Heavy tails of {ht.attrs.get('model', 'the model')} (WeightWatcher 0.7.7 "
             f"metrics): {n} matrices with alpha, {ht.attrs.get('draws', '?')} null draws per "
             "shape"]
    lines += _table(rows)[: MAX_LINES - 8]
    well = sum(r["well"] for r in rows)
    flagged = sum(r["flagged"] for r in rows)
    share = float(np.mean([r["null_well"] for r in rows])) if rows else math.nan
    lines.append(f"The folklore band calls {well} of {n} 'well trained' (it calls {share:.0%} of "
                 f"Gaussian matrices so); alpha's p says {flagged} of {n} differ from random "
                 f"(BH, FDR {fdr:g}).")
    means = summary_means(ht)
    if means:
        lines.append(f"Means over the matrices (WeightWatcher get_summary) [null 95 %]: {means}")
    far = furthest(ht, top)
    if far:
        lines.append("Furthest from random: " + _listed(
            [f"L{ly} {c} {_g(v)} (null {_g(m)} [{_g(lo)}, {_g(hi)}], p {fmt_p(p)})"
             for ly, c, v, m, lo, hi, p in far], 178))
    missing = undescribed(ht)
    if missing:
        lines.append(f"No alpha for {len(missing)}: " + _listed(
            [f"L{ly} {c} ({why})" for ly, c, why in missing], 170))
    return [line[:200] for line in lines[:MAX_LINES]]


def _entry_line(e: xr.Dataset, label: str) -> str:
    a = e["value"].sel(metric="alpha").values
    ok = (e["rows"].values > 0) & np.isfinite(a)
    well = int((e["folklore"].values[ok] == "well trained").sum())
    flagged = int(e["alpha_flag"].values[ok].sum())
    step = e["step"].item() if "step" in e.coords else None
    at = f" (step {int(step)})" if step is not None and np.isfinite(step) else ""
    median = float(np.median(a[ok])) if ok.any() else None
    return (f"  {label[:40]}{at}: median alpha {_g(median)}, {well} of {int(ok.sum())} "
            f"'well trained', {flagged} unlike random")


def collection_lines(cds: xr.Dataset, dim: str = "checkpoint") -> list[str]:
    """One line per entry of a collection (at most :data:`_ENTRIES`, then "+N more"): median
    α, the folklore's count, the matrices unlike random; then the last entry's kinds."""
    labels = [str(x) for x in cds[dim].values]
    fdr = float(cds.attrs.get("fdr", 0.05))
    names = {str(x) for x in cds["model_name"].values} if "model_name" in cds else set()
    of = f" of {names.pop()}" if len(names) == 1 else ""
    lines = [f"Heavy tails of {len(labels)} {dim}s{of} ({labels[0]} .. {labels[-1]}; "
             f"WeightWatcher 0.7.7 metrics), {cds.attrs.get('draws', '?')} null draws per "
             f"shape, BH FDR {fdr:g}"]
    cut = len(labels) > _ENTRIES
    for k, label in enumerate(labels):
        if cut and _ENTRIES - 2 <= k < len(labels) - 2:
            if k == _ENTRIES - 2:
                lines.append(f"  ... {len(labels) - _ENTRIES} more {dim}s")
            continue
        lines.append(_entry_line(cds.sel({dim: label}), label))
    last = cds.sel({dim: labels[-1]})
    room = MAX_LINES - len(lines) - 1
    if room >= 3:
        lines.append(f"The last {dim} ({labels[-1][:40]}):")
        lines += _table(kind_rows(last))[:room]
    return [line[:200] for line in lines[:MAX_LINES]]


def describe_lines(model, **kw) -> list[str]:
    """``rmtbase heavy-tail --describe``: one line per matrix (layer, kind, shape, M = min(m, n)
    eigenvalues, Q = max/min, storage, the null's storage), as WeightWatcher's ``describe()``;
    ``kw``: :func:`rmtbase.scoring.matrices.heavy_tail_inputs.describe`'s."""
    from ..scoring.matrices.heavy_tail_inputs import describe

    rows = describe(model, **kw)
    lines = [f"{'layer':>5}  {'kind':<10} {'rows':>6} {'cols':>6} {'M':>6} {'Q':>6}  "
             f"{'storage':<10} null storage"]
    for layer, name, m, n, storage, null in rows:
        lines.append(f"{layer:>5}  {name[:10]:<10} {m:>6} {n:>6} {min(m, n):>6} "
                     f"{max(m, n) / min(m, n):>6.2f}  {storage:<10} {null}")
    lines.append(f"{len(rows)} matrices")
    return lines


__all__ = ["MAX_LINES", "collection_lines", "describe_lines", "furthest", "kind_rows",
           "side_units", "summary_means",
           "terminal_lines", "undescribed"]
