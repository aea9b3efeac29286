"""Compare scored models: layer profiles across families and per-model flag fractions.

``rmtbase compare DIR1 DIR2 … --out DIR`` reads score folders (or ``scores.nc``), each with its
own null, never weights; a collection contributes each entry. Output (all or nothing):
``figures/profile_<stat>.png``, ``figures/profiles.png`` (:mod:`.profiles`), ``flags.csv``,
``heads.csv``, ``profiles.csv``, ``summary.txt``, ``report.html``."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from ..errors import InputError
from ..files.interrupts import deferred
from ..files.output import OutputFolder, check_output_dir
from ..scoring.collection.combine import collection_dim, distinct_suffixes, entries, folder_labels
from . import profiles
from ._html_figures import figure_saver
from .storage_text import null_storage_read, storage_read

KIND = "rmtbase compare"
GROUPS = ("spectrum", "product law", "entry law")


def _short(ds: xr.Dataset) -> str:
    name = str(ds.attrs.get("model", "model")).split(" (", 1)[0]
    if os.path.isabs(name):
        name = os.path.basename(name.rstrip("/")) or name
    rev = str(ds.attrs.get("revision", "") or "")
    return f"{name}@{rev}" if rev else name


def _open(path: Path) -> xr.Dataset:
    nc = path / "scores.nc" if path.is_dir() else path
    if not nc.is_file():
        hint = " (it looks like a model: score it first with 'rmtbase score MODEL --out DIR')" \
            if (path / "config.json").exists() else ""
        raise InputError(f"{path} is not an rmtbase score output (no scores.nc){hint}")
    try:
        with deferred(), xr.open_dataset(nc) as ds:  # no interrupt inside HDF5
            ds = ds.load()
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {nc}: {str(exc).splitlines()[0] if str(exc) else exc}") \
            from None
    missing = [v for v in ("head_flag", "value", "qk_spectrum") if v not in ds]
    if missing or "d" not in ds.attrs and "d" not in ds:
        raise InputError(f"{nc} is not an rmtbase score (lacks {', '.join(missing) or 'd'})")
    if collection_dim(ds) is None:
        _check_shape(ds, nc)
    else:  # a collection stores each entry's (d, d_h): entries of several shapes are checked
        for label, e in entries(ds):  # one by one
            _check_shape(e, Path(f"{nc} [{label}]"))
    return ds


def _check_shape(ds: xr.Dataset, nc: Path) -> None:
    """InputError unless attrs d, d_h are the integers the file was scored at (d_h = stored
    ``rank``; (d, d_h) = the baseline cell where recorded); checked before any null table."""
    from ..errors import check_dims

    a = ds.attrs
    try:
        d, d_h = check_dims(a.get("d"), a.get("d_h"))
    except (InputError, TypeError) as exc:
        raise InputError(f"{nc} has a malformed shape: {exc}") from None
    rank = ds.sizes.get("rank")
    if rank is not None and rank != d_h:
        raise InputError(f"{nc} says d_h={d_h} but stores {rank} eigenvalues per head")
    cells = str(a.get("baseline_cells", "") or "")
    if cells and f"{d}x{d_h}" not in cells.split(","):
        raise InputError(f"{nc} says d={d}, d_h={d_h} but was scored against the null of "
                         f"{cells}")


def load_scores(paths) -> list[tuple[str, xr.Dataset]]:
    """[(label, single score)] from score folders, collections expanded. Labels are model names
    (@revision), told apart by folder when repeated; entries are ``<folder>:<entry>``."""
    paths = [Path(os.path.expanduser(os.fspath(p))) for p in paths]
    if not paths:
        raise InputError("give at least one score output folder")
    for p in paths:
        if not p.exists():
            raise InputError(f"{p} does not exist")
    folders = [p if p.is_dir() else p.parent for p in paths]
    names = dict(zip(folders, distinct_suffixes(folders), strict=False))
    items = []
    for p, folder in zip(paths, folders, strict=True):
        ds = _open(p)
        if collection_dim(ds) is None:
            items.append((_short(ds), ds, folder))
        else:
            prefix = f"{names[folder]}:" if len(paths) > 1 else ""
            items.extend((f"{prefix}{lab}", e, folder) for lab, e in entries(ds))
    labels = folder_labels([lab for lab, _, _ in items], [f for _, _, f in items])
    return [(lab, e) for lab, (_, e, _) in zip(labels, items, strict=True)]


def flag_table(items):
    """``pandas.DataFrame``, one row per model: shape, storage, the null, heads flagged, the
    flagged fraction and the fraction flagged by each group's statistic."""
    import pandas as pd

    rows = []
    for label, ds in items:
        flag = np.asarray(ds["head_flag"].values, dtype=bool)
        top = np.asarray(ds["head_top_stat"].values).astype(str)
        grp = {str(s): str(g) for s, g in zip(ds["stat"].values, ds["group"].values, strict=True)}
        row = dict(model=label, architecture=str(ds.attrs.get("architecture", "")),
                   d=int(ds.attrs["d"]), d_h=int(ds.attrs["d_h"]), layers=int(ds.sizes["layer"]),
                   heads_per_layer=int(ds.sizes["head"]),
                   storage=storage_read(ds),  # Q4_1, fp8_e4m3 … (storage_text.storage_read)
                   # what the null was stored as: the GGUF block format where there is one
                   null_storage=null_storage_read(ds),
                   null=str(ds.attrs.get("null_kind", "")), heads=int(flag.size),
                   flagged=int(flag.sum()), fraction=float(flag.mean()))
        for g in GROUPS:
            hit = np.array([grp.get(t) == g for t in top.ravel()]).reshape(top.shape)
            row[f"fraction_{g.replace(' ', '_')}"] = float((flag & hit).mean())
        rows.append(row)
    return pd.DataFrame(rows)


def _profile_figures(items, save) -> None:
    from matplotlib.figure import Figure

    for stat in profiles.PROFILE_STATS:
        f = Figure(figsize=(7, 4.4), layout="constrained")
        profiles.plot_layer_profile(items, stat, f.subplots())
        save(f, f"profile_{stat}.png")
    f = Figure(figsize=(12, 8.4), layout="constrained")
    axes = f.subplots(2, 2).ravel()
    for ax, stat in zip(axes, profiles.PROFILE_STATS, strict=True):
        profiles.plot_layer_profile(items, stat, ax)
    # one legend for the four panels, below them (each panel's own covered its data)
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes:
        if ax.get_legend():
            ax.get_legend().remove()
    short = [lab if len(lab) <= 40 else "…" + lab[-39:] for lab in labels]
    f.legend(handles, short, loc="outside lower center", ncol=min(4, max(1, len(short))),
             fontsize="small")
    f.suptitle("layer profiles (depth 0-1) against each model's null", fontsize=10)
    save(f, "profiles.png")


CAPTIONS = {
    "profiles.png": "λ_max (self-normalised), NPR, spectral entropy and condition number per "
                    "layer over depth: lines are layer means, dots heads; shaded: the central "
                    "95 % of one head under the null at that model's (d, d_h).",
}


def ordered_heads(items, sort_by: str | None = None):
    """DataFrame, one row per model and head in each model's order (``sort_by`` or the score's):
    model, layer, head, rank (ties shared), departure, head p, flag."""
    import pandas as pd

    from .tables import head_table

    frames = []
    for label, ds in items:
        e = ds.copy()
        if sort_by is not None:
            e.attrs["head_order"] = sort_by
        df = head_table(e)
        keep = [c for c in ("layer", "head", "rank", "departure", "head_kind", "head_p_value",
                            "head_flag") if c in df]
        df = df[keep].sort_values(["rank", "layer", "head"], kind="stable")
        df.insert(0, "model", label)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def write_compare(paths, out_dir, *, figures: bool = True,
                  sort_by: str | None = None) -> dict[str, Path]:
    """Compare the scores in ``paths`` into ``out_dir`` (checked before reading); returns {file
    name: final path}."""
    import pandas as pd

    from .html import compare_html

    check_output_dir(out_dir, KIND)
    items = load_scores(paths)
    if sort_by is not None:
        from ..decision.order import sort_choices

        for label, ds in items:
            have = sort_choices(ds["axis"].values if "axis" in ds.coords else [])
            if sort_by not in have:
                raise InputError(f"--sort-by {sort_by}: {label} has no such order (it has "
                                 f"{', '.join(have)})")
    table = flag_table(items)
    heads = ordered_heads(items, sort_by)
    prof = pd.concat([profiles.profile_table(items, s) for s in profiles.PROFILE_STATS],
                     ignore_index=True)
    text = summary_text(table)
    with OutputFolder(out_dir, kind=KIND) as out:
        out.write_text("flags.csv", table.to_csv(index=False))
        out.write_text("heads.csv", heads.to_csv(index=False))
        out.write_text("profiles.csv", prof.to_csv(index=False))
        out.write_text("summary.txt", text)
        images = {}
        if figures:
            _profile_figures(items, figure_saver(out, images, keep=("profiles.png",)))
        note = ("fraction: heads that differ from the null (BH over each model's heads); "
                "fraction_<group>: flagged and driven by a statistic of that group.")
        out.write_text("report.html", compare_html(
            table, images, title=f"rmtbase compare: {len(items)} models",
            subtitle=", ".join(lab for lab, _ in items), captions=CAPTIONS, notes=note))
    return out.written


def summary_text(table) -> str:
    """The flag table as text, with how to read it."""
    with_pd = table.to_string(index=False, float_format=lambda v: f"{v:.3f}")
    return (f"{with_pd}\n\nflagged: heads that differ from the null (one decision per head, "
            "Benjamini-Hochberg over each model's heads); fraction_<group>: flagged heads whose "
            "strongest statistic is in that group. Profiles: figures/profile_*.png, "
            "profiles.csv (null band: central 95 % of one head under the Gaussian null at the "
            "model's d, d_h).\n")


__all__ = ["KIND", "flag_table", "load_scores", "ordered_heads", "summary_text",
           "write_compare"]
