"""Labels of the report's figures and the Axes they draw on (:func:`figure_axes`).

:func:`title_label` names one model (≤ 48 characters), :func:`collection_label` a collection's
model(s); :func:`readable_log_ticks` labels a log axis legibly; :func:`fit_title` breaks a title
to its Axes' width."""

from __future__ import annotations

import numpy as np
import xarray as xr


def fixed_figure(w: float, h: float, *, left, right, bottom, top, **spacing):
    """A ``w`` × ``h`` inch Figure whose subplot margins are given in inches (no layout engine:
    a constrained layout measures every tick label, about half a figure's CPU)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h))
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h,
                        **spacing)
    return fig


def fixed_grid(w: float, h: float, margins: dict, grid, gaps):
    """A :func:`fixed_figure` with ``margins`` (left, right, bottom, top) whose ``grid`` =
    (rows, columns) of panels leaves ``gaps`` = (between rows, between columns), in inches."""
    (nrow, ncol), (hgap, wgap) = grid, gaps
    aw = (w - margins["left"] - margins["right"] - (ncol - 1) * wgap) / ncol
    ah = (h - margins["bottom"] - margins["top"] - (nrow - 1) * hgap) / nrow
    return fixed_figure(w, h, **margins, hspace=hgap / ah, wspace=wgap / aw)


def top_title(fig, text: str, *, gap: float = 0.08, **kw) -> None:
    """``fig``'s suptitle hung ``gap`` inches below its top edge (a fixed-inch layout's)."""
    fig.suptitle(text, y=1 - gap / fig.get_figheight(), va="top", **kw)


def figure_axes(ax):
    """The caller's ``ax``, or a new figure's Axes when it is None (every plot takes ``ax``)."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots()
    return ax


def layer_head_ticks(ax, ds: xr.Dataset):
    """Head and layer ticks, thinned so 30 layers × 32 heads stay readable."""
    for n, setter, dim in ((ds.sizes["head"], ax.set_xticks, "head"),
                           (ds.sizes["layer"], ax.set_yticks, "layer")):
        step = max(1, int(np.ceil(n / 16)))
        idx = np.arange(0, n, step)
        setter(idx, labels=[str(v) for v in ds[dim].values[idx]])
    ax.set_xlabel("head")
    ax.set_ylabel("layer")


def _tick_text(v, _pos=None) -> str:
    return f"{v:g}"


def readable_log_ticks(axis) -> None:
    """Non-overlapping plain labels on a log ``axis`` (denser within a decade, sparser over many);
    minor ticks unlabelled. Call once the limits are final."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    lo, hi = sorted(axis.get_view_interval())
    span = np.log10(hi / lo) if lo > 0 and hi > lo else 10.0
    subs = ((1.0, 1.5, 2.0, 3.0, 5.0, 7.0) if span < 1 else (1.0, 2.0, 5.0) if span <= 2
            else (1.0, 3.0) if span <= 4 else (1.0,))
    axis.set_major_locator(LogLocator(subs=subs))
    axis.set_major_formatter(FuncFormatter(_tick_text))
    axis.set_minor_formatter(NullFormatter())


def title_label(ds: xr.Dataset) -> str:
    """The model's name for a title: without the provenance in parentheses, a path reduced to
    its last part, at most 48 characters."""
    return _short_name(ds.attrs.get("model", "?"))


def _short_name(model) -> str:
    """:func:`title_label` of a model's name."""
    import os

    m = str(model).split(" (", 1)[0].rstrip("/")
    if os.path.isabs(m):
        m = os.path.basename(m) or m
    return m if len(m) <= 48 else "…" + m[-47:]


def collection_label(ds: xr.Dataset) -> str:
    """What names a Dataset's model(s) in a title: :func:`title_label` for one model; for a
    collection the model all entries share, else their hub organisation, else their shared
    architecture and shape; "" where nothing names them all."""
    import json

    if ds.attrs.get("model"):
        return title_label(ds)
    if "entry_attrs" not in ds:
        return ""
    models = {str(json.loads(str(e)).get("model", "")).split(" (", 1)[0].rstrip("/")
              for e in np.atleast_1d(ds["entry_attrs"].values)}
    orgs = {m.split("/", 1)[0] if m.count("/") == 1 else "" for m in models}
    name = models.pop() if len(models) == 1 else orgs.pop() if len(orgs) == 1 else ""
    if name:
        return _short_name(name)
    a = ds.attrs
    if all(k in a for k in ("architecture", "d", "d_h")):
        return f"{a['architecture']}, d {int(a['d'])}, d_h {int(a['d_h'])}"
    return ""


def fit_title(ax, text: str, fontsize: float = 9) -> str:
    """``text`` with each line broken at spaces to fit the width of ``ax`` (0.55 em a character,
    85 % of the Axes width)."""
    import textwrap

    w_pt = ax.get_position().width * ax.figure.get_figwidth() * 72
    width = max(12, int(0.85 * w_pt / (0.55 * fontsize)))
    return "\n".join("\n".join(textwrap.wrap(line, width)) or line
                     for line in str(text).split("\n"))
