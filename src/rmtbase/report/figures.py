"""Figures of a score (:func:`rmtbase.scoring.score.score_model`): every one shows its null.

Functions take ``ax=None`` and return the Axes; nothing saves. Fixed colour scales: effects on
± :data:`EFFECT_LIM` = Φ⁻¹(1 − P_MIN) (widened by :func:`effect_limit` if exceeded), verdicts
as −log₁₀ head p on [0, :data:`VERDICT_LIM`]. Spectra as x = λ / (σ_Q² σ_K² d²) against
MP_c ⊠ MP_c; entropies as the excess over ½ ln(2π e σ²)."""

from __future__ import annotations

import numpy as np
import xarray as xr
from scipy import special

from ..decision.tails import P_MIN
from ..errors import InputError
from ._labels import (
    figure_axes,
    fit_title,
    fixed_figure,
    layer_head_ticks,
    readable_log_ticks,
    title_label,
    top_title,
)

#: Diverging, colour-blind safe (ColorBrewer RdBu reversed) for effects; sequential for p.
EFFECT_CMAP = "RdBu_r"
VERDICT_CMAP = "magma_r"
#: The largest |effect| the tails report: the normal score of P_MIN (module docstring).
EFFECT_LIM = float(np.ceil(-special.ndtri(P_MIN) * 100) / 100)  # 8.23
VERDICT_LIM = 16.0  # -log10 of the smallest reported p (rmtbase.decision.tails.P_MIN)
#: Spike counts are written in the verdict's cells up to this many cells.
MAX_TEXT_CELLS = 400
#: Legibility at the saved size: no text below this many points, no figure with more panels
#: (colour bars not counted) than :data:`MAX_PANELS` (tests/test_figure_legibility.py).
MIN_FONT = 7.0
MAX_PANELS = 12


def verdict_colorbar(fig, mappable, ax, **kw):
    """The verdict's colour bar: −log₁₀ head p."""
    return fig.colorbar(mappable, ax=ax, label=r"$-\log_{10}$ head p", extend="max", **kw)


def plot_verdict(ds: xr.Dataset, ax=None, *, colorbar: bool = True, spikes: bool = True):
    """Per-head verdict, −log₁₀ head p on [0, VERDICT_LIM], over layer × head; BH-flagged heads
    boxed; ``spikes``: spike counts in cells (≤ :data:`MAX_TEXT_CELLS`)."""
    import matplotlib as mpl

    ax = figure_axes(ax)
    with np.errstate(divide="ignore"):
        s = -np.log10(np.clip(ds["head_p_value"].values, 10.0**-VERDICT_LIM, 1.0))
    norm = mpl.colors.Normalize(0.0, VERDICT_LIM)
    cmap = mpl.colormaps[VERDICT_CMAP].with_extremes(bad="0.8")
    im = ax.imshow(np.ma.masked_invalid(s), cmap=cmap, norm=norm, origin="lower",
                   aspect="auto", interpolation="nearest")
    li, hi = np.nonzero(ds["head_flag"].values)
    ax.scatter(hi, li, marker="s", s=_cell_points(ax, ds) ** 2, facecolors="none",
               edgecolors="#1b9e77", linewidths=1.4, label="flagged (BH)")
    text = (spikes and "n_spikes" in ds and ds["head_flag"].size <= MAX_TEXT_CELLS
            and _cell_points(ax, ds) >= 1.4 * MIN_FONT)
    if text:
        _spike_text(ax, ds["n_spikes"].values, norm(np.ma.masked_invalid(s)))
    if colorbar:
        verdict_colorbar(ax.figure, im, ax)
    layer_head_ticks(ax, ds)
    ax.set_xlabel("head   (boxed: flagged" + ("; number: spikes)" if text else ")"))
    n = int(ds["head_flag"].sum())
    ax.set_title(f"{title_label(ds)}\n{n} of {ds['head_flag'].size} heads differ from the null "
                 f"(BH α={ds.attrs.get('alpha')})", fontsize=9)
    return ax


def _cell_points(ax, ds: xr.Dataset) -> float:
    """About 80 % of a cell's smaller side in points (the flag box's marker size)."""
    w, h = ax.get_position().size * ax.figure.get_size_inches() * 72
    return float(np.clip(0.8 * min(w / ds.sizes["head"], h / ds.sizes["layer"]), 3, 30))


def _spike_text(ax, n_spikes, shade) -> None:
    """Write each cell's spike count, white on dark cells."""
    size = MIN_FONT
    for (i, j), n in np.ndenumerate(n_spikes):
        if not np.isfinite(n) or n < 0:
            continue
        dark = not np.ma.is_masked(shade[i, j]) and float(shade[i, j]) > 0.55
        ax.text(j, i, str(int(n)), ha="center", va="center", fontsize=size,
                color="white" if dark else "black")


def effect_limit(values) -> float:
    """Half-width of the effect colour scale: :data:`EFFECT_LIM`, or the largest finite |value|
    if larger."""
    v = np.abs(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    return float(max(EFFECT_LIM, v.max())) if v.size else EFFECT_LIM


def plot_effect_heatmap(ds: xr.Dataset, stat: str, ax=None, *, colorbar: bool = True,
                        lim: float | None = None):
    """Effect of ``stat`` over layer × head on ±``lim`` (default :func:`effect_limit`);
    descriptive BH flags marked ×, NaN grey."""
    import matplotlib as mpl

    if stat not in ds["stat"].values:
        raise InputError(f"statistic {stat!r} is not in this score")
    ax = figure_axes(ax)
    e = ds["effect"].sel(stat=stat).values
    lim = effect_limit(e) if lim is None else float(lim)
    cmap = mpl.colormaps[EFFECT_CMAP].with_extremes(bad="0.8")
    im = ax.imshow(np.ma.masked_invalid(e), cmap=cmap, vmin=-lim, vmax=lim,
                   origin="lower", aspect="auto", interpolation="nearest")
    li, hi = np.nonzero(ds["flag"].sel(stat=stat).values)
    ax.scatter(hi, li, marker="x", s=14, c="k", linewidths=0.8)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, label="effect (normal score in the null)")
    layer_head_ticks(ax, ds)
    ax.set_title(stat, fontsize=9)
    return ax


def plot_spectrum(ds: xr.Dataset, layer: int, head: int, ax=None, *, why: str = ""):
    """Sorted normalised spectrum x_k of one head against the null band (2.5–97.5 % and
    median of the sorted null spectrum, same normalisation); log y. Returns the Axes."""
    ax = figure_axes(ax)
    x = ds["qk_spectrum"].sel(layer=layer, head=head).values
    k = np.arange(1, x.size + 1)
    if "null_spectrum" in ds:
        band = ds["null_spectrum"]
        q = band["quantile"].values
        lo, hi = band.sel(quantile=q.min()).values, band.sel(quantile=q.max()).values
        ax.fill_between(k, lo, hi, color="0.75", step="mid",
                        label=f"null {100 * q.min():g}–{100 * q.max():g} %")
        if 0.5 in q:
            ax.plot(k, band.sel(quantile=0.5).values, color="0.4", ls="--", lw=1,
                    label="null median")
    ax.plot(k, x, "o-", ms=3, color="C0", label=f"layer {layer}, head {head}")
    ax.set_yscale("log")
    readable_log_ticks(ax.yaxis)
    ax.set_xlabel("rank k")
    ax.set_ylabel(r"$x_k = \lambda_k / (\sigma_Q^2 \sigma_K^2 d^2)$")
    ax.set_title(fit_title(ax, f"{title_label(ds)} L{layer} H{head}" + (f"\n{why}" if why
                                                                         else "")), fontsize=9)
    ax.legend(fontsize="small")
    return ax


def plot_spectrum_density(ds: xr.Dataset, layer: int, head: int, ax=None):
    """Histogram of one head's normalised x (log bins) against the MP_c ⊠ MP_c density,
    c = d_h/d."""
    from ..analytic import product

    ax = figure_axes(ax)
    x = ds["qk_spectrum"].sel(layer=layer, head=head).values
    x = x[np.isfinite(x) & (x > 0)]
    d, d_h = int(ds.attrs["d"]), int(ds.attrs["d_h"])
    c = d_h / d
    lo, hi = (float(e) for e in product.edges(c))
    a = min(max(lo, 1e-6), float(x.min()) if x.size else lo) / 1.2
    b = max(hi, float(x.max()) if x.size else hi) * 1.2
    nb = max(15, min(60, x.size))
    if x.size:  # a head a delta left unchanged has no spectrum (NaN)
        ax.hist(x, bins=np.geomspace(a, b, nb + 1), density=True, color="C0", alpha=0.6,
                label=f"layer {layer}, head {head}")
    grid = np.geomspace(max(lo, 1e-9), hi, 400)
    ax.plot(grid, np.asarray(product.density(grid, c), dtype=float), color="k",
            label=rf"null limit MP$_c\boxtimes$MP$_c$, c={c:.3g}")
    ax.axvline(hi, color="k", ls=":", lw=1)
    ax.set_xscale("log")
    readable_log_ticks(ax.xaxis)
    ax.set_xlabel("x (log scale)")
    ax.set_ylabel("density")
    ax.legend(fontsize="small")
    return ax


def _gauss_entropy(sigma):
    return 0.5 * np.log(2 * np.pi * np.e * np.asarray(sigma, dtype=float) ** 2)


def plot_entropy_sigma(ds: xr.Dataset, matrix: str = "q", ax=None):
    """Entropy excess ΔS = S − ½ ln(2π e σ²) of each head's ``matrix`` ('q', 'k', 'qk') entries
    against σ (log x): a dot per head, its null mean ± 2 std (less the Gaussian entropy at the
    null's σ: σ_Q, or √d_h σ_Q σ_K for W_QK) a bar; references ΔS = 0 and, for W_QK, the
    variance-gamma law."""
    from ..analytic import variance_gamma as vg

    for s in (f"{matrix}.entropy", f"{matrix}.std"):
        if s not in ds["stat"].values:
            raise InputError(f"statistic {s!r} is not in this score")
    ax = figure_axes(ax)
    d_h = int(ds.attrs.get("d_h", 1))
    sq, sk = ds["sigma_q"].values.ravel(), ds["sigma_k"].values.ravel()
    x_null = {"q": sq, "k": sk, "qk": np.sqrt(d_h) * sq * sk}[matrix]
    sig = ds["value"].sel(stat=f"{matrix}.std").values.ravel()
    dev = ds["value"].sel(stat=f"{matrix}.entropy").values.ravel() - _gauss_entropy(sig)
    m = ds["null_mean"].sel(stat=f"{matrix}.entropy").values.ravel() - _gauss_entropy(x_null)
    s = ds["null_std"].sel(stat=f"{matrix}.entropy").values.ravel()
    for xn, xo, mn, yo in zip(x_null, sig, m, dev, strict=True):
        ax.plot([xn, xo], [mn, yo], color="0.7", lw=0.5, zorder=1)
    ax.errorbar(x_null, m, yerr=2 * s, fmt="_", color="0.35", ms=6, lw=1.2, zorder=2,
                label="null mean ± 2 std (at the null's std)")
    flag = ds["flag"].sel(stat=f"{matrix}.entropy").values.ravel()
    ax.scatter(sig[~flag], dev[~flag], s=12, c="C0", alpha=0.8, zorder=3, label="heads")
    if flag.any():
        ax.scatter(sig[flag], dev[flag], s=16, c="C3", marker="D", zorder=3,
                   label="entropy flagged (BH)")
    both = np.concatenate([sig, x_null])
    both = both[np.isfinite(both) & (both > 0)]
    if both.size:
        grid = np.geomspace(both.min() * 0.9, both.max() * 1.1, 100)
        ax.plot(grid, np.zeros_like(grid), color="k", ls="--", lw=1,
                label=r"Gaussian entries ($\Delta S = 0$)")
        if matrix == "qk":
            h1 = vg.entropy(d_h)  # at s = 1 (std √d_h); H(s) = H(1) + ln s
            ax.plot(grid, h1 + np.log(grid / np.sqrt(d_h)) - _gauss_entropy(grid), color="C2", lw=1.2, label=f"variance-gamma (null law, d_h={d_h})")
    name = {"q": "W_Q", "k": "W_K", "qk": "W_{QK}"}.get(matrix, matrix)
    ax.set_xscale("log")
    readable_log_ticks(ax.xaxis)
    ax.set_xlabel(rf"entry std $\sigma$ of ${name}$")
    ax.set_ylabel(r"$\Delta S$ = entropy $-\ \frac{1}{2}\ln(2\pi e\sigma^2)$ (nats)")
    ax.set_title(rf"${name}$ entries: entropy beyond the Gaussian at the same std", fontsize=9)
    ax.legend(fontsize=MIN_FONT)
    return ax


def effect_overview(ds: xr.Dataset, stats: list[str], title: str):
    """One Figure with an effect heatmap per statistic (≤ :data:`MAX_PANELS`) and one shared
    colour bar; panels sized to stay legible, layer and head labelled on the outer panels (the
    lowest of each column, the first of each row)."""
    n = len(stats)
    if not 0 < n <= MAX_PANELS:
        raise InputError(f"effect_overview draws 1 to {MAX_PANELS} statistics, got {n}")
    ncol = min(4, n) if n != 9 else 3
    nrow = -(-n // ncol)
    pw = float(np.clip(0.11 * ds.sizes["head"] + 1.2, 2.4, 4.2))
    ph = float(np.clip(0.09 * ds.sizes["layer"] + 1.2, 2.0, 4.0))
    w, h = ncol * pw + 1.0, nrow * ph + 0.8
    fig = fixed_figure(w, h, left=0.55, right=1.05, bottom=0.5, top=0.55,
                       wspace=0.1 * ncol / (w - 1.6), hspace=0.35 * nrow / (h - 1.05))
    axes = np.atleast_1d(fig.subplots(nrow, ncol, squeeze=False)).ravel()
    lim = effect_limit(ds["effect"].sel(stat=list(stats)).values)
    for i, (ax, stat) in enumerate(zip(axes, stats, strict=False)):
        plot_effect_heatmap(ds, stat, ax, colorbar=False, lim=lim)
        ax.tick_params(labelsize=MIN_FONT)
        ax.xaxis.label.set_size(MIN_FONT)
        ax.yaxis.label.set_size(MIN_FONT)
        if i + ncol < n:  # the panels share one grid: its labels on the outer panels only
            ax.tick_params(labelbottom=False)
            ax.set_xlabel("")
        if i % ncol:
            ax.tick_params(labelleft=False)
            ax.set_ylabel("")
    for ax in axes[n:]:
        ax.set_axis_off()
    inset = (0.15 if nrow > 1 else 0.0) * (1 - 1.05 / h)  # the bar: 70 % of a tall grid
    cax = fig.add_axes((1 - 0.9 / w, 0.5 / h + inset, 0.15 / w, 1 - 1.05 / h - 2 * inset))
    fig.colorbar(axes[0].images[0], cax=cax, label="effect (normal score in the null)")
    top_title(fig, f"{title_label(ds)} — {title}", fontsize=10)
    return fig


def effect_figure(ds: xr.Dataset, stat: str):
    """One statistic's :func:`plot_effect_heatmap` with its colour bar, the model named above."""
    w = float(np.clip(0.3 * ds.sizes["head"] + 2.5, 4, 12))
    h = float(np.clip(0.22 * ds.sizes["layer"] + 1.8, 3, 9))
    fig = fixed_figure(w, h, left=0.6, right=0.75, bottom=0.5, top=0.6)
    plot_effect_heatmap(ds, stat, fig.subplots())
    top_title(fig, title_label(ds), gap=0.06, fontsize=9)
    return fig


def effect_overviews(ds: xr.Dataset, stats: list[str], title: str) -> list:
    """:func:`effect_overview` split evenly, in order, into as few figures as keep ≤
    :data:`MAX_PANELS` panels each."""
    stats = list(stats)
    parts = -(-len(stats) // MAX_PANELS)
    size = -(-len(stats) // parts) if parts else 0
    chunks = [stats[i:i + size] for i in range(0, len(stats), size)] if size else []
    if len(chunks) == 1:
        return [effect_overview(ds, chunks[0], title)]
    return [effect_overview(ds, c, f"{title} (part {i + 1} of {len(chunks)})")
            for i, c in enumerate(chunks)]
