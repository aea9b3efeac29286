"""The heavy-tail table's figures: α by layer per component kind (WeightWatcher's first plot) with
the null's 95 % band and the folklore band 2 ≤ α ≤ 6, α's histogram against the null's, and α
and its p over training steps. Each ``plot_*`` takes ``ax=None`` and returns the Axes; each
``*_figure`` returns a matplotlib Figure (None where there is nothing to draw)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ._labels import figure_axes, fixed_figure

#: The folklore band's colour and the null band's.
_BAND, _NULL = "tab:green", "0.75"


def _folklore(ax, band) -> None:
    lo, hi = band
    ax.axhspan(lo, hi, color=_BAND, alpha=0.12, lw=0, zorder=2,
               label=f"WW 'well trained' {lo:g}-{hi:g}")
    for y in band:
        ax.axhline(y, color=_BAND, lw=0.8, ls=":", zorder=2)


def _band(ht: xr.Dataset):
    from ..scoring.matrices.heavy_tail import FOLKLORE_BAND

    text = str(ht.attrs.get("folklore_band", ""))
    return tuple(float(x) for x in text.split(",")) if "," in text else FOLKLORE_BAND


def plot_alpha_by_layer(ht: xr.Dataset, component: str, ax=None):
    """α of ``component``'s matrix in each layer (filled: unlike random by BH at the table's
    fdr), the null's median and 95 % band at each layer's shape and norm, the folklore band."""
    ax = figure_axes(ax)
    a = ht.sel(component=component, metric="alpha")
    cell = ht.sel(component=component)
    ok = cell["rows"].values > 0
    layers = ht["layer"].values[ok]
    lo, med, hi = (a[k].values[ok] for k in ("null_lo", "null_median", "null_hi"))
    _folklore(ax, _band(ht))
    ax.fill_between(layers, lo, hi, color=_NULL, alpha=0.6, step="mid", lw=0,
                    label="null 95 % band")
    ax.plot(layers, med, color="0.35", ls="--", lw=1, label="null median")
    v = a["value"].values[ok]
    flag = cell["alpha_flag"].values[ok].astype(bool) if "alpha_flag" in cell else \
        np.zeros(v.shape, bool)
    ax.plot(layers[flag], v[flag], "o", color="C3", label="alpha, unlike random")
    ax.plot(layers[~flag], v[~flag], "o", mfc="none", color="C0", label="alpha, like random")
    ax.set_title(f"{component} ({int(cell['rows'].values[ok][0])}x"
                 f"{int(cell['cols'].values[ok][0])})" if ok.any() else component, fontsize=9)
    ax.set_xlabel("layer")
    ax.set_ylabel("alpha (power-law exponent)")
    return ax


def figure(cols: int, rows: int, size=(3.6, 2.9)):
    """A Figure of ``rows`` × ``cols`` panels with fixed margins (:func:`._labels.fixed_figure`)
    and its Axes, flat."""
    w, h = size[0] * cols, size[1] * rows + 0.5
    fig = fixed_figure(w, h, left=0.75, right=0.2, bottom=0.55, top=0.6, wspace=0.3,
                       hspace=0.45)
    return fig, np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()


def _grid(n: int):
    cols = min(n, 4)
    fig, axes = figure(cols, -(-n // cols))
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def alpha_layer_figure(ht: xr.Dataset, title: str = ""):
    """:func:`plot_alpha_by_layer` for every component kind, one panel each; None without a
    described matrix."""
    kinds = [str(c) for c in ht["component"].values
             if np.isfinite(ht["value"].sel(component=c, metric="alpha").values).any()]
    if not kinds:
        return None
    fig, axes = _grid(len(kinds))
    for ax, c in zip(axes, kinds, strict=False):
        plot_alpha_by_layer(ht, c, ax)
    axes[0].legend(fontsize="x-small")
    if title:
        fig.suptitle(title, fontsize=9)
    return fig


def plot_alpha_histogram(alpha, null_alpha, ax=None, *, band=(2.0, 6.0), bins: int = 40):
    """Densities of the matrices' α and of the null's α (every matrix's null draws pooled), the
    folklore band shaded."""
    ax = figure_axes(ax)
    alpha = np.asarray(alpha, float)
    null_alpha = np.asarray(null_alpha, float)
    alpha, null_alpha = alpha[np.isfinite(alpha)], null_alpha[np.isfinite(null_alpha)]
    pool = np.concatenate([alpha, null_alpha])
    hi = np.quantile(pool, 0.995) if pool.size else 10.0
    edges = np.linspace(min(1.0, pool.min(initial=1.0)), max(hi, band[1] + 1), bins + 1)
    ax.axvspan(*band, color=_BAND, alpha=0.08, lw=0, label=f"WW 'well trained' {band[0]:g}-"
                                                           f"{band[1]:g}")
    ax.hist(null_alpha, edges, density=True, color=_NULL, label="null (Gaussian matrices)")
    ax.hist(alpha, edges, density=True, histtype="step", lw=2, color="C0",
            label=f"the model's {alpha.size} matrices")
    ax.set_xlabel("alpha (axis cut at the 99.5 % quantile)")
    ax.set_ylabel("density")
    ax.legend(fontsize="x-small")
    return ax


def alpha_histogram_figure(ht: xr.Dataset, title: str = ""):
    """:func:`plot_alpha_histogram` of ``ht`` (the null's α read from its cached tables)."""
    from ..scoring.matrices.heavy_tail import null_alpha

    a = ht["value"].sel(metric="alpha").values.ravel()
    if not np.isfinite(a).any():
        return None
    fig, (ax,) = figure(1, 1, (6.4, 3.4))
    plot_alpha_histogram(a, null_alpha(ht), ax, band=_band(ht))
    if title:
        fig.suptitle(title, fontsize=9)
    return fig


def _steps(cds: xr.Dataset, dim: str) -> tuple[np.ndarray, str]:
    step = cds["step"].values.astype(float) if "step" in cds.coords else np.array([np.nan])
    if np.isfinite(step).all():
        return step, "training step"
    return np.arange(cds.sizes[dim], dtype=float), dim


def plot_alpha_trajectory(cds: xr.Dataset, component: str, ax=None, *, dim="checkpoint"):
    """α of ``component`` in each layer against the training step, with the null's 95 % band
    (its extremes over the layers at each step) and the folklore band."""
    ax = figure_axes(ax)
    x, label = _steps(cds, dim)
    a = cds.sel(component=component, metric="alpha")
    _folklore(ax, _band(cds))
    with np.errstate(all="ignore"):
        lo = np.nanmin(a["null_lo"].values, axis=1)
        hi = np.nanmax(a["null_hi"].values, axis=1)
    ax.fill_between(x, lo, hi, color=_NULL, alpha=0.6, lw=0, label="null 95 % band")
    for j, layer in enumerate(cds["layer"].values):
        v = a["value"].values[:, j]
        if np.isfinite(v).any():
            ax.plot(x, v, "o-", ms=3, color=f"C{j % 10}", label=f"L{int(layer)}")
    ax.set_xlabel(label)
    ax.set_ylabel(f"alpha of {component}")
    return ax


def plot_p_trajectory(cds: xr.Dataset, component: str, ax=None, *, dim="checkpoint"):
    """α's p of ``component`` in each layer against the training step (log scale), the
    table's fdr and the smallest p its draws allow (2 / (draws + 1)) drawn."""
    ax = figure_axes(ax)
    x, label = _steps(cds, dim)
    p = cds["p_value"].sel(component=component, metric="alpha")
    for j, layer in enumerate(cds["layer"].values):
        v = p.values[:, j]
        if np.isfinite(v).any():
            ax.plot(x, v, "o-", ms=3, color=f"C{j % 10}", label=f"L{int(layer)}")
    draws = int(cds.attrs.get("draws", 0) or 0)
    if draws:
        ax.axhline(2 / (draws + 1), color="0.5", lw=0.8, ls=":", label="smallest p")
    ax.axhline(float(cds.attrs.get("fdr", 0.05)), color="C3", lw=0.8, ls="--", label="fdr")
    ax.set_yscale("log")
    ax.set_ylim(top=1.05)
    ax.set_xlabel(label)
    ax.set_ylabel(f"p of alpha ({component})")
    return ax


def trajectory_figure(cds: xr.Dataset, dim: str = "checkpoint", title: str = ""):
    """α (top row) and its p (bottom row) against the step, one column per component kind."""
    kinds = [str(c) for c in cds["component"].values
             if np.isfinite(cds["value"].sel(component=c, metric="alpha").values).any()]
    if not kinds:
        return None
    fig, axes = figure(len(kinds), 2)
    axes = axes.reshape(2, len(kinds))
    for j, c in enumerate(kinds):
        plot_alpha_trajectory(cds, c, axes[0, j], dim=dim)
        plot_p_trajectory(cds, c, axes[1, j], dim=dim)
    axes[0, 0].legend(fontsize="x-small", ncol=2)
    if title:
        fig.suptitle(title, fontsize=9)
    return fig


__all__ = ["alpha_histogram_figure", "alpha_layer_figure", "figure", "plot_alpha_by_layer",
           "plot_alpha_histogram", "plot_alpha_trajectory", "plot_p_trajectory",
           "trajectory_figure"]
