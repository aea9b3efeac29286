"""The heavy-tail table as a CSV and the ESD figure WeightWatcher users read.

:func:`heavy_tail_frame` flattens :func:`rmtbase.scoring.matrices.heavy_tail.score_heavy_tail`'s
Dataset to one row per (layer, component); :func:`write_heavy_tail_csv` writes it atomically.
:func:`plot_esd` draws a matrix's ESD on log–log axes (density over log-spaced bins), the fitted
power law p(λ) = (n_tail/M) (α − 1)/xmin (λ/xmin)^{−α} above xmin (the tail's share of the
density; Clauset, Shalizi & Newman 2009, eq. 2.2) and the null's 2.5–97.5 % band per bin from
null spectra; it takes ``ax=None`` and returns the Axes. :func:`write_heavy_tail` adds the table
to ``rmtbase score --heavy-tail``'s folder: ``heavy_tail_*`` variables in scores.nc
(:func:`scores_variables`), heavy_tail.csv, the ESD figure, the summary block
(:mod:`.heavy_tail_text`) and a report section."""

from __future__ import annotations

import html as _html

import numpy as np
import xarray as xr

from ..errors import InputError
from ..scoring.matrices.heavy_tail_attrs import ATTRS, SUMMARY_ATTRS, described
from ._labels import figure_axes

#: The per-matrix variables of heavy_tail.csv, after layer and component.
_PER_MATRIX = ("rows", "cols", "storage", "null_storage", "xmin", "folklore",
               "null_well_trained", "alpha_flag", "alpha_q", "reason")
#: Columns of the report's table (heavy_tail.csv holds every metric).
_SHOWN = ("layer", "component", "alpha", "alpha_p", "alpha_null_lo", "alpha_null_hi", "folklore",
          "null_well_trained", "alpha_weighted", "stable_rank", "rand_distance")


def heavy_tail_frame(ds):
    """A pandas DataFrame: layer, component, rows, cols, storage, null_storage, xmin,
    folklore, null_well_trained, alpha_flag, alpha_q, reason, then ``<metric>``, ``<metric>_p``,
    ``<metric>_null_median``, ``<metric>_null_lo``, ``<metric>_null_hi`` per metric; missing
    components dropped; rows in (layer, component) order."""
    import pandas as pd

    li, ci = np.nonzero(ds["rows"].transpose("layer", "component").values > 0)
    cols = {"layer": ds["layer"].values[li].astype(int),
            "component": ds["component"].values[ci].astype(str)}
    for k in _PER_MATRIX:
        if k in ds:
            cols[k] = ds[k].transpose("layer", "component").values[li, ci]
    suffixes = (("value", ""), ("p_value", "_p"), ("null_median", "_null_median"),
                ("null_lo", "_null_lo"), ("null_hi", "_null_hi"))
    arrays = {v: ds[v].transpose("layer", "component", "metric").values[li, ci]
              for v, _ in suffixes}
    for j, m in enumerate(ds["metric"].values):  # per metric: value, p, median, lo, hi
        for v, suffix in suffixes:
            cols[f"{m}{suffix}"] = arrays[v][:, j].astype(float)
    return pd.DataFrame(cols)


def _csv(ds) -> str:
    return heavy_tail_frame(ds).to_csv(index=False, float_format="%.6g")


def write_heavy_tail_csv(ds, path):
    """Write :func:`heavy_tail_frame` of ``ds`` to ``path`` atomically; returns the path."""
    from ..files.atomic import write_text

    return write_text(path, _csv(ds))


def plot_esd(lam, ax=None, *, alpha=None, xmin=None, null=None, bins: int = 60, label=None):
    """ESD of ``lam`` (M eigenvalues) on log–log axes with the power law (``alpha``, ``xmin``;
    omitted when either is None or NaN) and the null band of ``null`` ``(draws, M)`` (spectra at
    the matrix's scale) per bin; returns the Axes."""
    ax = figure_axes(ax)
    lam = np.asarray(lam, dtype=np.float64)
    lam = lam[lam > 0]
    pool = lam if null is None else np.concatenate([lam, np.asarray(null).ravel()])
    pool = pool[pool > 0]
    edges = np.logspace(np.log10(pool.min()), np.log10(pool.max()), bins + 1)
    width, mid = np.diff(edges), np.sqrt(edges[:-1] * edges[1:])

    def density(x):
        return np.histogram(x, edges)[0] / (x.size * width)

    if null is not None:
        dens = np.array([density(row[row > 0]) for row in np.atleast_2d(null)])
        lo, hi = np.quantile(dens, [0.025, 0.975], axis=0)
        ax.fill_between(mid, np.where(lo > 0, lo, np.nan), np.where(hi > 0, hi, np.nan),
                        step="mid", color="0.8", label="null 95 % band")
    d = density(lam)
    ax.step(mid, np.where(d > 0, d, np.nan), where="mid", color="C0", label=label or "ESD")
    if alpha is not None and xmin is not None and np.isfinite(alpha) and np.isfinite(xmin):
        x = np.logspace(np.log10(xmin), np.log10(lam.max()), 50)
        share = np.mean(lam >= xmin)
        ax.plot(x, share * (alpha - 1) / xmin * (x / xmin) ** (-alpha), "r--",
                label=f"power law α = {alpha:.2f}")
        ax.axvline(xmin, color="r", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("eigenvalue λ = s²")
    ax.set_ylabel("density")
    ax.legend(fontsize="small")
    return ax


def scores_variables(ht: xr.Dataset, layers) -> xr.Dataset:
    """``ht`` (:func:`~rmtbase.scoring.matrices.heavy_tail.score_heavy_tail`) as scores.nc's
    variables ``heavy_tail_<name>`` over (layer, component[, heavy_tail_metric])."""
    if sorted(int(v) for v in ht["layer"].values) != sorted(int(v) for v in layers):
        raise InputError("the heavy-tail table names other layers than the head score")
    ht = ht.drop_vars("esd", errors="ignore").rename(metric="heavy_tail_metric",
                                                     summary="heavy_tail_summary")
    out = xr.Dataset({f"heavy_tail_{k}": ht[k] for k in ATTRS if k in ht})
    out.update({f"heavy_tail_summary_{k}": ht[f"summary_{k}"] for k in SUMMARY_ATTRS
                if f"summary_{k}" in ht})
    described(out)
    out["heavy_tail_metric"].attrs = {"long_name": "WeightWatcher heavy-tail metric"}
    out.attrs = {f"heavy_tail_{k}": ht.attrs[k] for k in ("draws", "seed", "null", "definitions",
                                                          "folklore_band", "quantized_null",
                                                          "fdr")
                 if k in ht.attrs}
    return out


def esd_figure(ht: xr.Dataset):
    """The ESD (:func:`plot_esd`) of the matrices whose α lies furthest from and nearest to
    its null median (:func:`.heavy_tail_text.side_units`), with the null's spectra; a Figure,
    or None without ``esd``."""
    from ..scoring.matrices.heavy_tail import null_spectra
    from .heavy_tail_figures import figure
    from .heavy_tail_text import side_units
    from .tables import fmt_p

    a = ht.sel(metric="alpha")
    band = np.abs(side_units(*(a[k].transpose("layer", "component").values
                               for k in ("value", "null_lo", "null_median", "null_hi"))))
    if "esd" not in ht or not np.isfinite(band).any():
        return None
    far = np.unravel_index(np.nanargmax(band), band.shape)
    near = np.unravel_index(np.nanargmin(band), band.shape)
    fig, axes = figure(2, 1, (5.5, 3.9))
    for ax, (i, j), why in zip(axes, (far, near), ("furthest from", "nearest"), strict=True):
        layer, comp = ht["layer"].values[i], ht["component"].values[j]
        cell = ht.sel(layer=layer, component=comp)
        a = cell.sel(metric="alpha")
        lam = cell["esd"].values
        plot_esd(lam[np.isfinite(lam)], ax, alpha=float(a["value"]), xmin=float(cell["xmin"]),
                 null=null_spectra(ht, layer, comp), label=f"L{layer} {comp}")
        ax.set_title(f"L{layer} {comp} ({int(cell['rows'])}x{int(cell['cols'])}), alpha {why} "
                     f"its null: {float(a['value']):.2f} vs {float(a['null_median']):.2f} "
                     f"[{float(a['null_lo']):.2f}, {float(a['null_hi']):.2f}], p "
                     f"{fmt_p(float(a['p_value']))}", fontsize=8)
    return fig


def write_heavy_tail(out, ht: xr.Dataset, *, figures: bool = True, label: str = "") -> str:
    """Write heavy_tail.csv (and figures/heavy_tail_esd.png, titled ``label``) into the open
    OutputFolder ``out``; returns the report's HTML section."""
    from .heavy_tail_text import terminal_lines
    from .html import _img, table_html

    out.write_text("heavy_tail.csv", _csv(ht))
    block = "\n".join(terminal_lines(ht))
    fig = esd_figure(ht) if figures else None
    img = ""
    if fig is not None:
        if label:  # the figure names its model, as the report's others do
            fig.suptitle(label, fontsize=9)
        out.save_figure(fig, "figures/heavy_tail_esd.png")
        img = _img("heavy_tail_esd.png", (out.tmp / "figures" / "heavy_tail_esd.png"
                                          ).read_bytes(),
                   "ESD (lambda = s^2, log-log) with the power-law fit above xmin (red) and the "
                   "95 % band of the null's spectra at the matrix's Frobenius norm (grey).")
    frame = heavy_tail_frame(ht)
    section = ('<section id="heavy-tail"><h2>Heavy-tailed spectra (WeightWatcher metrics '
               f'against the null)</h2><pre>{_html.escape(block)}</pre><p class="note">Every '
               "metric with its null: heavy_tail.csv and scores.nc (heavy_tail_*).</p>"
               f"{table_html(frame[[c for c in _SHOWN if c in frame]])}{img}</section>\n")
    return section


__all__ = ["described", "esd_figure", "heavy_tail_frame", "plot_esd", "scores_variables",
           "write_heavy_tail", "write_heavy_tail_csv"]
