"""Reports of a score: terminal summary, CSV, netCDF and figures, written all-or-nothing.

:func:`write_report` writes the whole output into a temporary sibling folder and swaps it in
at the end (:mod:`rmtbase.scoring.output`), so a folder is either a complete run's output
(``manifest.json`` lists its files) or absent; a failed or interrupted run leaves the previous
output as it was, and files of an earlier run never mix with a new one.

Contents: ``scores.nc`` (the Dataset), ``heads.csv`` (one row per head: the decision),
``scores.csv`` (one row per head × statistic), ``summary.txt`` (the null, the storage, the
decision, the most anomalous heads, NaN tests, how to read a flag) and ``figures/``:
``verdict.png``, ``effect_<group>.png`` (spectrum, product law, entry law), ``effect_<stat>.png``
for the headline statistics, ``spectrum_L<l>_H<h>.png`` for the most anomalous heads and the
least anomalous one, ``entropy_sigma.png``; and ``report.html`` (:mod:`rmtbase.scoring.html`:
one self-contained page with the per-head drill-down, some of these figures embedded). With a
whole-matrix score also ``components.nc``, ``components.csv`` and
``figures/components_weibull_k.png``, ``figures/components_terminal_k.png``
(:mod:`rmtbase.scoring.component_report`).
A collection (checkpoints or models) is written by :mod:`rmtbase.scoring.collection_report`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

from ..errors import InputError
from . import figures as fig_mod
from .output import OutputFolder

#: Statistics that get their own heatmap file.
HEADLINE_STATS = ("qk.npr", "qk.lambda_max", "qk.spectral_entropy", "qk.condition_number",
                  "qk.excess_kurtosis", "q.weibull_k", "k.weibull_k", "q.entropy")
_CSV_VARS = ("value", "null_mean", "null_std", "z", "effect", "p_value", "p_method", "q_value",
             "percentile", "flag")
_HEAD_CSV = ("head_p_value", "head_p_method", "head_q_value", "head_flag", "head_top_stat",
             "head_n_stats", "sigma_q", "sigma_k")
#: Figures embedded in report.html (the rest stay in figures/), with their captions.
HTML_FIGURES = {
    "effect_spectrum.png": "Effect (normal score in the null, fixed ±6 scale) of each spectral "
                           "statistic over layer × head; × marks a descriptive per-statistic flag.",
    "entropy_sigma.png": "Entropy of the entries against their std, with the Gaussian and "
                         "variance-gamma references and each head's null.",
}
GROUP_FILES = {"spectrum": "effect_spectrum", "product law": "effect_product_law",
               "entry law": "effect_entry_law"}
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
    """``pandas.DataFrame`` with one row per (layer, head): the decision and its inputs."""
    return ds[[v for v in _HEAD_CSV if v in ds]].to_dataframe().reset_index()


def head_ranking(ds: xr.Dataset) -> list[tuple[int, int]]:
    """(layer, head) pairs, most anomalous first: smallest head p, then largest |effect|."""
    p = ds["head_p_value"].fillna(1.0).values
    eff = np.abs(ds["effect"].where(ds["in_family"])).fillna(0.0).max("stat").values
    L, H = p.shape
    keys = sorted((p[i, j], -eff[i, j], i, j) for i in range(L) for j in range(H))
    layers, heads = ds["layer"].values, ds["head"].values
    return [(int(layers[k[2]]), int(heads[k[3]])) for k in keys]


def _fmt_p(p: float) -> str:
    if not np.isfinite(p):
        return "nan"
    from .tails import P_MIN

    return f"<{P_MIN:.0e}" if p <= P_MIN else f"{p:.2g}"


def anomaly_table(ds: xr.Dataset, n: int = 10) -> str:
    """A short text table: the decision, then the ``n`` most anomalous heads."""
    nh = int(ds["head_flag"].size)
    flagged = int(ds["head_flag"].sum())
    lines = [
        f"{ds.attrs.get('model', '?')}  ({ds.attrs.get('architecture', '?')}; "
        f"d={ds.attrs.get('d', '?')}, d_h={ds.attrs.get('d_h', '?')}, "
        f"{ds.attrs.get('storage_dtype', 'float32')}): {flagged} of {nh} heads differ from the "
        f"null (BH over heads, alpha={ds.attrs.get('alpha')})",
        f"{'layer':>5} {'head':>4} {'head p':>8} {'q':>8}  {'strongest statistic':<22} "
        f"{'value':>11} {'null mean':>11} {'effect':>7} {'p':>8}",
    ]
    for li, hi in head_ranking(ds)[: max(0, int(n))]:
        h = ds.sel(layer=li, head=hi)
        top = str(h["head_top_stat"].values)
        if not top:
            continue
        s = h.sel(stat=top)
        lines.append(
            f"{li:>5} {hi:>4} {_fmt_p(float(h['head_p_value'])):>8} "
            f"{_fmt_p(float(h['head_q_value'])):>8}  {top:<22} {float(s['value']):>11.4g} "
            f"{float(s['null_mean']):>11.4g} {float(s['effect']):>7.2f} "
            f"{_fmt_p(float(s['p_value'])):>8}")
    return "\n".join(lines)


def summary_text(ds: xr.Dataset, top: int = 10) -> str:
    """The whole ``summary.txt``: decision table, then what was tested and how to read it."""
    a = ds.attrs
    out = [anomaly_table(ds, top), ""]
    out.append(f"Null: {a.get('null', '?')}.")
    st = a.get("storage_dtypes", a.get("storage_dtype", "float32"))
    out.append(f"Storage of W_Q/W_K in the checkpoint: {st}; quantisation detected: "
               f"{a.get('quantisation', 'none')}; null storage: {a.get('null_storage', st)}.")
    fam = [s for s in str(a.get("decision_family", "")).split(",") if s]
    out.append(f"Decision: per head, a Cauchy combination of {len(fam)} statistics calibrated on "
               f"joint null draws, then Benjamini-Hochberg over the {ds['head_flag'].size} heads "
               f"at alpha={a.get('alpha')}. Per-statistic z, p and q in scores.csv are "
               "descriptive.")
    if a.get("duplicates"):
        out.append(f"Counted once: {a['duplicates']}.")
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


def _figures(ds: xr.Dataset, fdir: Path, n_spectra: int, save) -> None:
    from matplotlib.figure import Figure

    f = Figure(figsize=(float(np.clip(0.25 * ds.sizes["head"] + 3, 5, 12)),
                        float(np.clip(0.2 * ds.sizes["layer"] + 2, 3, 10))), layout="constrained")
    fig_mod.plot_verdict(ds, f.subplots())
    save(f, fdir / "verdict.png")
    stats = [str(s) for s in ds["stat"].values]
    fam = set(np.asarray(ds["stat"].values)[ds["in_family"].values].tolist())
    for group, name in GROUP_FILES.items():
        sel = [s for s in stats if s in fam and str(ds["group"].sel(stat=s).values) == group]
        if sel:
            save(fig_mod.effect_overview(ds, sel, f"{group} statistics (effect)"),
                 fdir / f"{name}.png")
    for stat in [s for s in HEADLINE_STATS if s in stats]:
        f = Figure(figsize=(float(np.clip(0.3 * ds.sizes["head"] + 2.5, 4, 12)),
                            float(np.clip(0.22 * ds.sizes["layer"] + 1.8, 3, 9))),
                   layout="constrained")
        fig_mod.plot_effect_heatmap(ds, stat, f.subplots())
        save(f, fdir / f"effect_{stat}.png")
    if "qk_spectrum" in ds:
        ranking = head_ranking(ds)
        chosen = [(h, f"most anomalous #{i + 1}") for i, h in enumerate(ranking[:n_spectra])]
        chosen.append((ranking[-1], "least anomalous head"))
        for (li, hi), why in dict((h, w) for h, w in chosen).items():
            p = float(ds["head_p_value"].sel(layer=li, head=hi))
            f = Figure(figsize=(11, 4), layout="constrained")
            a1, a2 = f.subplots(1, 2)
            fig_mod.plot_spectrum(ds, li, hi, a1, why=f"{why}, head p {_fmt_p(p)}")
            fig_mod.plot_spectrum_density(ds, li, hi, a2)
            save(f, fdir / f"spectrum_L{li}_H{hi}.png")
    panels = [m for m in ("q", "qk") if {f"{m}.entropy", f"{m}.std"} <= set(stats)]
    if panels:
        f = Figure(figsize=(5.5 * len(panels), 4.2), layout="constrained")
        axes = np.atleast_1d(f.subplots(1, len(panels)))
        for m, a in zip(panels, axes, strict=True):
            fig_mod.plot_entropy_sigma(ds, m, a)
        save(f, fdir / "entropy_sigma.png")


def write_report(ds: xr.Dataset, out_dir, *, figures: bool = True, top: int = 10,
                 n_spectra: int = 3, components: xr.Dataset | None = None) -> dict[str, Path]:
    """Write the report (module docstring) into ``out_dir`` all-or-nothing; returns
    {file name: final path}. ``out_dir`` may not exist, be empty, or hold an earlier rmtbase
    output (replaced whole); anything else is refused before writing. A collection (leading
    ``checkpoint``/``model`` dimension) gets :func:`.collection_report.write_collection_report`.
    ``components``: a whole-matrix score (:func:`rmtbase.scoring.components.score_components`)
    written alongside (:func:`.component_report.write_components`; its table is appended to
    ``summary.txt``)."""
    from .collection import collection_dim
    from .html import score_html

    if collection_dim(ds):
        if components is not None:
            raise InputError("whole-matrix scores are written for one model, not a collection")
        from .collection_report import write_collection_report

        return write_collection_report(ds, out_dir, figures=figures, top=min(top, 3))
    summary = summary_text(ds, top)
    if components is not None:
        from .component_report import component_table

        summary += "\nWhole matrices (components.nc, components.csv):\n" + \
            component_table(components) + "\n"
    with OutputFolder(out_dir, kind="rmtbase score") as out:
        out.write_netcdf("scores.nc", ds)
        if components is not None:
            from .component_report import write_components

            write_components(out, components, figures=figures)
        out.write_text("heads.csv", head_table(ds).to_csv(index=False))
        out.write_text("scores.csv", long_table(ds).to_csv(index=False))
        out.write_text("summary.txt", summary)
        images = {}
        if figures:
            def save(fig, rel):
                out.save_figure(fig, rel)
                if Path(rel).name in HTML_FIGURES:
                    images[Path(rel).name] = (out.tmp / rel).read_bytes()

            _figures(ds, Path("figures"), n_spectra, save)
        images = {n: images[n] for n in HTML_FIGURES if n in images}
        out.write_text("report.html", score_html(ds, images, summary=summary,
                                                 captions=HTML_FIGURES))
    return out.written
