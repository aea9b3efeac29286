"""The probe's output folder, all or nothing (:class:`rmtbase.files.output.OutputFolder`,
kind ``"rmtbase probe"``): ``probe.nc`` (the Dataset of :func:`.run.probe_model`),
``probe.csv`` (one row per (layer, head), one column per behaviour) and ``probe.png`` (one
layer × head heatmap per behaviour)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from ..files.output import OutputFolder
from .behaviour import BEHAVIOURS, DESCRIPTIONS

KIND = "rmtbase probe"


def probe_table(ds: xr.Dataset):
    """``pandas.DataFrame``: one row per (layer, head), one column per behaviour."""
    return ds[[b for b in BEHAVIOURS if b in ds]].to_dataframe().reset_index()


def probe_figure(ds: xr.Dataset):
    """A matplotlib Figure: one layer × head heatmap per behaviour (NaN panels say so)."""
    from matplotlib.figure import Figure

    names = [b for b in BEHAVIOURS if b in ds]
    n_l, n_h = ds.sizes["layer"], ds.sizes["head"]
    cols = 3
    rows = -(-len(names) // cols)
    w = float(np.clip(0.28 * n_h + 1.6, 3.2, 8.0))
    h = float(np.clip(0.2 * n_l + 1.2, 2.2, 7.0))
    fig = Figure(figsize=(cols * w, rows * h), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    for ax, name in zip(axes, names, strict=False):
        v = np.asarray(ds[name].transpose("layer", "head").values, dtype=float)
        units, meaning = DESCRIPTIONS[name]
        if not np.isfinite(v).any():
            ax.set_axis_off()
            ax.set_title(f"{name}: not defined ({ds.attrs.get('attention', '')} model)",
                         fontsize=9)
            continue
        vmax = 1.0 if units == "1" else None
        im = ax.imshow(v, aspect="auto", origin="lower", cmap="viridis",
                       vmin=0.0 if units == "1" else None, vmax=vmax, interpolation="nearest")
        ax.set_title(f"{name} ({units})" if units != "1" else name, fontsize=9)
        ax.set_xlabel("head", fontsize=8)
        ax.set_ylabel("layer", fontsize=8)
        ax.set_xticks(range(n_h)[:: max(1, n_h // 12)])
        ax.set_yticks(range(n_l)[:: max(1, n_l // 12)])
        ax.tick_params(labelsize=7)
        fig.colorbar(im, ax=ax, shrink=0.85)
    for ax in axes[len(names):]:
        ax.set_axis_off()
    fig.suptitle(f"{ds.attrs.get('model', '')}: attention on {ds.attrs.get('n_tokens', '?')} "
                 f"tokens, windows of {ds.attrs.get('window', '?')}", fontsize=10)
    return fig


def write_probe(ds: xr.Dataset, out_dir, *, figures: bool = True) -> dict[str, Path]:
    """Write ``probe.nc``, ``probe.csv`` and ``probe.png`` into ``out_dir`` all or nothing;
    returns {file name: final path}."""
    with OutputFolder(out_dir, kind=KIND) as out:
        out.write_netcdf("probe.nc", ds)
        out.write_text("probe.csv", probe_table(ds).to_csv(index=False))
        if figures:
            out.save_figure(probe_figure(ds), "probe.png")
    return out.written


__all__ = ["KIND", "probe_figure", "probe_table", "write_probe"]
