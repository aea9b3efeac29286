"""Reports of a score (:func:`rmtbase.scoring.score.score_model`): terminal table, CSV, netCDF, figures.

Figure functions take ``ax=None`` (a new pyplot figure is made only then) and return the Axes;
nothing here calls ``show`` or ``savefig`` except :func:`write_report`, which draws on
``matplotlib.figure.Figure`` objects (no pyplot state) and writes files.

Conventions: normalised spectrum x = λ / (σ_Q² σ_K² d²) with σ the head's measured entry rms,
λ the squared singular values of W_QK = W_Qᵀ W_K (raw weights); its large-d law is
MP_c ⊠ MP_c with c = d_h / d (:mod:`rmtbase.analytic.product`). Gaussian entropy reference
S = ½ ln(2π e σ²) nats.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from ..errors import InputError

#: ColorBrewer RdBu (reversed): diverging and colour-blind safe.
Z_CMAP = "RdBu_r"
#: Statistics that get their own z-heatmap file by default (all statistics are in z_all.png).
HEADLINE_STATS = ("qk.npr", "qk.lambda_max", "qk.spectral_entropy", "qk.condition_number",
                  "qk.std", "qk.excess_kurtosis", "q.std", "k.std", "q.weibull_k", "k.weibull_k")
_CSV_VARS = ("value", "null_mean", "null_std", "z", "p_value", "q_value", "percentile", "flag")


def long_table(ds: xr.Dataset):
    """Long-format ``pandas.DataFrame``: one row per (layer, head, stat), with σ_Q, σ_K."""
    df = ds[[v for v in _CSV_VARS if v in ds]].to_dataframe().reset_index()
    sig = ds[["sigma_q", "sigma_k"]].to_dataframe().reset_index()
    return df.merge(sig, on=["layer", "head"], how="left")


def head_ranking(ds: xr.Dataset) -> list[tuple[int, int]]:
    """(layer, head) coordinate pairs, most anomalous first: most BH flags, then smallest p,
    then largest |z|."""
    nflag = ds["flag"].sum("stat").values
    pmin = ds["p_value"].fillna(1.0).min("stat").values
    zmax = np.abs(ds["z"]).fillna(0.0).max("stat").values
    L, H = nflag.shape
    keys = [(-nflag[i, j], pmin[i, j], -zmax[i, j], i, j) for i in range(L) for j in range(H)]
    layers, heads = ds["layer"].values, ds["head"].values
    return [(int(layers[k[3]]), int(heads[k[4]])) for k in sorted(keys)]


def anomaly_table(ds: xr.Dataset, n: int = 10) -> str:
    """A short text table of the ``n`` most anomalous heads and their most extreme statistic."""
    n_tests = int(np.isfinite(ds["p_value"].values).sum())
    lines = [
        f"{ds.attrs.get('model', '?')}  ({ds.attrs.get('architecture', '?')}; "
        f"d={ds.attrs.get('d', '?')}, d_h={ds.attrs.get('d_h', '?')}): "
        f"{int(ds['flag'].sum())} of {n_tests} tests flagged (BH, alpha={ds.attrs.get('alpha')})"
        + _floor_note(ds),
        f"{'layer':>5} {'head':>4} {'flags':>5}  {'most extreme stat':<22} {'value':>11} "
        f"{'null mean':>11} {'z':>8} {'p':>8}",
    ]
    for li, hi in head_ranking(ds)[: max(0, int(n))]:
        h = ds.sel(layer=li, head=hi)
        absz = np.abs(h["z"].values)
        p = h["p_value"].fillna(np.inf).values
        if not np.isfinite(p).any():
            continue
        order = np.lexsort((-np.nan_to_num(absz, nan=0.0), p))
        s = order[0]
        lines.append(
            f"{li:>5} {hi:>4} {int(h['flag'].sum()):>5}  "
            f"{str(h.stat.values[s]):<22} {h['value'].values[s]:>11.4g} "
            f"{h['null_mean'].values[s]:>11.4g} {h['z'].values[s]:>8.2f} {h['p_value'].values[s]:>8.2g}"
        )
    return "\n".join(lines)


def _floor_note(ds: xr.Dataset) -> str:
    """'; N null draws, smallest possible p 2/(N+1)' when the Dataset records N."""
    if "null_draws" not in ds or not ds.sizes.get("stat"):
        return ""
    n = int(ds["null_draws"].min())
    return f"; N={n} null draws, smallest possible p={2 / (n + 1):.2g}"


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots()
    return ax


def _stat_check(ds: xr.Dataset, stat: str) -> None:
    if stat not in ds["stat"].values:
        raise InputError(f"statistic {stat!r} is not in this score")


def plot_z_heatmap(ds: xr.Dataset, stat: str, ax=None, *, vmax: float | None = None,
                   colorbar: bool = True):
    """z over layer × head for ``stat``; diverging RdBu, symmetric limits ±vmax (default
    max |z|), BH-flagged cells marked ×, NaN cells grey. Returns the Axes (its image is
    ``ax.images[0]``, for a shared colour bar when ``colorbar=False``)."""
    _stat_check(ds, stat)
    ax = _axes(ax)
    import matplotlib as mpl

    z = ds["z"].sel(stat=stat).values
    finite = np.abs(z[np.isfinite(z)])
    zmax = float(finite.max()) if finite.size else 1.0
    lim = float(vmax) if vmax is not None else max(zmax, 1e-9)
    cmap = mpl.colormaps[Z_CMAP].with_extremes(bad="0.8")
    im = ax.imshow(np.ma.masked_invalid(z), cmap=cmap, vmin=-lim, vmax=lim, origin="lower",
                   aspect="auto", interpolation="nearest")
    li, hi = np.nonzero(ds["flag"].sel(stat=stat).values)
    ax.scatter(hi, li, marker="x", s=25, c="k", linewidths=1.0, label="BH flag")
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label="z", extend="both" if zmax > lim else "neither")
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(np.arange(ds.sizes["head"]), labels=[str(v) for v in ds["head"].values])
    ax.set_yticks(np.arange(ds.sizes["layer"]), labels=[str(v) for v in ds["layer"].values])
    ax.set_title(f"{stat}: z vs null ({int(ds['flag'].sel(stat=stat).sum())} flagged)")
    return ax


def plot_spectrum(ds: xr.Dataset, layer: int, head: int, ax=None):
    """Sorted normalised spectrum x_k of one head against the MC null band (2.5–97.5 % and
    median of the sorted null spectrum, same normalisation). Log y. Returns the Axes."""
    ax = _axes(ax)
    x = ds["qk_spectrum"].sel(layer=layer, head=head).values
    k = np.arange(1, x.size + 1)
    if "null_spectrum" in ds:
        band = ds["null_spectrum"]
        q = band["quantile"].values
        lo, hi = band.sel(quantile=q.min()).values, band.sel(quantile=q.max()).values
        ax.fill_between(k, lo, hi, color="0.75", step="mid",
                        label=f"null {100 * q.min():g}–{100 * q.max():g} %")
        if 0.5 in q:
            ax.plot(k, band.sel(quantile=0.5).values, color="0.4", ls="--", lw=1, label="null median")
    ax.plot(k, x, "o-", ms=3, color="C0", label=f"layer {layer}, head {head}")
    ax.set_yscale("log")
    ax.set_xlabel("rank k")
    ax.set_ylabel(r"$x_k = \lambda_k / (\sigma_Q^2 \sigma_K^2 d^2)$")
    ax.legend(fontsize="small")
    return ax


def plot_spectrum_density(ds: xr.Dataset, layer: int, head: int, ax=None, *, bins: int | None = None):
    """Histogram of one head's normalised x against the analytic MP_c ⊠ MP_c density,
    c = d_h/d (:func:`rmtbase.analytic.product.density`). Returns the Axes."""
    from ..analytic import product

    ax = _axes(ax)
    x = ds["qk_spectrum"].sel(layer=layer, head=head).values
    d, d_h = int(ds.attrs["d"]), int(ds.attrs["d_h"])
    c = d_h / d
    lo, hi = (float(e) for e in product.edges(c))
    top = max(hi, float(np.max(x))) * 1.05
    nb = bins or max(20, x.size)
    ax.hist(x, bins=np.linspace(0.0, top, nb + 1), density=True, color="C0", alpha=0.6,
            label=f"layer {layer}, head {head}")
    grid = np.linspace(max(lo, 1e-9), hi, 400)
    ax.plot(grid, np.asarray(product.density(grid, c), dtype=float), color="k",
            label=rf"MP$_c\boxtimes$MP$_c$, c={c:.3g}")
    ax.axvline(hi, color="k", ls=":", lw=1)
    ax.set_xlabel("x")
    ax.set_ylabel("density")
    ax.legend(fontsize="small")
    return ax


def plot_entropy_sigma(ds: xr.Dataset, matrix: str = "q", ax=None):
    """Each head's differential entropy of ``matrix`` ('q', 'k' or 'qk') entries against their
    std σ, with the Gaussian reference ½ ln(2π e σ²) and the null mean ± 2 std. Returns the Axes."""
    for s in (f"{matrix}.entropy", f"{matrix}.std"):
        _stat_check(ds, s)
    ax = _axes(ax)
    sig = ds["value"].sel(stat=f"{matrix}.std").values.ravel()
    ent = ds["value"].sel(stat=f"{matrix}.entropy")
    m = ds["null_mean"].sel(stat=f"{matrix}.entropy").values.ravel()
    s = ds["null_std"].sel(stat=f"{matrix}.entropy").values.ravel()
    ax.errorbar(sig, m, yerr=2 * s, fmt="none", ecolor="0.6", lw=1, label="null mean ± 2 std")
    flag = ds["flag"].sel(stat=f"{matrix}.entropy").values.ravel()
    ev = ent.values.ravel()
    ax.scatter(sig[~flag], ev[~flag], s=12, c="C0", label="heads")
    if flag.any():
        ax.scatter(sig[flag], ev[flag], s=18, c="C3", marker="D", label="BH flagged")
    finite = sig[np.isfinite(sig)]
    if finite.size:
        grid = np.linspace(finite.min() * 0.9, finite.max() * 1.1, 200)
        ax.plot(grid, 0.5 * np.log(2 * np.pi * np.e * grid**2), color="k",
                label=r"Gaussian $\frac{1}{2}\ln(2\pi e\sigma^2)$")
    name = {"q": "W_Q", "k": "W_K", "qk": "W_{QK}"}.get(matrix, matrix)
    ax.set_xlabel(rf"entry std $\sigma$ of ${name}$")
    ax.set_ylabel("differential entropy (nats)")
    ax.set_title(rf"${name}$")
    ax.legend(fontsize="small")
    return ax


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=100)
    return path


def _z_overview(ds: xr.Dataset, stats: list[str], zclip: float):
    """One figure: a small z heatmap per statistic (shared colour scale ±zclip, flags ×)."""
    from matplotlib.figure import Figure

    ncol = min(6, len(stats))
    nrow = -(-len(stats) // ncol)
    w = 0.22 * ds.sizes["head"] + 0.9
    h = 0.2 * ds.sizes["layer"] + 0.9
    fig = Figure(figsize=(ncol * w + 1.2, nrow * h + 0.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrow, ncol, squeeze=False)).ravel()
    for ax, stat in zip(axes, stats, strict=False):
        plot_z_heatmap(ds, stat, ax, vmax=zclip, colorbar=False)
        ax.set_title(stat, fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("head", fontsize=7)
        ax.set_ylabel("layer", fontsize=7)
    for ax in axes[len(stats):]:
        ax.set_axis_off()
    fig.colorbar(axes[0].images[0], ax=list(axes), label=f"z (clipped at ±{zclip:g})",
                 extend="both", shrink=0.6)
    return fig


def write_report(ds: xr.Dataset, out_dir, *, figures: bool = True, top: int = 10,
                 n_spectra: int = 3, zclip: float = 10.0,
                 heatmaps="headline") -> dict[str, Path]:
    """Write scores.nc (atomically), scores.csv, summary.txt and PNG figures under ``out_dir``.

    Figures (in ``out_dir/figures``): ``z_all.png`` (a z heatmap per statistic, colour limit
    ±``zclip``, flags ×); ``z_<stat>.png`` for ``heatmaps`` = "headline"
    (:data:`HEADLINE_STATS`), "all" or a list of statistics (colour limit max |z| clipped to
    [3, zclip]); ``spectrum_L<l>_H<h>.png`` for the ``n_spectra`` most anomalous heads and the
    least anomalous one; ``entropy_sigma.png`` (W_Q and W_QK panels).
    Returns {name: path} of what was written.
    """
    from matplotlib.figure import Figure

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    tmp = out / ".scores.nc.tmp"
    ds.to_netcdf(tmp)
    os.replace(tmp, out / "scores.nc")
    written["scores.nc"] = out / "scores.nc"
    long_table(ds).to_csv(out / "scores.csv", index=False)
    written["scores.csv"] = out / "scores.csv"
    (out / "summary.txt").write_text(anomaly_table(ds, top) + "\n")
    written["summary.txt"] = out / "summary.txt"
    if not figures:
        return written
    fdir = out / "figures"
    fdir.mkdir(exist_ok=True)
    stats = [str(x) for x in ds["stat"].values]
    own = stats if heatmaps == "all" else [x for x in (HEADLINE_STATS if heatmaps == "headline"
                                                       else heatmaps) if x in stats]
    for stat in own:
        z = np.abs(ds["z"].sel(stat=stat).values)
        zmax = float(np.nanmax(z)) if np.isfinite(z).any() else 1.0
        fig = Figure(figsize=(0.45 * ds.sizes["head"] + 2.5, 0.35 * ds.sizes["layer"] + 1.8),
                     layout="constrained")
        plot_z_heatmap(ds, stat, fig.subplots(), vmax=max(3.0, min(zmax, zclip)))
        written[f"z_{stat}"] = _save(fig, fdir / f"z_{stat}.png")
    if stats:
        written["z_all"] = _save(_z_overview(ds, stats, zclip), fdir / "z_all.png")
    if "qk_spectrum" in ds:
        ranking = head_ranking(ds)
        heads = ranking[: max(0, n_spectra)] + ranking[-1:]
        for li, hi in dict.fromkeys(heads):
            fig = Figure(figsize=(10, 3.8), layout="constrained")
            a1, a2 = fig.subplots(1, 2)
            plot_spectrum(ds, li, hi, a1)
            plot_spectrum_density(ds, li, hi, a2)
            written[f"spectrum_L{li}_H{hi}"] = _save(fig, fdir / f"spectrum_L{li}_H{hi}.png")
    panels = [m for m in ("q", "qk") if {f"{m}.entropy", f"{m}.std"} <= set(ds["stat"].values)]
    if panels:
        fig = Figure(figsize=(5 * len(panels), 4), layout="constrained")
        axes = np.atleast_1d(fig.subplots(1, len(panels)))
        for m, a in zip(panels, axes, strict=True):
            plot_entropy_sigma(ds, m, a)
        written["entropy_sigma"] = _save(fig, fdir / "entropy_sigma.png")
    return written
