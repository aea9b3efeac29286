"""Text and tables of a one-model score: the ranking of heads, the terminal table, the CSV
frames and ``summary.txt``. Every report shape (:mod:`.write`) uses them; nothing here imports
another report module, so the collection and component reports can import from here."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

_CSV_VARS = ("value", "null_mean", "null_std", "z", "effect", "distance", "p_value", "p_method",
             "q_value", "percentile", "flag")
_HEAD_CSV = ("head_effect", "n_spikes", "head_p_value", "head_p_method", "head_q_value",
             "head_flag", "head_top_stat", "head_n_stats", "sigma_q", "sigma_k")
EFFECT_NOTE = ("Heads are ranked by effect: the head's largest |distance| from the null over its "
               "decision statistics, in null standard deviations of a variance-stabilised "
               "statistic (uncapped; null heads lie at about 1-4; a diagnostic of how narrow "
               "each null is, not of how much the head departs: see effect_size and the "
               "profile). distance: the strongest statistic's signed distance. spikes: leading "
               "eigenvalues of W_QK above the 95 % quantile of the null's largest eigenvalue "
               "(spectral concentration, not a count of learned directions; '-' where not "
               "scored).")
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
    """``pandas.DataFrame`` with one row per (layer, head) in (layer, head) order: ``rank``
    (1 = most anomalous, :func:`head_ranking`), then the decision and its inputs (with
    ``head_effect`` and ``n_spikes`` where scored, and the probe's ``behaviour_*`` where
    joined)."""
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
    pos = {h: r for r, h in enumerate(head_ranking(ds), start=1)}
    df.insert(2, "rank", [pos[(int(li), int(hi))] for li, hi in zip(df["layer"], df["head"],
                                                                       strict=True)])
    return df


def has_head_effect(ds: xr.Dataset) -> bool:
    """Whether the score carries the uncapped per-head distance ``head_effect`` (scores written
    before it, or by other tools, do not: the report then falls back to the head p-value)."""
    return "head_effect" in ds


def head_ranking(ds: xr.Dataset) -> list[tuple[int, int]]:
    """(layer, head) pairs, most anomalous first.

    With ``head_effect`` (the head's largest |distance| from the null in null sd, uncapped):
    largest first, ties by smallest head p. Without it (older scores): smallest head p, then
    largest |effect| of the family statistics. Index order only breaks exact ties."""
    p = ds["head_p_value"].fillna(1.0).values
    if has_head_effect(ds):
        first = -ds["head_effect"].fillna(-1.0).values
        second = p
    else:
        first = p
        second = -np.abs(ds["effect"].where(ds["in_family"])).fillna(0.0).max("stat").values
    L, H = p.shape
    keys = sorted((first[i, j], second[i, j], i, j) for i in range(L) for j in range(H))
    layers, heads = ds["layer"].values, ds["head"].values
    return [(int(layers[k[2]]), int(heads[k[3]])) for k in keys]


def fmt_p(p: float) -> str:
    if not np.isfinite(p):
        return "nan"
    from ..decision.tails import P_MIN

    return f"<{P_MIN:.0e}" if p <= P_MIN else f"{p:.2g}"


def _fmt_effect(x: float) -> str:
    """3 significant digits below 1000, whole numbers above (no exponent in the table)."""
    return "nan" if not np.isfinite(x) else f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def _spikes(h: xr.Dataset) -> str:
    if "n_spikes" not in h:
        return "-"
    n = h["n_spikes"].values
    return str(int(n)) if np.isfinite(n) and n >= 0 else "-"


def anomaly_table(ds: xr.Dataset, n: int = 10) -> str:
    """A short text table: the decision, then the ``n`` most anomalous heads (ranked by
    :func:`head_ranking`). With ``head_effect``: each head's distance from the null in null sd
    and its spike count (``-`` where not scored), and the strongest statistic's signed
    distance; without: the statistic's (capped) effect and p."""
    new = has_head_effect(ds)
    if new:
        header = (f"{'layer':>5} {'head':>4} {'effect':>7} {'spikes':>6} {'head p':>8} {'q':>8}  "
                  f"{'strongest statistic':<22} {'value':>11} {'null mean':>11} {'distance':>8}")
    else:
        header = (f"{'layer':>5} {'head':>4} {'head p':>8} {'q':>8}  {'strongest statistic':<22} "
                  f"{'value':>11} {'null mean':>11} {'effect':>7} {'p':>8}")
    lines = [_headline(ds), header]
    for li, hi in head_ranking(ds)[: max(0, int(n))]:
        h = ds.sel(layer=li, head=hi)
        top = str(h["head_top_stat"].values)
        if not top:
            continue
        s = h.sel(stat=top)
        p, q = fmt_p(float(h["head_p_value"])), fmt_p(float(h["head_q_value"]))
        stat = f"{top:<22} {float(s['value']):>11.4g} {float(s['null_mean']):>11.4g}"
        if new:
            dist = float(s["distance"]) if "distance" in s else np.nan
            lines.append(f"{li:>5} {hi:>4} {_fmt_effect(float(h['head_effect'])):>7} "
                         f"{_spikes(h):>6} {p:>8} {q:>8}  {stat} {_fmt_effect(dist):>8}")
        else:
            lines.append(f"{li:>5} {hi:>4} {p:>8} {q:>8}  {stat} {float(s['effect']):>7.2f} "
                         f"{fmt_p(float(s['p_value'])):>8}")
    return "\n".join(lines)


def _headline(ds: xr.Dataset) -> str:
    return (f"{ds.attrs.get('model', '?')}  ({ds.attrs.get('architecture', '?')}; "
            f"d={ds.attrs.get('d', '?')}, d_h={ds.attrs.get('d_h', '?')}, "
            f"{ds.attrs.get('storage_dtype', 'float32')}): {int(ds['head_flag'].sum())} of "
            f"{int(ds['head_flag'].size)} heads differ from the null (BH over heads, "
            f"alpha={ds.attrs.get('alpha')})")


def profile_text(ds: xr.Dataset, top: int = 3) -> str:
    """The profile block of ``summary.txt``: per axis with a null, the null's band and the
    ``top`` heads by |effect| (value, effect, flag); per descriptive axis its range."""
    lines = ["Profile (how each head departs, in the statistic's own units; "
             "rmtbase.scoring.profile):"]
    for a in ds["axis"].values:
        eff = ds["profile_effect"].sel(axis=a).transpose("layer", "head").values
        val = ds["profile_value"].sel(axis=a).transpose("layer", "head").values
        kind = str(ds["axis_effect"].sel(axis=a).values)
        if not np.isfinite(eff).any():
            lines.append(f"- {a} ({kind}): {np.nanmin(val):.4g} ... {np.nanmax(val):.4g}")
            continue
        lo = float(np.nanmedian(ds["profile_band_lo"].sel(axis=a).values))
        hi = float(np.nanmedian(ds["profile_band_hi"].sel(axis=a).values))
        flag = ds["profile_flag"].sel(axis=a).transpose("layer", "head").values
        centre = 1.0 if kind == "ratio" else 0.0
        order = np.argsort(-np.nan_to_num(np.abs(eff - centre), nan=-1.0), axis=None)[:top]
        layers, heads = ds["layer"].values, ds["head"].values
        best = ", ".join(
            f"L{layers[i]}H{heads[j]} {val[i, j]:.3g} ("
            + (f"{eff[i, j]:.3g}x the null median" if kind == "ratio"
               else f"{eff[i, j]:+.3g} from the null median")
            + f"{', flagged' if flag[i, j] else ''})"
            for i, j in (np.unravel_index(k, eff.shape) for k in order))
        band = f"[{lo:.3g}x, {hi:.3g}x]" if kind == "ratio" else f"[{lo:+.3g}, {hi:+.3g}]"
        lines.append(f"- {a}: null band {band}, {int(flag.sum())} of "
                     f"{flag.size} heads flagged; top: {best}")
    return "\n".join(lines)


def summary_text(ds: xr.Dataset, top: int = 10) -> str:
    """The whole ``summary.txt``: decision table, then what was tested and how to read it."""
    a = ds.attrs
    out = [anomaly_table(ds, top), ""]
    if "profile_effect" in ds:
        out += [profile_text(ds), ""]
    if has_head_effect(ds):
        out.append(EFFECT_NOTE)
    out.append(f"Null: {a.get('null', '?')}.")
    st = a.get("storage_dtypes", a.get("storage_dtype", "float32"))
    out.append(f"Storage of W_Q/W_K in the checkpoint: {st}; quantisation detected: "
               f"{a.get('quantisation', 'none')}; null storage: {a.get('null_storage', st)}.")
    fam = [s for s in str(a.get("decision_family", "")).split(",") if s]
    out.append(f"Decision: per head, a Cauchy combination of {len(fam)} statistics (p capped at "
               f"1/2, so none can cancel the others) calibrated on joint null draws, then "
               f"Benjamini-Hochberg over the {ds['head_flag'].size} heads at alpha={a.get('alpha')}. Per-statistic z, p and q in scores.csv are "
               "descriptive.")
    if a.get("duplicates"):
        out.append(f"Counted once: {a['duplicates']}.")
    if a.get("resolution_note"):
        out.append(f"Resolution: {a['resolution_note']}.")
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
