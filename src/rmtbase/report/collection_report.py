"""Report of a collection (leading ``checkpoint`` or ``model`` dimension), all-or-nothing.

``scores.nc``, ``heads.csv`` (entry × head), ``scores.csv`` (omitted above :data:`MAX_CSV_ROWS`
rows, said in the summary), ``summary.txt`` (a line per entry, then its most anomalous heads),
``figures/`` (trajectories for checkpoints, profiles for models, ``verdict_grid.png``),
``report.html`` with an entry selector, and a whole-matrix collection's files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from ..files.output import OutputFolder
from ..scoring.collection.combine import collection_dim, entries
from . import collection_figures, profiles
from ._html_figures import figure_saver
from .line_width import fit_text
from .tables import anomaly_table

MAX_CSV_ROWS = 1_000_000
_HEAD_VARS = ("head_effect", "n_spikes", "head_p_value", "head_p_method", "head_q_value",
              "head_flag", "head_top_stat", "head_n_stats", "sigma_q", "sigma_k")
_TEST_VARS = ("value", "null_mean", "null_std", "z", "effect", "distance", "p_value", "p_method",
              "q_value", "percentile", "flag")


def head_table(ds: xr.Dataset):
    """One row per (entry, layer, head) that exists (``step`` too where known)."""
    df = ds[[v for v in (*_HEAD_VARS, "head_present") if v in ds]].to_dataframe().reset_index()
    return df[df["head_present"]].drop(columns="head_present")


def long_table(ds: xr.Dataset):
    """One row per (entry, layer, head, stat) that exists."""
    df = ds[[v for v in (*_TEST_VARS, "head_present") if v in ds]].to_dataframe().reset_index()
    return df[df["head_present"] & df["p_method"].ne("")].drop(columns="head_present")


def entry_lines(ds: xr.Dataset, dim: str | None = None) -> list[str]:
    """A heading and one line per entry: its flagged heads, model and shape (``dim``: the
    collection dimension, read from ``ds`` when not given)."""
    dim = dim or collection_dim(ds)
    items = entries(ds)
    lines = [f"{len(items)} {dim}s scored into one Dataset (dimension '{dim}'):"]
    width = max(len(lab) for lab, _ in items)
    for lab, e in items:
        n, f = int(e["head_flag"].size), int(e["head_flag"].sum())
        lines.append(f"{lab:<{width}}  {f:>5} of {n:<5} heads differ from the null  "
                     f"({e.attrs.get('model', '?')}; d={e.attrs.get('d')}, "
                     f"d_h={e.attrs.get('d_h')}, {e.attrs.get('storage_dtype', '?')})")
    return lines


def summary_text(ds: xr.Dataset, dim: str, top: int = 3) -> str:
    """Per entry: flagged heads; then the null(s) and each entry's profile (anomaly_table)."""
    items = entries(ds)
    lines = [*entry_lines(ds, dim), ""]
    nulls = sorted({str(e.attrs.get("null", "?")) for _, e in items})
    lines += [f"Null: {n}." for n in nulls]
    lines.append(f"Decision: {ds.attrs.get('decision', 'per head, BH over heads')}; alpha = "
                 f"{ds.attrs.get('alpha')} (within each {dim}).")
    if not _csv_fits(ds):
        lines.append(f"scores.csv is left out: more than {MAX_CSV_ROWS} rows (read scores.nc).")
    for lab, e in items:
        lines += ["", f"== {lab}", anomaly_table(e, top)]
    return "\n".join(lines) + "\n"


def _csv_fits(ds: xr.Dataset) -> bool:
    return int(np.prod([ds.sizes[d] for d in ds["value"].dims])) <= MAX_CSV_ROWS


def _figures(ds: xr.Dataset, dim: str, save) -> list[str]:
    from matplotlib.figure import Figure

    names = []
    if dim == "checkpoint":
        for stat in profiles.PROFILE_STATS:
            f = Figure(figsize=(7, 4.2), layout="constrained")
            collection_figures.plot_trajectory(ds, stat, f.subplots())
            names.append(save(f, f"trajectory_{stat}.png"))
        f = Figure(figsize=(7, 3.6), layout="constrained")
        collection_figures.plot_flag_trajectory(ds, f.subplots())
        names.append(save(f, "trajectory_flags.png"))
    else:
        items = entries(ds)
        for stat in profiles.PROFILE_STATS:
            f = Figure(figsize=(7, 4.2), layout="constrained")
            profiles.plot_layer_profile(items, stat, f.subplots())
            names.append(save(f, f"profile_{stat}.png"))
    names.append(save(collection_figures.verdict_grid(ds), "verdict_grid.png"))
    return names


CAPTIONS = {
    "verdict_grid.png": "Per-head verdict on one fixed scale (head effect in null sd, or −log₁₀ "
                        "head p for scores without it; boxed: flagged).",
    "trajectory_flags.png": "Fraction of heads that differ from the null, per checkpoint.",
    **{f"trajectory_{s}.png": f"{s}: layer means across training with the one-head null band."
       for s in profiles.PROFILE_STATS},
    **{f"profile_{s}.png": f"{s}: layer profiles over depth with each model's null band."
       for s in profiles.PROFILE_STATS},
    "components_k_trajectory.png": "Whole matrices: Weibull k of |w| (middle 80 %) across "
                                   "training, per component — median over layers (black), "
                                   "each layer (faint), the null's 95 % range, the half-normal "
                                   "anchor k₀ and the Weibull paper's band.",
}


def write_collection_report(ds: xr.Dataset, out_dir, dim: str, *, figures: bool = True,
                            top: int = 3, components: xr.Dataset | None = None,
                            extras: dict | None = None, heavy_tail: xr.Dataset | None = None
                            ) -> dict[str, Path]:
    """Write the collection report along ``dim`` (shape already checked by
    :func:`rmtbase.report.write.report_shape`); returns {file name: final path}.
    ``heavy_tail``: the entries' heavy-tail tables along ``dim``
    (:func:`rmtbase.scoring.collection.heavy_tail.heavy_tail_collection`):
    heavy_tail.nc, heavy_tail.csv, figures/alpha_trajectory.png and their summary lines."""
    from .component_report import component_entry_lines, write_component_collection
    from .html import score_html

    summary = summary_text(ds, dim, top)
    if components is not None:
        summary += ("\nWhole matrices (components.nc, components.csv):\n"
                    + "\n".join(component_entry_lines(components)) + "\n")
    if heavy_tail is not None:
        from .heavy_tail_write import summary_lines

        summary += "\n" + "\n".join(summary_lines(heavy_tail, dim)) + "\n"
    with OutputFolder(out_dir, kind="rmtbase score") as out:
        out.write_netcdf("scores.nc", ds)
        for name, extra in (extras or {}).items():
            out.write_netcdf(name, extra)
        out.write_text("heads.csv", head_table(ds).to_csv(index=False))
        if _csv_fits(ds):
            out.write_text("scores.csv", long_table(ds).to_csv(index=False))
        out.write_text("summary.txt", fit_text(summary))
        images = {}
        if figures:
            save = figure_saver(out, images)
            _figures(ds, dim, save)
        if components is not None:
            write_component_collection(out, components, dim,
                                       save=save if figures else None)
        if heavy_tail is not None:
            from .heavy_tail_write import write_collection_table

            write_collection_table(out, heavy_tail, dim, save=save if figures else None)
        out.write_text("report.html", score_html(ds, images, summary=summary,
                                                 captions=CAPTIONS))
    return out.written


__all__ = ["MAX_CSV_ROWS", "entry_lines", "head_table", "long_table", "summary_text",
           "write_collection_report"]
