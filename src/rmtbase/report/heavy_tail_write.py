"""``rmtbase heavy-tail``'s output folder, all or nothing (:class:`rmtbase.files.output.
OutputFolder`): ``heavy_tail.nc`` (the table, CF-1.10), ``heavy_tail.csv`` (a row per matrix,
and per entry of a collection), ``summary.txt`` (:mod:`.heavy_tail_text`), ``figures/`` (α by
layer with the null and folklore bands, α's histogram against the null's, the ESD of the matrices
furthest from and nearest to their null; over checkpoints α and its p against the step),
``report.html`` and ``manifest.json``."""

from __future__ import annotations

import html as _html

import numpy as np
import xarray as xr

#: The output folder's kind (its manifest's), for ``--overwrite``.
KIND = "rmtbase heavy-tail"
#: Each figure's caption in report.html.
CAPTIONS = {
    "alpha_by_layer.png": "alpha by layer per component kind (filled: unlike random, BH over the "
                          "matrices' alpha p), the null's median (dashed) and 95 % band (grey) at "
                          "each matrix's shape, storage and norm; green: WeightWatcher's "
                          "'well trained' band 2 <= alpha <= 6.",
    "alpha_histogram.png": "The matrices' alpha against the alpha of the null's Gaussian "
                           "matrices of the same shapes (pooled draws).",
    "heavy_tail_esd.png": "ESD (lambda = s^2, log-log) with the power-law fit above xmin (red) "
                          "and the null's 95 % band at the matrix's Frobenius norm (grey).",
    "alpha_trajectory.png": "alpha (top) and its p (bottom) against the training step, per layer; "
                            "grey: the null's 95 % band; dashed: the fdr.",
}
_EXPLAIN = (
    "alpha: the exponent of a power law fitted to the tail of the eigenvalues lambda = s^2 of W "
    "(WeightWatcher 0.7.7's fit, to 1e-6). The folklore reads 2 <= alpha <= 6 as 'well trained'; "
    "the null says what alpha a Gaussian matrix of the same shape, storage and norm has, so a p "
    "says whether a matrix differs from random. rand_distance: the Jensen-Shannon distance between "
    "W's spectrum and that of W with its entries shuffled (near 0 for a random matrix).")


def frame(ds: xr.Dataset, dim: str | None = None):
    """The CSV's rows: :func:`.heavy_tail_report.heavy_tail_frame`, per entry of ``dim``."""
    import pandas as pd

    from .heavy_tail_report import heavy_tail_frame

    if dim is None:
        return heavy_tail_frame(ds)
    parts = []
    for label in ds[dim].values:
        f = heavy_tail_frame(ds.sel({dim: label}))
        f.insert(0, dim, str(label))
        parts.append(f)
    return pd.concat(parts, ignore_index=True)


def netcdf(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with each variable's CF attributes (:func:`~rmtbase.scoring.matrices.
    heavy_tail_attrs.described`)."""
    from ..scoring.matrices.heavy_tail_attrs import described

    out = described(ds.copy(), prefix="")
    if "esd" in out:
        out["esd"].attrs = {"long_name": "eigenvalues lambda = s^2 of the matrix, ascending",
                            "units": "1"}
    out["metric"].attrs = {"long_name": "WeightWatcher heavy-tail metric"}
    if "step" in out.coords:
        out["step"].attrs = {"long_name": "training step the entry's label ends in",
                             "units": "1"}
    return out


def _figures(out, ds: xr.Dataset, dim: str | None, title: str) -> dict[str, bytes]:
    from . import heavy_tail_figures as hf
    from .heavy_tail_report import esd_figure

    last = ds if dim is None else ds.isel({dim: -1})
    made = {"alpha_by_layer.png": hf.alpha_layer_figure(last, title),
            "alpha_histogram.png": hf.alpha_histogram_figure(last, title),
            "heavy_tail_esd.png": esd_figure(last)}
    if dim is not None:
        made["alpha_trajectory.png"] = hf.trajectory_figure(ds, dim, title)
    images = {}
    for name, fig in made.items():
        if fig is not None:
            out.save_figure(fig, f"figures/{name}")
            images[name] = (out.tmp / "figures" / name).read_bytes()
    return images


def _page(ds, dim, lines, table, images) -> str:
    from .._version import __version__
    from .html import _img, page, table_html

    shown = [c for c in ("checkpoint", "model", "layer", "component", "rows", "cols", "alpha",
                         "alpha_p", "alpha_null_lo", "alpha_null_hi", "alpha_flag", "folklore",
                         "null_well_trained", "alpha_weighted", "rand_distance", "reason")
             if c in table]
    title = f"rmtbase heavy-tail: {ds.attrs.get('model', '')}"
    body = (f"<section><h2>Summary</h2><pre>{_html.escape(chr(10).join(lines))}</pre>"
            f"<p class=\"note\">{_html.escape(_EXPLAIN)}</p></section>\n"
            + "".join(f'<section><h2>{_html.escape(n)}</h2>'
                      f"{_img(n, png, CAPTIONS.get(n, n))}</section>\n"
                      for n, png in images.items())
            + f"<section><h2>Every matrix</h2><p class=\"note\">heavy_tail.csv and heavy_tail.nc "
              f"hold every metric with its null.</p>{table_html(table[shown])}</section>\n"
            + f"<footer class=\"note\">rmtbase {__version__}</footer>")
    sub = f"{int(np.sum(ds['rows'].values > 0))} matrices, {ds.attrs.get('draws')} null draws " \
          "per shape"
    return page(title, sub, body, {"entries": [], "refs": {}, "scale": {}})


def summary_lines(ds: xr.Dataset, dim: str | None = None, top: int = 3) -> list[str]:
    """The terminal's and summary.txt's lines (:mod:`.heavy_tail_text`)."""
    from .heavy_tail_text import collection_lines, terminal_lines

    return terminal_lines(ds, top) if dim is None else collection_lines(ds, dim)


def write_collection_table(out, ds: xr.Dataset, dim: str, save=None) -> None:
    """heavy_tail.nc and heavy_tail.csv of the collection ``ds`` into the open OutputFolder
    ``out`` (``rmtbase score`` of several entries with ``--heavy-tail``) and, with ``save``
    (:func:`._html_figures.figure_saver`'s), figures/alpha_trajectory.png."""
    from .heavy_tail_figures import trajectory_figure

    out.write_netcdf("heavy_tail.nc", netcdf(ds))
    out.write_text("heavy_tail.csv", frame(ds, dim).to_csv(index=False, float_format="%.6g"))
    fig = trajectory_figure(ds, dim, str(ds.attrs.get("model", ""))) if save else None
    if fig is not None:
        save(fig, "alpha_trajectory.png")


def write_heavy_tail_folder(ds: xr.Dataset, out_dir, *, figures: bool = True, top: int = 3,
                            dim: str | None = None) -> dict:
    """Write the folder (module docstring) of the table ``ds`` (a collection along ``dim``);
    returns {file name: final path}."""
    from ..files.output import OutputFolder

    lines = summary_lines(ds, dim, top)
    table = frame(ds, dim)
    with OutputFolder(out_dir, kind=KIND) as out:
        out.write_netcdf("heavy_tail.nc", netcdf(ds))
        out.write_text("heavy_tail.csv", table.to_csv(index=False, float_format="%.6g"))
        out.write_text("summary.txt", "\n".join(lines) + "\n")
        images = _figures(out, ds, dim, str(ds.attrs.get("model", ""))) if figures else {}
        out.write_text("report.html", _page(ds, dim, lines, table, images))
    return out.written


__all__ = ["CAPTIONS", "KIND", "frame", "netcdf", "summary_lines", "write_collection_table",
           "write_heavy_tail_folder"]
