"""A collection's figures across its entries (x: the training step where recorded, else order).

:func:`plot_trajectory` (layer means against the one-head null band, :mod:`.profiles`),
:func:`plot_flag_trajectory` (fraction flagged), :func:`verdict_grid` (small multiples, returns
a Figure). Plot functions take ``ax=None`` and return the Axes."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..errors import InputError
from ..scoring.collection.combine import collection_dim, entries, labels_of
from ._labels import figure_axes
from .profiles import PROFILE_STATS, _check, band_of, head_values

_MAX_PANELS = 12  # rmtbase.report.figures.MAX_PANELS


def _x_axis(ds: xr.Dataset, ax):
    """x positions of a collection's entries: the step where known (symlog when it spans more
    than two decades), else the entry index labelled by name."""
    dim = collection_dim(ds)
    if "step" in ds.coords:
        x = ds["step"].values.astype(float)
        if x.max() > 100 * max(x[x > 0].min() if (x > 0).any() else 1.0, 1.0):
            ax.set_xscale("symlog", linthresh=max(1.0, float(x[x > 0].min()) if (x > 0).any()
                                                  else 1.0))
        if x.max() <= 100:
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("training step")
        return x
    x = np.arange(ds.sizes[dim], dtype=float)
    labels = labels_of(ds)
    step = max(1, len(labels) // 12)
    ax.set_xticks(x[::step], labels=labels[::step], rotation=30, ha="right", fontsize=7)
    ax.set_xlabel(dim)
    return x


def plot_trajectory(ds: xr.Dataset, stat: str, ax=None):
    """``stat`` across entries: one line per layer (mean over heads, coloured by depth), the
    one-head null band of each shape shaded."""
    import matplotlib as mpl

    if collection_dim(ds) is None:
        raise InputError("plot_trajectory needs a collection (checkpoint or model dimension)")
    ax = figure_axes(ax)
    ylab, log = PROFILE_STATS[_check(stat)]
    x = _x_axis(ds, ax)
    items = entries(ds)
    n_layers = max(e["layer"].size for _, e in items)
    means = np.full((len(items), n_layers), np.nan)
    bands = np.array([band_of(e, stat) for _, e in items])
    for i, (_, e) in enumerate(items):
        v = np.nanmean(head_values(e, stat), axis=1)
        means[i, : v.size] = v
    ax.fill_between(x, bands[:, 0], bands[:, 2], step="mid", color="0.8",
                    label="null 95 %, one head")
    ax.plot(x, bands[:, 1], color="0.45", ls="--", lw=0.8, drawstyle="steps-mid",
            label="null median")
    cmap = mpl.colormaps["viridis"]
    for layer in range(n_layers):
        ax.plot(x, means[:, layer], "o-", ms=2.5, lw=1.1,
                color=cmap(layer / max(n_layers - 1, 1)),
                label=f"layer {layer}" if n_layers <= 8 or layer in (0, n_layers - 1) else None)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylab)
    ax.set_title(_named(ds, f"{stat} (layer mean over heads; colour: depth)", ax), fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    return ax


def _named(ds: xr.Dataset, text: str, ax=None) -> str:
    """``text`` headed by the model's name where the Dataset records one; with ``ax``, fitted to
    its width."""
    from ._labels import collection_label, fit_title

    name = collection_label(ds)
    text = f"{name}: {text}" if name else text
    return fit_title(ax, text) if ax is not None else text


def plot_flag_trajectory(ds: xr.Dataset, ax=None):
    """Fraction of heads that differ from the null (BH over each entry's heads) across the
    collection, overall and per layer. Returns the Axes."""
    import matplotlib as mpl

    ax = figure_axes(ax)
    x = _x_axis(ds, ax)
    items = entries(ds)
    frac = [float(e["head_flag"].mean()) for _, e in items]
    n_layers = max(e["layer"].size for _, e in items)
    cmap = mpl.colormaps["viridis"]
    for layer in range(n_layers):
        f = [float(e["head_flag"].isel(layer=layer).mean()) if layer < e["layer"].size
             else np.nan for _, e in items]
        ax.plot(x, f, lw=0.8, alpha=0.7, color=cmap(layer / max(n_layers - 1, 1)))
    ax.plot(x, frac, "o-", color="k", lw=1.8, ms=3, label="all heads")
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("fraction of heads flagged")
    ax.set_title(_named(ds, "heads that differ from the null (thin lines: layers)", ax),
                 fontsize=9)
    ax.legend(fontsize=7)
    return ax


def verdict_grid(ds: xr.Dataset):
    """Small multiples of each entry's verdict heatmap on one fixed scale (−log₁₀ head p), at most
    12 (evenly spaced, first and last included). Returns a Figure."""
    from matplotlib.figure import Figure

    from .figures import plot_verdict, verdict_colorbar

    items = entries(ds)
    n = len(items)
    pick = sorted(set(np.linspace(0, n - 1, min(n, _MAX_PANELS)).round().astype(int).tolist()))
    ncol = min(4, len(pick))
    nrow = -(-len(pick) // ncol)
    e0 = items[0][1]
    pw = float(np.clip(0.12 * e0.sizes["head"] + 1.2, 2.2, 4.0))
    ph = float(np.clip(0.1 * e0.sizes["layer"] + 1.2, 2.0, 3.6))
    fig = Figure(figsize=(ncol * pw + 1.2, nrow * ph + 0.9), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrow, ncol, squeeze=False)).ravel()
    for ax, i in zip(axes, pick, strict=False):
        label, e = items[i]
        plot_verdict(e, ax, colorbar=False, spikes=False)
        ax.set_title(f"{label}: {int(e['head_flag'].sum())}/{e['head_flag'].size}", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.label.set_size(7)
        ax.yaxis.label.set_size(7)
        if ax.get_legend():
            ax.get_legend().remove()
    for ax in axes[len(pick):]:
        ax.set_axis_off()
    verdict_colorbar(fig, axes[0].images[0], list(axes), shrink=0.7)
    shown = f"{len(pick)} of {n} shown" if len(pick) < n else f"{n} entries"
    fig.suptitle(_named(ds, f"per-head verdict ({shown}; boxed: flagged)"), fontsize=10)
    return fig


__all__ = ["plot_flag_trajectory", "plot_trajectory", "verdict_grid"]
