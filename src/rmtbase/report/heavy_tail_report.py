"""The heavy-tail table as a CSV and the ESD figure WeightWatcher users read.

:func:`heavy_tail_frame` flattens :func:`rmtbase.scoring.matrices.heavy_tail.score_heavy_tail`'s
Dataset to one row per (layer, component); :func:`write_heavy_tail_csv` writes it atomically.
:func:`plot_esd` draws a matrix's ESD on log–log axes (density over log-spaced bins), the fitted
power law p(λ) = (n_tail/M) (α − 1)/xmin (λ/xmin)^{−α} above xmin (the tail's share of the
density; Clauset, Shalizi & Newman 2009, eq. 2.2) and the null's 2.5–97.5 % band per bin from
null spectra; it takes ``ax=None`` and returns the Axes."""

from __future__ import annotations

import numpy as np

from ._labels import figure_axes


def heavy_tail_frame(ds):
    """A pandas DataFrame: layer, component, rows, cols, storage, null_storage, xmin,
    folklore, null_well_trained, then ``<metric>``, ``<metric>_p``, ``<metric>_null_median``,
    ``<metric>_null_lo``, ``<metric>_null_hi`` per metric; missing components dropped."""
    import pandas as pd

    rows = []
    for layer in ds.layer.values:
        for comp in ds.component.values:
            cell = ds.sel(layer=layer, component=comp)
            if int(cell["rows"]) == 0:
                continue
            row = {"layer": int(layer), "component": str(comp)}
            for k in ("rows", "cols", "storage", "null_storage", "xmin", "folklore",
                      "null_well_trained"):
                row[k] = cell[k].item()
            for m in ds.metric.values:
                c = cell.sel(metric=m)
                row[str(m)] = float(c["value"])
                for v, suffix in (("p_value", "p"), ("null_median", "null_median"),
                                  ("null_lo", "null_lo"), ("null_hi", "null_hi")):
                    row[f"{m}_{suffix}"] = float(c[v])
            rows.append(row)
    return pd.DataFrame(rows)


def write_heavy_tail_csv(ds, path):
    """Write :func:`heavy_tail_frame` of ``ds`` to ``path`` atomically; returns the path."""
    from ..files.atomic import write_atomic

    frame = heavy_tail_frame(ds)
    return write_atomic(path, lambda tmp: frame.to_csv(tmp, index=False, float_format="%.6g"))


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


__all__ = ["heavy_tail_frame", "plot_esd", "write_heavy_tail_csv"]
