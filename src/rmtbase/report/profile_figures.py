"""The profile as small multiples: one layer × head heatmap per axis, on fixed scales.

Ratio axes as log₂(ratio to null median) on [−2, 2]; alignment and symmetry on [−1, 1]; input
focus on [−0.5, 0.5]; outliers on [0, 10]; scale as log₁₀(σ_Q σ_K) on [−4, 0]; a dot marks a
flagged head; a model beyond a scale widens it to its own extreme."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..decision.axes import AxisField
from ._labels import fixed_grid, top_title

#: axis -> (transform of the effect or value, vmin, vmax, colour map, colour-bar label): each
#: axis's ``figure`` (:mod:`rmtbase.decision.axes`; an axis without one has no panel)
SCALES = AxisField(lambda a: a.figure)


def _panel_values(ds: xr.Dataset, axis: str) -> np.ndarray:
    how = SCALES[axis][0]
    src = "profile_value" if how.endswith("value") else "profile_effect"
    v = np.asarray(ds[src].sel(axis=axis).transpose("layer", "head").values, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        if how.startswith("log10"):
            return np.log10(v)
        if how.startswith("log2"):
            return np.log2(v)
    return v


def _limits(values, vmin: float, vmax: float) -> tuple[float, float]:
    """The fixed scale (vmin, vmax), widened to the finite values where they pass it;
    a scale centred on 0 stays centred (module docstring)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return vmin, vmax
    lo, hi = min(vmin, float(v.min())), max(vmax, float(v.max()))
    if vmin == -vmax:
        hi = max(-lo, hi)
        lo = -hi
    return lo, hi


def plot_profile_axis(ds: xr.Dataset, axis: str, ax=None, *, colorbar: bool = True):
    """One axis's heatmap (layer × head) on its fixed scale (:data:`SCALES`); returns ``ax``."""
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure().subplots()
    _, vmin, vmax, cmap, label = SCALES[axis]
    values = _panel_values(ds, axis)
    vmin, vmax = _limits(values, vmin, vmax)
    im = ax.imshow(values, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto",
                   interpolation="nearest", origin="lower")
    flag = np.asarray(ds["profile_flag"].sel(axis=axis).transpose("layer", "head").values)
    yi, xi = np.nonzero(flag)
    ax.plot(xi, yi, "k.", ms=2.5)
    ax.set_title(axis.replace("_", " "), fontsize=9)
    ax.set_xlabel("head", fontsize=7)
    ax.set_ylabel("layer", fontsize=7)
    ax.tick_params(labelsize=7)
    ax.set_yticks(range(ds.sizes["layer"]), [str(v) for v in ds["layer"].values])
    if colorbar:
        cb = ax.figure.colorbar(im, ax=ax, shrink=0.8)
        cb.set_label(label, fontsize=7)
        cb.ax.tick_params(labelsize=7)
    return ax


def profile_figure(ds: xr.Dataset, title: str = "", *, verdict: bool = False):
    """Small multiples of every profile axis of ``ds``; with ``verdict`` the verdict panel first
    (``verdict.png``)."""
    axes = (["verdict"] if verdict else []) + [str(a) for a in ds["axis"].values
                                               if str(a) in SCALES]
    ncol = min(4, len(axes))
    nrow = -(-len(axes) // ncol)
    w = float(np.clip(0.18 * ds.sizes["head"] + 1.8, 2.6, 5.0))
    h = float(np.clip(0.12 * ds.sizes["layer"] + 1.4, 2.0, 5.0))
    margins = {"left": 0.55, "right": 0.6, "bottom": 0.45, "top": 0.6}
    fig = fixed_grid(w * ncol, h * nrow, margins, (nrow, ncol), (0.75, 1.0))
    grid = fig.subplots(nrow, ncol, squeeze=False)
    for k, ax in enumerate(grid.ravel()):
        if k < len(axes) and axes[k] == "verdict":
            from .figures import plot_verdict

            plot_verdict(ds, ax, colorbar=False, spikes=False)
            cb = fig.colorbar(ax.images[0], ax=ax, shrink=0.8, extend="max")
            cb.set_label("-log10 head p", fontsize=7)
            cb.ax.tick_params(labelsize=7)
            ax.set_title(f"decision: {int(ds['head_flag'].sum())} of {ds['head_flag'].size} "
                         "heads flagged", fontsize=9)
            ax.set_xlabel("head (boxed: flagged)", fontsize=7)
            ax.set_ylabel("layer", fontsize=7)
            ax.tick_params(labelsize=7)
            if ax.get_legend():
                ax.get_legend().remove()
        elif k < len(axes):
            plot_profile_axis(ds, axes[k], ax)
        else:
            ax.set_axis_off()
    top_title(fig, (title + ": " if title else "") + "profile (fixed scales, widened where a "
              "head passes them; dots: flagged on that axis)", fontsize=10)
    return fig


__all__ = ["SCALES", "plot_profile_axis", "profile_figure"]
