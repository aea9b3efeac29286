"""Report of one score, written all-or-nothing (:mod:`rmtbase.files.output`).

``scores.nc``, ``heads.csv``, ``scores.csv`` (head × statistic), ``summary.txt``, ``figures/``
(verdict with profile, effect heatmaps, spectra of the most and least concentrated heads,
entropy), ``report.html`` and, with a whole-matrix score, :mod:`.component_report`'s files;
with a heavy-tail table, :mod:`.heavy_tail_report`'s."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from ..files.output import OutputFolder
from . import figures as fig_mod
from ._labels import fixed_grid, top_title
from .line_width import fit_text
from .tables import fmt_p, head_ranking, head_table, long_table, summary_text

#: Statistics that get their own heatmap file.
HEADLINE_STATS = ("qk.npr", "qk.lambda_max", "qk.spectral_entropy", "qk.condition_number",
                  "qk.excess_kurtosis", "q.weibull_k", "k.weibull_k", "q.entropy")
#: Figures embedded in report.html, with their captions; the page links the rest (files in
#: figures/). The effect heatmaps (normal scores in the null, capped) are linked, not shown: the
#: page's measure of how far is the profile's effect in each statistic's own units.
HTML_FIGURES = {
    "verdict.png": "The decision (−log₁₀ head p, flagged heads boxed) beside the profile: one "
                   "heatmap per axis on a fixed scale that means the same for every model "
                   "(ratios as log2 of the ratio to the null median, alignment and symmetry as "
                   "shifts on [-1, 1]); dots: flagged on that axis.",
    "entropy_sigma.png": "Entropy of the entries beyond the Gaussian entropy at the same std "
                         "(ΔS), against the std: each head with its null (mean ± 2 sd), the "
                         "Gaussian (ΔS = 0) and, for W_QK, the variance-gamma null law.",
}
#: Margins (inches) of a head's two spectrum panels (title up to three lines under the model's
#: name) and of the entropy panels.
_SPECTRUM = {"left": 0.85, "right": 0.2, "bottom": 0.55, "top": 0.95}
_ENTROPY = {"left": 1.0, "right": 0.2, "bottom": 0.55, "top": 0.65}
GROUP_FILES = {"spectrum": "effect_spectrum", "product law": "effect_product_law",
               "entry law": "effect_entry_law"}

def _figures(ds: xr.Dataset, fdir: Path, n_spectra: int, save_figure) -> None:
    from matplotlib.figure import Figure

    label = fig_mod.title_label(ds)

    def save(fig, path):
        """Every figure names its model (a file opened on its own says what it shows)."""
        own = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
        if label and label not in own:
            fig.suptitle(f"{label}: {own}" if own else label, fontsize=9)
        save_figure(fig, path)

    if "profile_effect" in ds:
        from .profile_figures import profile_figure

        save(profile_figure(ds, fig_mod.title_label(ds), verdict=True), fdir / "verdict.png")
    else:
        f = Figure(figsize=(float(np.clip(0.25 * ds.sizes["head"] + 3, 5, 12)),
                            float(np.clip(0.2 * ds.sizes["layer"] + 2, 3, 10))),
                   layout="constrained")
        fig_mod.plot_verdict(ds, f.subplots())
        save(f, fdir / "verdict.png")
    stats = [str(s) for s in ds["stat"].values]
    fam = set(np.asarray(ds["stat"].values)[ds["in_family"].values].tolist())
    for group, name in GROUP_FILES.items():
        sel = [s for s in stats if s in fam and str(ds["group"].sel(stat=s).values) == group]
        for k, fig in enumerate(fig_mod.effect_overviews(ds, sel, f"{group} statistics "
                                                        "(effect)")):  # <= 12 panels each
            save(fig, fdir / (f"{name}.png" if k == 0 else f"{name}_{k + 1}.png"))
    for stat in [s for s in HEADLINE_STATS if s in stats]:
        save(fig_mod.effect_figure(ds, stat), fdir / f"effect_{stat}.png")
    if "qk_spectrum" in ds:
        chosen = _spectrum_heads(ds, n_spectra)
        for (li, hi), why in dict((h, w) for h, w in chosen).items():
            p = float(ds["head_p_value"].sel(layer=li, head=hi))
            f = fixed_grid(11, 4, _SPECTRUM, (1, 2), (0, 0.9))
            a1, a2 = f.subplots(1, 2)
            fig_mod.plot_spectrum(ds, li, hi, a1, why=f"{why}, head p {fmt_p(p)}")
            fig_mod.plot_spectrum_density(ds, li, hi, a2)
            save(f, fdir / f"spectrum_L{li}_H{hi}.png")
    panels = [m for m in ("q", "qk") if {f"{m}.entropy", f"{m}.std"} <= set(stats)]
    if panels:
        f = fixed_grid(5.5 * len(panels), 4.2, _ENTROPY, (1, len(panels)), (0, 1.25))
        axes = np.atleast_1d(f.subplots(1, len(panels)))
        for m, a in zip(panels, axes, strict=True):
            fig_mod.plot_entropy_sigma(ds, m, a)
        top_title(f, fig_mod.title_label(ds), fontsize=10)  # whose entries
        save(f, fdir / "entropy_sigma.png")


def _spectrum_heads(ds: xr.Dataset, n: int) -> list[tuple[tuple[int, int], str]]:
    """The ``n`` most and the least concentrated heads (NPR ratio to the null median); without a
    profile the first ``n`` and last by evidence."""
    if "profile_effect" in ds and "concentration" in ds["axis"].values:
        r = ds["profile_effect"].sel(axis="concentration").transpose("layer", "head").values
        flat = np.nan_to_num(r, nan=np.inf).ravel()
        order = np.argsort(flat, kind="stable")
        layers, heads = ds["layer"].values, ds["head"].values
        pick = [np.unravel_index(k, r.shape) for k in order
                if np.isfinite(flat[k])]  # heads a delta left unchanged have no spectrum
        pairs = [(int(layers[i]), int(heads[j])) for i, j in pick]
        with np.errstate(divide="ignore", invalid="ignore"):
            closeness = np.where(np.isfinite(r.ravel()) & (r.ravel() > 0),
                                 np.abs(np.log(r.ravel())), np.inf)
        far = int(np.argmin(closeness))
        chosen = [(h, f"most concentrated #{i + 1} (NPR {flat[order[i]]:.3g}x random)")
                  for i, h in enumerate(pairs[:n])]
        i, j = np.unravel_index(far, r.shape)
        chosen.append(((int(layers[i]), int(heads[j])),
                       f"least concentrated (NPR {r[i, j]:.3g}x random)"))
        return chosen
    ranking = head_ranking(ds)
    return [(h, f"#{i + 1} by evidence") for i, h in enumerate(ranking[:n])] + \
        [(ranking[-1], "last by evidence")]


def write_model_report(ds: xr.Dataset, out_dir, *, figures: bool = True, top: int = 3,
                       n_spectra: int = 3, components: xr.Dataset | None = None,
                       extras: dict | None = None, heavy_tail: xr.Dataset | None = None
                       ) -> dict[str, Path]:
    """Write one model's report into ``out_dir``; returns {file name: final path}.
    ``components``: a whole-matrix score written alongside; ``heavy_tail``: the heavy-tail
    table (:func:`rmtbase.scoring.matrices.heavy_tail.score_heavy_tail`)."""
    from .circuit_context import context
    from .circuit_next import next_lines, next_section, wants_next
    from .component_report import component_table, write_components
    from .composition_report import section_of, summary_lead
    from .html import score_html

    ctx = context(ds, extras)  # rmtbase score --composition: what was found leads
    summary = summary_lead(ctx) + summary_text(ds, top)
    nxt = next_lines(ds.attrs) if wants_next(ds, extras) else []
    if nxt:
        summary += "\n" + "\n".join(nxt) + "\n"
    if components is not None:
        summary += "\nWhole matrices (components.nc, components.csv):\n" + \
            component_table(components) + "\n"
    nc = ds
    if heavy_tail is not None:
        from .heavy_tail_report import scores_variables, write_heavy_tail
        from .heavy_tail_text import terminal_lines

        summary += "\n" + "\n".join(terminal_lines(heavy_tail, top)) + "\n"
        hv = scores_variables(heavy_tail, ds["layer"].values)
        nc = ds.assign(dict(hv.data_vars))
        nc.attrs = {**ds.attrs, **hv.attrs}
    with OutputFolder(out_dir, kind="rmtbase score") as out:
        out.write_netcdf("scores.nc", nc)
        for name, extra in (extras or {}).items():
            if hasattr(extra, "savefig"):  # a figure given with the files
                out.save_figure(extra, name)
            else:
                out.write_netcdf(name, extra)
        if figures and ctx is not None and "figures/composition.png" not in (extras or {}):
            from .composition_figure import circuit_figure

            out.save_figure(circuit_figure(ctx), "figures/composition.png")
        if components is not None:
            write_components(out, components, figures=figures)
        out.write_text("heads.csv", head_table(ds).to_csv(index=False))
        out.write_text("scores.csv", long_table(ds).to_csv(index=False))
        out.write_text("summary.txt", fit_text(summary))
        images, linked = {}, []
        if figures:
            def save(fig, rel):
                out.save_figure(fig, rel)
                if Path(rel).name in HTML_FIGURES:
                    images[Path(rel).name] = (out.tmp / rel).read_bytes()
                else:
                    linked.append(Path(rel).as_posix())

            _figures(ds, Path("figures"), n_spectra, save)
        images = {n: images[n] for n in HTML_FIGURES if n in images}
        sections = ""
        if ctx is not None:  # rmtbase score --composition
            png = out.tmp / "figures" / "composition.png"
            sections = section_of(ctx, png.read_bytes() if png.exists() else None)
        if nxt:
            sections += next_section(nxt)
        if heavy_tail is not None:
            sections += write_heavy_tail(out, heavy_tail, figures=figures,
                                         label=fig_mod.title_label(ds))
        out.write_text("report.html", score_html(ds, images, summary=summary,
                                                 captions=HTML_FIGURES, linked=linked,
                                                 sections=sections))
    return out.written
