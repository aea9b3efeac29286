"""Figures of a whole-matrix score (:func:`rmtbase.scoring.matrices.components.score_components`).

Weibull k of |w| against the half-normal anchor k₀ (:func:`rmtbase.analytic.weibull.anchor`)
and the paper's band [1.186, 1.204] (arXiv:2605.18898, Sec. 3): :func:`plot_k_heatmap`
(layer × component, its Fig. 6), :func:`plot_terminal_k`, :func:`plot_k_trajectory`. Functions
take ``ax=None`` and return the Axes."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..errors import InputError
from ..scoring.matrices.components import WEIBULL_BAND
from ._labels import figure_axes, fit_title, title_label

#: Colour limits of the k heatmap, relative to k₀ (the paper's Selection Class reaches 0.76
#: and below; trained FFN matrices sit within a few 0.01 of k₀).
K_BELOW, K_ABOVE = 0.4, 0.2
K_CMAP = "RdBu"


def _anchor(ds: xr.Dataset, stat: str) -> float:
    suffix = stat.removeprefix("weibull_k")
    key = f"weibull_k0{suffix}"
    if key in ds.attrs:
        return float(ds.attrs[key])
    from ..analytic.weibull import anchor

    a = {"": 0.1, "_trim90": 0.05, "_trim100": 0.0}[suffix]
    return anchor(a, 1 - a).k0


def _trim_label(stat: str) -> str:
    return {"weibull_k": "middle 80 %", "weibull_k_trim90": "middle 90 %",
            "weibull_k_trim100": "all ranks"}[stat]


def _check(ds: xr.Dataset, stat: str) -> None:
    if stat not in ("weibull_k", "weibull_k_trim90", "weibull_k_trim100"):
        raise InputError(f"stat must be weibull_k, weibull_k_trim90 or weibull_k_trim100, "
                         f"got {stat!r}")
    if stat not in ds["stat"].values:
        raise InputError(f"statistic {stat!r} is not in this score")


def plot_k_heatmap(ds: xr.Dataset, ax=None, *, stat: str = "weibull_k", colorbar: bool = True,
                   annotate: bool | None = None):
    """Weibull k over component (rows) × layer on [k₀ − 0.4, k₀ + 0.2]; NaN grey, BH-flagged
    cells framed; ``annotate`` prints k (default: ≤ 200 cells)."""
    import matplotlib as mpl
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    _check(ds, stat)
    ax = figure_axes(ax)
    k0 = _anchor(ds, stat)
    v = ds["value"].sel(stat=stat).values.T  # (component, layer)
    norm = TwoSlopeNorm(vcenter=k0, vmin=k0 - K_BELOW, vmax=k0 + K_ABOVE)
    cmap = mpl.colormaps[K_CMAP].with_extremes(bad="0.8")
    im = ax.imshow(np.ma.masked_invalid(v), cmap=cmap, norm=norm, aspect="auto",
                   interpolation="nearest")
    ci, li = np.nonzero(ds["flag"].sel(stat=stat).values.T)
    for c, l_ in zip(ci, li, strict=True):  # flagged: a frame, which leaves the value legible
        ax.add_patch(Rectangle((l_ - 0.46, c - 0.46), 0.92, 0.92, fill=False, ec="k", lw=1.2))
    if annotate is None:
        annotate = v.size <= 200
    if annotate:
        for (c, l_), val in np.ndenumerate(v):
            if np.isfinite(val):
                ax.text(l_, c, f"{val:.3f}", ha="center", va="center", fontsize=7,
                        color="w" if abs(norm(val) - 0.5) > 0.35 else "k")
    if colorbar:
        cb = ax.figure.colorbar(im, ax=ax, extend="both")
        cb.set_label(f"Weibull k of |w| ({_trim_label(stat)})")
        cb.ax.axhline(k0, color="k", lw=1)
        cb.ax.axhspan(*WEIBULL_BAND, color="#e6ab02", alpha=0.6)
    layers, comps = ds["layer"].values, [str(c) for c in ds["component"].values]
    step = max(1, int(np.ceil(layers.size / 24)))
    ax.set_xticks(np.arange(0, layers.size, step), labels=[str(x) for x in layers[::step]])
    ax.set_yticks(np.arange(len(comps)), labels=comps)
    ax.set_xlabel("layer (block)")
    ax.set_title(fit_title(ax, f"{title_label(ds)}\nWeibull k of |w| ({_trim_label(stat)}); "
                               f"white = k₀ = {k0:.4f}; framed: its {stat.replace('_', ' ')} "
                               "differs from the null (per-statistic BH)"), fontsize=9)
    return ax


def plot_terminal_k(ds: xr.Dataset, ax=None, *, stat: str = "weibull_k"):
    """k of every layer per component (dots, median bar) beside k₀, the paper's band and each
    component's null 95 % range."""
    _check(ds, stat)
    ax = figure_axes(ax)
    k0 = _anchor(ds, stat)
    comps = [str(c) for c in ds["component"].values]
    x = np.arange(len(comps))
    ax.axhspan(*WEIBULL_BAND, color="#e6ab02", alpha=0.35,
               label=f"paper's band [{WEIBULL_BAND[0]}, {WEIBULL_BAND[1]}] (FFN, W_o)")
    ax.axhline(k0, color="k", ls="--", lw=1, label=f"half-normal anchor k₀ = {k0:.4f}")
    vals = ds["value"].sel(stat=stat)
    lo_hi = []
    for i, c in enumerate(comps):
        mean = ds["null_mean"].sel(stat=stat, component=c).values
        sd = ds["null_std"].sel(stat=stat, component=c).values
        ok = np.isfinite(mean) & np.isfinite(sd)
        if ok.any():  # one range per shape; layers of a component share it
            m, s = float(np.median(mean[ok])), float(np.median(sd[ok]))
            lo_hi.append((m - 1.96 * s, m + 1.96 * s))
            ax.plot([i, i], lo_hi[-1], color="0.55", lw=7, solid_capstyle="butt", alpha=0.7,
                    label="null 95 % (mean ± 1.96 sd)" if len(lo_hi) == 1 else None)
    rng = np.random.default_rng(0)
    flags = ds["flag"].sel(stat=stat)
    used = set()

    def once(text, n):
        if n and text not in used:
            used.add(text)
            return text
        return None

    for i, c in enumerate(comps):
        y = vals.sel(component=c).values
        f = flags.sel(component=c).values
        ok = np.isfinite(y)
        jitter = rng.uniform(-0.18, 0.18, y.size)
        plain, odd = ok & ~f, ok & f
        ax.scatter(i + jitter[plain], y[plain], s=14, c="C0", alpha=0.8, zorder=3,
                   label=once("layers", plain.any()))
        ax.scatter(i + jitter[odd], y[odd], s=16, c="C3", marker="D", zorder=3,
                   label=once("layers whose k differs from the null (per-statistic BH)",
                              odd.any()))
        if ok.any():
            ax.plot([i - 0.3, i + 0.3], [np.median(y[ok])] * 2, color="k", lw=2, zorder=4,
                    label=once("median over layers", True))
    ax.set_xticks(x, labels=comps, rotation=30 if len(comps) > 8 else 0)
    ax.set_xlim(-0.6, len(comps) - 0.4)
    ax.set_ylabel(f"Weibull k of |w| ({_trim_label(stat)})")
    ax.set_title(f"{title_label(ds)}: k per component", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    return ax


def plot_k_trajectory(ds: xr.Dataset, component: str, ax=None, *, stat: str = "weibull_k",
                      legend: bool = True):
    """Weibull k of ``component`` across a collection's entries (x: ``step`` or order): median
    over layers, each layer faint (flagged marked), the null 95 % range, k₀ and the band."""
    from ..scoring.collection.combine import collection_dim, labels_of

    _check(ds, stat)
    dim = collection_dim(ds)
    if dim is None:
        raise InputError("plot_k_trajectory takes a collection (a leading checkpoint or model "
                         "dimension); plot_terminal_k shows one model")
    if component not in [str(c) for c in ds["component"].values]:
        raise InputError(f"no component {component!r} in this score")
    ax = figure_axes(ax)
    k0 = _anchor(ds, stat)
    sub = ds.sel(component=component, stat=stat)
    present = sub["storage"].values != ""  # (entry, layer)
    v = np.where(present, sub["value"].values, np.nan)
    mean = np.where(present, sub["null_mean"].values, np.nan)
    sd = np.where(present, sub["null_std"].values, np.nan)
    flag = present & sub["flag"].values.astype(bool)
    has = present.any(axis=1)
    x = np.asarray(ds["step"].values if "step" in ds.coords else np.arange(v.shape[0]),
                   dtype=float)

    def med(a):
        out = np.full(a.shape[0], np.nan)
        for i in np.nonzero(has)[0]:
            out[i] = np.nanmedian(a[i][present[i]])
        return out

    m, s = med(mean), med(sd)
    ax.axhspan(*WEIBULL_BAND, color="#e6ab02", alpha=0.35,
               label=f"paper's band [{WEIBULL_BAND[0]}, {WEIBULL_BAND[1]}]")
    ax.axhline(k0, color="k", ls="--", lw=1, label=f"anchor k₀ = {k0:.4f}")
    ax.fill_between(x, m - 1.96 * s, m + 1.96 * s, color="0.6", alpha=0.45, lw=0,
                    label="null 95 % (mean ± 1.96 sd)")
    for j in range(v.shape[1]):
        ax.plot(x, v[:, j], color="C0", lw=0.8, alpha=0.3, label="layers" if j == 0 else None)
    if flag.any():
        xi = np.broadcast_to(x[:, None], v.shape)
        ax.scatter(xi[flag], v[flag], s=14, c="C3", marker="D", zorder=3,
                   label=f"this layer's {stat.replace('_', ' ')} differs (per-statistic BH)")
    if "component_flag" in sub:  # the matrix's own decision (what the summary counts)
        decided = present & sub["component_flag"].values.astype(bool)
        if decided.any():
            xi = np.broadcast_to(x[:, None], v.shape)
            ax.scatter(xi[decided], v[decided], s=46, facecolors="none", edgecolors="C1",
                       lw=1.2, zorder=3, label="matrix differs from the null (its decision)")
    ax.plot(x, med(v), "o-", color="k", lw=2, ms=4, zorder=4, label="median over layers")
    if "step" in ds.coords:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("step")
    else:
        ax.set_xticks(x, labels=labels_of(ds), rotation=30 if len(x) > 4 else 0)
        ax.set_xlabel(dim)
    ax.set_ylabel(f"Weibull k of |w| ({_trim_label(stat)})")
    ax.set_title(component, fontsize=10)
    if legend:
        ax.legend(fontsize=7, loc="best")
    return ax


__all__ = ["plot_k_heatmap", "plot_k_trajectory", "plot_terminal_k"]
