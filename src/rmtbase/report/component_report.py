"""What a whole-matrix score writes into an open :class:`rmtbase.files.output.OutputFolder`.

:func:`write_components`: ``components.nc``, ``components.csv`` (one row per (layer,
component, stat) test) and its figures; :func:`component_table`: the summary block;
:func:`write_component_collection` and :func:`component_entry_lines`: the same for a collection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from . import component_figures as cf
from .tables import fmt_p

FIGURES = {"components_weibull_k.png": "heatmap", "components_terminal_k.png": "terminal"}
_CSV_VARS = ("value", "null_mean", "null_std", "z", "effect", "p_value", "p_method", "q_value",
             "percentile", "flag")
_CELL_VARS = ("rows", "cols", "storage", "null_storage", "rms", "component_p_value",
              "component_q_value", "component_flag", "component_top_stat")


def long_table(ds: xr.Dataset):
    """``pandas.DataFrame``: one row per (layer, component, stat) of a matrix that exists;
    of a collection, per (entry, layer, component, stat), with ``step`` where known."""
    from ..scoring.collection.combine import collection_dim

    keys = [d for d in (collection_dim(ds), "layer", "component") if d]
    df = ds[list(_CSV_VARS)].to_dataframe().reset_index()
    cells = ds[list(_CELL_VARS)].drop_vars("step", errors="ignore").to_dataframe().reset_index()
    df = df.merge(cells, on=keys, how="left")
    return df[df["storage"] != ""].reset_index(drop=True)


def component_table(ds: xr.Dataset) -> str:
    """Per component: shape, storage, median Weibull k over layers (80/90/100 % trims) against
    the null's mean, and how many layers' matrices differ from the null."""
    a = ds.attrs
    n = int(ds["component_flag"].sum())
    total = int((ds["storage"] != "").sum())
    lines = [f"{a.get('model', '?')}: {n} of {total} whole matrices differ from the null "
             f"(i.i.d. N(0, sigma^2) at their own shape and storage; BH over matrices, "
             f"FDR {a.get('alpha')}; {a.get('draws')} null draws per shape)",
             f"Weibull anchor k0 = {float(a.get('weibull_k0', np.nan)):.4f} (80 %); the Weibull "
             f"paper's band of median terminal k of FFN and W_o: [{a.get('weibull_band', '')}]",
             f"{'component':<14} {'shape':>13} {'storage':>8} {'k80 med':>8} {'null k80':>8} "
             f"{'k90 med':>8} {'k100 med':>8} {'max/q99':>8} {'differ':>7}  strongest (median "
             f"p)"]
    for c in ds["component"].values:
        sub = ds.sel(component=c)
        ok = sub["storage"].values != ""
        if not ok.any():
            continue
        rows, cols = int(sub["rows"].values[ok][0]), int(sub["cols"].values[ok][0])
        st = str(sub["storage"].values[ok][0])

        def med(var, stat, sub=sub, ok=ok):
            return float(np.median(sub[var].sel(stat=stat).values[ok]))

        top = sub["component_top_stat"].values[ok]
        names, counts = np.unique(top[top != ""], return_counts=True)
        common = str(names[np.argmax(counts)]) if names.size else "-"
        lines.append(
            f"{str(c):<14} {f'{rows}x{cols}':>13} {st:>8} {med('value', 'weibull_k'):>8.4f} "
            f"{med('null_mean', 'weibull_k'):>8.4f} {med('value', 'weibull_k_trim90'):>8.4f} "
            f"{med('value', 'weibull_k_trim100'):>8.4f} {med('value', 'max_over_q99'):>8.3g} "
            f"{int(sub['component_flag'].values[ok].sum()):>3}/{int(ok.sum()):<3}  {common} "
            f"({fmt_p(float(np.median(sub['component_p_value'].values[ok])))})")
    return "\n".join(lines)


def _figures(ds: xr.Dataset, save) -> None:
    from matplotlib.figure import Figure

    n_l, n_c = ds.sizes["layer"], ds.sizes["component"]
    f = Figure(figsize=(float(np.clip(0.45 * n_l + 3, 6, 16)), float(np.clip(0.4 * n_c + 1.8,
                                                                          3, 12))),
               layout="constrained")
    cf.plot_k_heatmap(ds, f.subplots())
    save(f, "components_weibull_k.png")
    f = Figure(figsize=(float(np.clip(0.8 * n_c + 3, 6, 16)), 4.5), layout="constrained")
    cf.plot_terminal_k(ds, f.subplots())
    save(f, "components_terminal_k.png")


def component_entry_lines(ds: xr.Dataset) -> list[str]:
    """Per entry of a whole-matrix collection: how many matrices differ from the null and the
    median Weibull k (80 %) over layers of each component, beside k₀."""
    from ..scoring.collection.combine import collection_dim, entries

    items = entries(ds)
    k0 = float(ds.attrs.get("weibull_k0", np.nan))
    lines = [f"{len(items)} {collection_dim(ds)}s; median Weibull k of |w| (middle 80 %) over "
             f"layers per component (k0 = {k0:.4f}; the Weibull paper's band "
             f"[{ds.attrs.get('weibull_band', '')}]):"]
    width = max(len(lab) for lab, _ in items)
    for lab, e in items:
        ok = e["storage"].values != ""
        meds = []
        for j, c in enumerate(e["component"].values):
            k = e["value"].sel(stat="weibull_k").values[:, j][ok[:, j]]
            if k.size:
                meds.append(f"{c} {np.median(k):.4f}")
        lines.append(f"{lab:<{width}}  {int(e['component_flag'].values[ok].sum()):>4} of "
                     f"{int(ok.sum()):<4} matrices differ from the null  k: {', '.join(meds)}")
    return lines


def write_component_collection(out, ds: xr.Dataset, dim: str, *, save=None) -> None:
    """Write a whole-matrix collection into ``out``; ``save(figure, name)`` saves a figure (None:
    no figures); the k-versus-step figure for a ``checkpoint`` collection only."""
    out.write_netcdf("components.nc", ds)
    out.write_text("components.csv", long_table(ds).to_csv(index=False))
    if save is not None and dim == "checkpoint":
        save(trajectory_figure(ds), "components_k_trajectory.png")


def trajectory_figure(ds: xr.Dataset, stat: str = "weibull_k"):
    """One panel per component (:func:`.component_figures.plot_k_trajectory`), shared y axis;
    a ``matplotlib.figure.Figure``."""
    from matplotlib.figure import Figure

    from ..scoring.collection.combine import collection_dim

    comps = [str(c) for c in ds["component"].values]
    ncols = min(len(comps), 3)
    nrows = -(-len(comps) // ncols)
    f = Figure(figsize=(4.4 * ncols, 3.4 * nrows + 0.4), layout="constrained")
    axes = np.atleast_1d(f.subplots(nrows, ncols, sharey=True, squeeze=False)).ravel()
    for i, (c, ax) in enumerate(zip(comps, axes, strict=False)):
        cf.plot_k_trajectory(ds, c, ax, stat=stat, legend=i == 0)
    for ax in axes[len(comps):]:
        ax.set_visible(False)
    dim = collection_dim(ds)
    labels = [str(v) for v in ds[dim].values]
    from ._labels import collection_label

    who = f"{name}: " if (name := collection_label(ds)) else ""
    f.suptitle(f"{who}whole matrices across {len(labels)} {dim}s ({labels[0]} … "
               f"{labels[-1]})", fontsize=10)
    return f


def write_components(out, ds: xr.Dataset, *, figures: bool = True) -> None:
    """Write the files of the module docstring into the open OutputFolder ``out``."""
    out.write_netcdf("components.nc", ds)
    out.write_text("components.csv", long_table(ds).to_csv(index=False))
    if figures:
        _figures(ds, lambda fig, name: out.save_figure(fig, Path("figures") / name))


__all__ = ["component_entry_lines", "component_table", "long_table", "trajectory_figure",
           "write_component_collection", "write_components"]
