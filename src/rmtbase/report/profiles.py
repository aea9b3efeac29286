"""Layer profiles and training trajectories of the spectral statistics, each against its null.

The four statistics of seed 003's Figures 13–16, all scale-free so models of any σ compare:

- ``lambda_max``: λ_max self-normalised, x_max = λ_max / (σ_Q² σ_K² d²) with σ the head's
  entry rms (the largest normalised eigenvalue; its null limit is the upper edge x₊ of
  MP_c ⊠ MP_c, c = d_h/d);
- ``npr``, ``spectral_entropy``, ``condition_number`` (log scale).

A profile point is the mean over a layer's heads; the heads themselves are shown as dots. The
null band is the central 95 % (2.5–97.5 %, and the median) of **one head's** statistic under
the Gaussian null at that model's (d, d_h) and storage, from the spectral null table
(:func:`rmtbase.baseline.cache.null_table`, ≥ 1000 draws; shipped, cached or generated). A model
whose layers are stored differently (``layer_null_storage``) has each layer's band in
:func:`profile_table` and the band of the storage most layers share in the plots.
Depth is the layer index over (n_layers − 1), 0 to 1.

Plot functions take ``ax=None`` and return the Axes; :func:`verdict_grid` returns a Figure.
"""

from __future__ import annotations

import functools

import numpy as np
import xarray as xr

from ..errors import InputError
from ..scoring.collection import collection_dim, entries, labels_of

#: statistic -> (axis label, log scale)
PROFILE_STATS = {
    "lambda_max": (r"$\lambda_{max} / (\sigma_Q^2\sigma_K^2 d^2)$", True),
    "npr": ("NPR", False),
    "spectral_entropy": (r"spectral entropy $S_\lambda$ (nats)", False),
    "condition_number": (r"condition number $\kappa$", True),
}
BAND_QUANTILES = (0.025, 0.5, 0.975)
_MAX_PANELS = 12  # rmtbase.report.figures.MAX_PANELS


def _check(stat: str) -> str:
    if stat not in PROFILE_STATS:
        raise InputError(f"profile statistic must be one of {', '.join(PROFILE_STATS)}, "
                         f"got {stat!r}")
    return stat


def head_values(ds: xr.Dataset, stat: str) -> np.ndarray:
    """(layer, head) values of ``stat`` for a single score, scale-free (module docstring):
    from the stored statistic where scored, else from the normalised spectrum ``qk_spectrum``."""
    _check(stat)
    name = f"qk.{stat}"
    if name in ds["stat"].values:
        v = ds["value"].sel(stat=name).values
        if stat == "lambda_max":
            v = v / ((ds["sigma_q"].values * ds["sigma_k"].values) ** 2 * float(ds.attrs["d"]) ** 2)
        return np.asarray(v, dtype=float)
    x = ds["qk_spectrum"].values
    if stat == "lambda_max":
        return x[..., 0]
    if stat == "condition_number":
        return x[..., 0] / x[..., -1]
    p = x / x.sum(-1, keepdims=True)
    if stat == "npr":
        return 1.0 / (x.shape[-1] * np.sum(p * p, axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=-1)


@functools.cache
def null_band(d: int, d_h: int, storage: str = "float32", seed: int = 0) -> dict:
    """{stat: (2.5 %, 50 %, 97.5 %)} of one null head's scale-free statistics at (d, d_h)."""
    from ..baseline.cache import null_table
    from ..decision.scale import normalise

    t = null_table(int(d), int(d_h), stats="spectral", min_draws=1000, seed=int(seed),
                   storage=storage)
    rq, rk = t["q_rms"].values.ravel(), t["k_rms"].values.ravel()
    out = {}
    for stat in PROFILE_STATS:
        v = t[stat].values.ravel()
        if stat == "lambda_max":
            v = normalise("qk.lambda_max", v, rq, rk) / float(d) ** 2
        out[stat] = tuple(float(q) for q in np.quantile(v[np.isfinite(v)], BAND_QUANTILES))
    return out


def band_of(ds: xr.Dataset, stat: str, layer: int | None = None) -> tuple[float, float, float]:
    """The null band of ``stat`` for a single score's shape and storage. Where the layers'
    nulls differ in storage (``layer_null_storage``), the band of layer position ``layer``'s
    storage, or with ``layer=None`` of the storage most layers share."""
    storage = str(ds.attrs.get("null_storage", "float32")) or "float32"
    if "layer_null_storage" in ds:
        per = [str(s) for s in np.asarray(ds["layer_null_storage"].values).ravel() if str(s)]
        if layer is not None and str(ds["layer_null_storage"].values[layer]):
            storage = str(ds["layer_null_storage"].values[layer])
        elif per:
            storage = max(dict.fromkeys(per), key=per.count)
    return null_band(int(ds.attrs["d"]), int(ds.attrs["d_h"]), storage)[_check(stat)]


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots()
    return ax


def _depth(n: int) -> np.ndarray:
    return np.arange(n) / max(n - 1, 1)


def profile_table(items, stat: str):
    """``pandas.DataFrame``: per model and layer, the depth, the layer mean of ``stat`` and
    the null band. ``items``: [(label, single score)]."""
    import pandas as pd

    rows = []
    for label, ds in items:
        v = head_values(ds, stat)
        for i, (layer, depth) in enumerate(zip(ds["layer"].values, _depth(v.shape[0]),
                                               strict=True)):
            lo, med, hi = band_of(ds, stat, i)
            rows.append(dict(model=label, layer=int(layer), depth=float(depth), stat=stat,
                             mean=float(np.nanmean(v[i])), null_lo=lo, null_median=med,
                             null_hi=hi, d=int(ds.attrs["d"]), d_h=int(ds.attrs["d_h"])))
    return pd.DataFrame(rows)


def plot_layer_profile(items, stat: str, ax=None):
    """Layer profile of ``stat`` for each (label, single score) in ``items`` over depth 0–1:
    line = layer mean over heads, dots = heads, shaded = that model's one-head null 95 %
    (one band per distinct (d, d_h, storage)), dashed = its median. Returns the Axes."""
    ax = _axes(ax)
    ylab, log = PROFILE_STATS[_check(stat)]
    drawn = {}
    for i, (label, ds) in enumerate(items):
        colour = f"C{i % 10}"
        v = head_values(ds, stat)
        depth = _depth(v.shape[0])
        key = (int(ds.attrs["d"]), int(ds.attrs["d_h"]), str(ds.attrs.get("null_storage", "")))
        if key not in drawn:
            lo, med, hi = band_of(ds, stat)
            drawn[key] = colour
            ax.axhspan(lo, hi, color=colour, alpha=0.10, lw=0,
                       label=f"null 95 %, one head (d={key[0]}, d_h={key[1]})")
            ax.axhline(med, color=colour, ls="--", lw=0.8, alpha=0.7)
        ax.scatter(np.repeat(depth, v.shape[1]), v.ravel(), s=5, color=colour, alpha=0.35,
                   lw=0)
        ax.plot(depth, np.nanmean(v, axis=1), "o-", ms=3, color=colour, label=label)
    if log:
        ax.set_yscale("log")
    ax.set_xlim(-0.03, 1.03)
    ax.set_xlabel("depth (layer / (n_layers − 1))")
    ax.set_ylabel(ylab)
    ax.set_title(f"{stat}: layer mean over heads (dots: heads)", fontsize=9)
    ax.legend(fontsize=7)
    return ax


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
    """``stat`` across a collection's entries: one line per layer (its mean over heads,
    coloured by depth), the one-head null band of the first entry's shape shaded (and of any
    other shape as a step band). Returns the Axes."""
    import matplotlib as mpl

    if collection_dim(ds) is None:
        raise InputError("plot_trajectory needs a collection (checkpoint or model dimension)")
    ax = _axes(ax)
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
    """``text`` headed by the model's name (:func:`rmtbase.report._labels.collection_label`)
    where the Dataset records one: a figure of one statistic says whose it is. With ``ax``,
    broken into lines that fit its width (:func:`rmtbase.report._labels.fit_title`)."""
    from ._labels import collection_label, fit_title

    name = collection_label(ds)
    text = f"{name}: {text}" if name else text
    return fit_title(ax, text) if ax is not None else text


def plot_flag_trajectory(ds: xr.Dataset, ax=None):
    """Fraction of heads that differ from the null (BH over each entry's heads) across the
    collection, overall and per layer. Returns the Axes."""
    import matplotlib as mpl

    ax = _axes(ax)
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
    """Small multiples: the verdict heatmap of each entry on the one fixed scale of
    :func:`rmtbase.report.figures.plot_verdict` (−log₁₀ head p), at most 12 (evenly spaced,
    first and last included; ticks at 7 points). Returns a Figure."""
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


__all__ = ["BAND_QUANTILES", "PROFILE_STATS", "band_of", "head_values", "null_band",
           "plot_flag_trajectory", "plot_layer_profile", "plot_trajectory", "profile_table",
           "verdict_grid"]
