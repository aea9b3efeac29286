"""Text and tables of a one-model score: head ranking, terminal table, CSV frames, summary.

Imports no other report module but :mod:`.storage_text`, so every report shape can use it."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from ..decision.kinds import kinds_of, kinds_phrase
from .storage_text import null_storage_read, storage_phrase, storage_read

__all__ = ["EFFECT_NOTE", "MEANING", "anomaly_table", "fmt_p", "has_head_effect", "head_order",
           "head_ranking", "head_ranks", "head_table", "long_table", "order_line",
           "profile_table", "summary_text"]

_CSV_VARS = ("value", "null_mean", "null_std", "z", "effect", "distance", "p_value", "p_method",
             "q_value", "percentile", "flag")
_HEAD_CSV = ("head_kind", "head_kinds", "head_kind_axes", "head_label", "head_effect", "n_spikes",
             "head_p_value", "head_p_method", "head_q_value", "head_flag", "head_top_stat",
             "head_n_stats", "sigma_q", "sigma_k")
EFFECT_NOTE = ("Effects are in each statistic's own units: a ratio to the null median (x) or a "
               "shift from it; the null band is the null's 2.5-97.5 % range in the same units. "
               "outliers (n_spikes): eigenvalues of W_QK above the 95 % quantile of the null's "
               "largest (spectral concentration, not a count of learned directions). "
               "heads.csv's head_effect (the largest |distance| in null sd) is a diagnostic of "
               "how narrow each null is and ranks nothing. Its rank column orders heads by "
               "their departure (the root mean square over the profile's tested axes of each "
               "axis's effect in units of its null band, one-sided; docs/kinds.md), or by the "
               "axis given to --sort-by; equal values share a rank.")
MEANING = {
    "spectrum": "the singular values of W_QK are not those of independent Gaussian factors: "
                "structure in how query and key directions are arranged (rank, alignment); at "
                "finite d heavy-tailed entries can also move them (use --null permutation to "
                "separate)",
    "product law": "the entries of W_QK are not distributed as for independent Gaussian "
                   "factors (variance-gamma): alignment of W_Q and W_K, or non-Gaussian entries",
    "entry law": "the entries of W_Q / W_K are not i.i.d. Gaussian at the head's sigma: "
                 "training, but also a non-Gaussian initialisation or a storage artefact; says "
                 "nothing about structure across entries",
}


def long_table(ds: xr.Dataset):
    """Long-format ``pandas.DataFrame``: one row per (layer, head, stat), with σ_Q, σ_K."""
    df = ds[[v for v in _CSV_VARS if v in ds]].to_dataframe().reset_index()
    sig = ds[["sigma_q", "sigma_k"]].to_dataframe().reset_index()
    return df.merge(sig, on=["layer", "head"], how="left")


def head_table(ds: xr.Dataset):
    """DataFrame, one row per (layer, head): ``rank``, ``departure``, then the decision and its
    inputs (``head_effect``, ``n_spikes``, ``behaviour_*`` where present)."""
    behaviour = [v for v in ds.data_vars if str(v).startswith("behaviour_")]  # rmtbase.probe.join
    df = ds[[v for v in _HEAD_CSV if v in ds] + behaviour].to_dataframe().reset_index()
    if "profile_effect" in ds:  # the profile: each axis's effect (value where descriptive), p
        for a in ds["axis"].values:
            eff = ds["profile_effect"].sel(axis=a)
            if not np.isfinite(eff.values).any():
                eff = ds["profile_value"].sel(axis=a)
            df[str(a)] = eff.transpose("layer", "head").values.ravel()
            p = ds["profile_p"].sel(axis=a).transpose("layer", "head").values.ravel()
            if np.isfinite(p).any():
                df[f"{a}_p"] = p
    ranks = head_ranks(ds)
    li = {int(x): i for i, x in enumerate(ds["layer"].values)}
    hi = {int(x): i for i, x in enumerate(ds["head"].values)}
    df.insert(2, "rank", [int(ranks[li[int(a)], hi[int(b)]]) for a, b in
                          zip(df["layer"], df["head"], strict=True)])
    got = kinds_of(ds)
    if got is not None:  # the kind of each head (rmtbase.decision.kinds)
        for name, arr in zip(("head_kind", "head_kinds", "head_kind_axes"), got, strict=True):
            if name not in df:
                df[name] = [str(arr[li[int(a)], hi[int(b)]]) for a, b in
                            zip(df["layer"], df["head"], strict=True)]
    if "profile_effect" in ds:
        from ..decision.order import departure

        dep = departure(ds)
        df.insert(3, "departure", [float(dep[li[int(a)], hi[int(b)]]) for a, b in
                                   zip(df["layer"], df["head"], strict=True)])
    return df


def has_head_effect(ds: xr.Dataset) -> bool:
    """Whether the score carries the diagnostic ``head_effect`` (largest |distance| in null
    sd; scores written before it, or by other tools, do not)."""
    return "head_effect" in ds


def head_order(ds: xr.Dataset, by: str | None = None) -> str:
    """The head order: ``by``, else the score's ``head_order`` attr, else departure (head p without
    a profile)."""
    from ..decision.order import DEFAULT_ORDER, EVIDENCE

    if "profile_effect" not in ds:
        return EVIDENCE
    return str(by or ds.attrs.get("head_order") or DEFAULT_ORDER)


def head_ranks(ds: xr.Dataset, by: str | None = None) -> np.ndarray:
    """(layer, head) ranks in :func:`head_order`: 1 first, equal keys equal ("min") ranks
    (:func:`rmtbase.decision.order.ranks`)."""
    from ..decision.order import ranks, sort_key

    return ranks(sort_key(ds, head_order(ds, by)))


def head_ranking(ds: xr.Dataset, by: str | None = None) -> list[tuple[int, int]]:
    """(layer, head) pairs in :func:`head_order`: by default departure from the null in band units
    (:func:`rmtbase.decision.order.departure`), largest first; ``by`` an axis or ``"p"``. Ties
    share a rank and keep (layer, head) order."""
    r = head_ranks(ds, by)
    L, H = r.shape
    keys = sorted((r[i, j], i, j) for i in range(L) for j in range(H))
    layers, heads = ds["layer"].values, ds["head"].values
    return [(int(layers[k[1]]), int(heads[k[2]])) for k in keys]


def fmt_p(p: float) -> str:
    if not np.isfinite(p):
        return "nan"
    from ..decision.tails import P_MIN

    return f"<{P_MIN:.0e}" if p <= P_MIN else f"{p:.2g}"


def anomaly_table(ds: xr.Dataset, n: int = 3) -> str:
    """The terminal table: the headline, then per profile axis the ``n`` heads departing most
    (without a profile: the ``n`` smallest head p)."""
    if "profile_effect" in ds:
        return _headline(ds) + "\n" + profile_table(ds, n) + "\n" + order_line(ds, n)
    lines = [_headline(ds), f"{'layer':>5} {'head':>4} {'head p':>8} {'q':>8}  "
                            f"{'strongest statistic':<22} {'value':>11} {'null mean':>11}"]
    for li, hi in head_ranking(ds)[: max(0, int(n))]:
        h = ds.sel(layer=li, head=hi)
        top = str(h["head_top_stat"].values)
        if not top:
            continue
        s = h.sel(stat=top)
        lines.append(f"{li:>5} {hi:>4} {fmt_p(float(h['head_p_value'])):>8} "
                     f"{fmt_p(float(h['head_q_value'])):>8}  {top:<22} "
                     f"{float(s['value']):>11.4g} {float(s['null_mean']):>11.4g}")
    return "\n".join(lines)


def order_line(ds: xr.Dataset, n: int = 3) -> str:
    """The first ``n`` heads in :func:`head_order` with rank, key and primary kind; heads without
    a key are skipped."""
    from ..decision.order import DEPARTURE, EVIDENCE, sort_key

    by = head_order(ds)
    key, r = sort_key(ds, by), head_ranks(ds, by)
    kinds = kinds_of(ds)
    li = {int(x): i for i, x in enumerate(ds["layer"].values)}
    hi = {int(x): i for i, x in enumerate(ds["head"].values)}
    items = []
    for layer, head in head_ranking(ds, by):
        i, j = li[layer], hi[head]
        if len(items) >= int(n) or not np.isfinite(key[i, j]):
            break  # heads without a key (a delta's unchanged heads, unscored) come last
        val = fmt_p(-key[i, j]) if by == EVIDENCE else f"{key[i, j]:.3g}"
        kind = f" {kinds[0][i, j]}" if kinds is not None else ""
        items.append(f"{r[i, j]} L{layer}H{head} {val}{kind}")
    what = {DEPARTURE: "departure (null-band units, root mean square over axes)",
            EVIDENCE: "head p"}.get(by, f"{by} (null-band units)")
    return f"Heads by {what}; rank, head, value, kind (docs/kinds.md): " + ", ".join(items)


def _headline(ds: xr.Dataset) -> str:
    n = int(ds["head_flag"].size)
    same = int(ds["unchanged"].sum()) if "unchanged" in ds else 0  # a delta's untouched heads
    of = f"{n - same} changed heads ({same} unchanged, not scored)" if same else f"{n} heads"
    return (f"{ds.attrs.get('model', '?')}  ({ds.attrs.get('architecture', '?')}; "
            f"d={ds.attrs.get('d', '?')}, d_h={ds.attrs.get('d_h', '?')}, "
            f"{storage_phrase(ds)}): {int(ds['head_flag'].sum())} of "
            f"{of} differ from the null (BH over heads, FDR {ds.attrs.get('alpha')})"
            + (f"; by kind: {kinds}" if (kinds := kinds_phrase(ds)) else ""))


def _effect_text(kind: str, eff: float) -> str:
    return f"{eff:.3g}x" if kind == "ratio" else f"{eff:+.3g}"


def profile_table(ds: xr.Dataset, top: int = 3) -> str:
    """The profile as text: per axis its reading, null 95 % band, flagged count and the ``top``
    heads by |effect| (``*`` flagged); descriptive axes give range and largest heads."""
    rows = []
    layers, heads = ds["layer"].values, ds["head"].values
    for a in ds["axis"].values:
        eff = ds["profile_effect"].sel(axis=a).transpose("layer", "head").values
        val = ds["profile_value"].sel(axis=a).transpose("layer", "head").values
        kind = str(ds["axis_effect"].sel(axis=a).values)
        if not np.isfinite(eff).any():
            order = np.argsort(-np.nan_to_num(val, nan=-np.inf), axis=None)[:top]
            order = [k for k in order if np.isfinite(val.flat[k])]
            best = ", ".join(f"L{layers[i]}H{heads[j]} {val[i, j]:.3g}" for i, j in
                             (np.unravel_index(k, val.shape) for k in order))
            rows.append((str(a), kind, f"{np.nanmin(val):.3g} ... {np.nanmax(val):.3g}", "-",
                         best))
            continue
        lo = float(np.nanmedian(ds["profile_band_lo"].sel(axis=a).values))
        hi = float(np.nanmedian(ds["profile_band_hi"].sel(axis=a).values))
        flag = ds["profile_flag"].sel(axis=a).transpose("layer", "head").values
        centre = 1.0 if kind == "ratio" else 0.0
        order = np.argsort(-np.nan_to_num(np.abs(eff - centre), nan=-1.0), axis=None)[:top]
        order = [k for k in order if np.isfinite(eff.flat[k])]  # unscored heads are not "top"
        best = ", ".join(
            f"L{layers[i]}H{heads[j]} {val[i, j]:.3g} ({_effect_text(kind, eff[i, j])}"
            f"{'*' if flag[i, j] else ''})"
            for i, j in (np.unravel_index(k, eff.shape) for k in order))
        band = f"[{_effect_text(kind, lo)}, {_effect_text(kind, hi)}]"
        rows.append((str(a), kind, band, f"{int(flag.sum())}/{flag.size}", best))
    head = ("axis", "effect", "null band / range", "flagged", "top heads: value (effect), "
            "* flagged")
    width = [max(len(r[k]) for r in [head, *rows]) for k in range(4)]
    lines = ["Profile: how each head departs, in the statistic's own units "
             "(rmtbase.scoring.profile.axes)"]
    for r in [head, *rows]:
        lines.append("  ".join(x.ljust(w) for x, w in zip(r[:4], width, strict=True))
                     + "  " + r[4])
    return "\n".join(lines)


def summary_text(ds: xr.Dataset, top: int = 3) -> str:
    """The whole ``summary.txt``: decision table, then what was tested and how to read it."""
    a = ds.attrs
    out = [anomaly_table(ds, top), ""]
    if has_head_effect(ds):
        out.append(EFFECT_NOTE)
    if kinds_phrase(ds):
        out.append("Kinds (rmtbase.decision.kinds, docs/kinds.md): a head is concentrated, "
                   "aligned, anti-aligned, symmetric, directional, input-focused or heavy-tailed "
                   "when that profile axis is flagged with that sign; its primary kind "
                   "(heads.csv's head_kind, counted in the first line) is the one it departs "
                   "on most in null-band units; near-null: no axis flagged.")
    out.append(f"Null: {a.get('null', '?')}.")
    st = a.get("storage_dtypes", a.get("storage_dtype", "float32"))
    out.append(f"Storage of W_Q/W_K read: {storage_read(ds)} (float storage in the checkpoint: "
               f"{st}; quantisation: {a.get('quantisation', 'none')}); null drawn at: "
               f"{null_storage_read(ds)}.")
    fam = [s for s in str(a.get("decision_family", "")).split(",") if s]
    axes = [s for s in str(a.get("decision_axes", "")).split(",") if s]  # decision.combined
    out.append(f"Decision: per head, a Cauchy combination of {len(fam)} statistics (p capped at "
               f"1/2, so none can cancel the others) calibrated on joint null draws" +
               (f", and one of {len(axes)} profile axes ({', '.join(axes)}) calibrated on the "
                "profile null, the two by Bonferroni (head p = min(1, 2 min))" if axes else "") +
               ", then "
               f"Benjamini-Hochberg over the {ds['head_flag'].size} heads at FDR {a.get('alpha')}. Per-statistic z, p and q in scores.csv are "
               "descriptive.")
    if a.get("duplicates"):
        out.append(f"Counted once: {a['duplicates']}.")
    if a.get("resolution_note"):
        out.append(f"Resolution: {a['resolution_note']}.")
    if a.get("stopping_note"):
        out.append(f"Draws: {a['stopping_note']}.")
    if a.get("unreliable"):
        out.append(f"Left out of the decision (lattice-sensitive, no matched null): "
                   f"{a['unreliable']}.")
    methods = ds["p_method"].values.ravel()
    n_gpd = int(np.sum(methods == "gpd"))
    if n_gpd:
        out.append(f"{n_gpd} per-statistic p-values lie beyond the null draws and are "
                   "extrapolated with a generalized Pareto tail (p_method = gpd).")
    nan = json.loads(a.get("nan_tests", "{}") or "{}")
    if nan:
        out.append("Tests without a p-value (not in any family): " + "; ".join(
            f"{k}: {v['count']} heads ({v['reason']})" for k, v in sorted(nan.items())))
    else:
        out.append("Every test has a p-value (no NaN statistics).")
    out.append("")
    out.append("What a departure means, by group of statistics:")
    groups = {str(g) for g in ds["group"].values} if "group" in ds else set()
    for g, text in MEANING.items():
        if g in groups:
            out.append(f"- {g}: {text}.")
    return "\n".join(out) + "\n"
