"""What a whole-matrix score writes: ``components.nc``, ``components.csv``, a summary, figures.

:func:`write_components` adds, inside an open :class:`rmtbase.files.output.OutputFolder`
(the ``rmtbase score`` folder: all or nothing, listed in its manifest):

- ``components.nc`` — the Dataset of :func:`rmtbase.scoring.components.score_components`,
  dims (layer, component, stat);
- ``components.csv`` — one row per (layer, component, stat) test, with the matrix's shape,
  storage, rms and decision (rows of components a layer lacks are left out);
- ``figures/components_weibull_k.png`` — :func:`.component_figures.plot_k_heatmap` (the
  Weibull paper's Figure 6 layout) and ``figures/components_terminal_k.png`` —
  :func:`.component_figures.plot_terminal_k`.

:func:`component_table` is the text block printed by the CLI and appended to ``summary.txt``.
"""

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
    """``pandas.DataFrame``: one row per (layer, component, stat) of a matrix that exists."""
    df = ds[list(_CSV_VARS)].to_dataframe().reset_index()
    cells = ds[list(_CELL_VARS)].to_dataframe().reset_index()
    df = df.merge(cells, on=["layer", "component"], how="left")
    return df[df["storage"] != ""].reset_index(drop=True)


def component_table(ds: xr.Dataset) -> str:
    """Per component: shape, storage, median Weibull k over layers (80/90/100 % trims) against
    the null's mean, and how many layers' matrices differ from the null."""
    a = ds.attrs
    n = int(ds["component_flag"].sum())
    total = int((ds["storage"] != "").sum())
    lines = [f"{a.get('model', '?')}: {n} of {total} whole matrices differ from the null "
             f"(i.i.d. N(0, sigma^2) at their own shape and storage; BH over matrices, "
             f"alpha={a.get('alpha')}; {a.get('draws')} null draws per shape)",
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


def write_components(out, ds: xr.Dataset, *, figures: bool = True) -> None:
    """Write the files of the module docstring into the open OutputFolder ``out``."""
    out.write_netcdf("components.nc", ds)
    out.write_text("components.csv", long_table(ds).to_csv(index=False))
    if figures:
        _figures(ds, lambda fig, name: out.save_figure(fig, Path("figures") / name))


__all__ = ["component_table", "long_table", "write_components"]
