"""Reusable matplotlib figures for baselines, studies and model scores.

Every function draws on ``ax`` (new figure when ``None``) and returns the Axes (``corner``: the
array of Axes); nothing calls ``show``/``savefig`` or changes global state. Colour-blind safe:
Okabe–Ito lines (:data:`OKABE_ITO`), ``cividis`` sequential, ``RdBu_r`` signed (symmetric).
Conventions (``docs/conventions.md``): λ are eigenvalues of W_QK W_QKᵀ; index axes are 1-based,
descending; densities are normalised by the full sample (the fraction inside the range is in
the legend when below 1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

#: Okabe & Ito (2008) colour-blind-safe palette, black first.
OKABE_ITO = (
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7",
)
#: Line colours for successive series (black kept for analytic references).
SERIES = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442")
#: Colour for analytic reference curves.
REFERENCE = "#000000"


def _axes(ax):
    if ax is not None:
        return ax
    import matplotlib.figure

    fig = matplotlib.figure.Figure(figsize=(5.0, 3.6), layout="constrained")
    return fig.add_subplot()


def series_color(i: int) -> str:
    """The i-th series colour (cycles through :data:`SERIES`)."""
    return SERIES[i % len(SERIES)]


def hist_density(values, *, bins=100, range=None, ax=None, log=False, label=None,
                 color=None, lw=1.4, **kwargs):
    """Step histogram of the density of ``values``, counts / (n_total · bin width): mass outside
    ``range`` is not redistributed."""
    ax = _axes(ax)
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if range is None:
        range = (float(v.min()), float(v.max())) if v.size else (0.0, 1.0)
    counts, edges = np.histogram(v, bins=bins, range=range)
    dens = counts / (max(v.size, 1) * np.diff(edges))
    if log:
        dens = np.where(dens > 0, dens, np.nan)
        ax.set_yscale("log")
    ax.stairs(dens, edges, label=label, color=color, lw=lw, **kwargs)
    ax.set_ylabel("probability density")
    return ax


def analytic_curve(x, y, *, ax=None, label=None, color=REFERENCE, ls="--", lw=1.3, **kwargs):
    """An analytic reference curve (black dashed by default). Returns the Axes."""
    ax = _axes(ax)
    ax.plot(np.asarray(x), np.asarray(y), color=color, ls=ls, lw=lw, label=label, **kwargs)
    return ax


def ordered_values(values, *, ax=None, label=None, color=None, log=False, band=0.9):
    """Values sorted descending against their 1-based index; ``(draws, n)`` values give the
    median over draws with the central ``band`` shaded."""
    ax = _axes(ax)
    v = -np.sort(-np.atleast_2d(np.asarray(values, dtype=np.float64)), axis=-1)
    idx = np.arange(1, v.shape[-1] + 1)
    med = np.median(v, axis=0)
    (line,) = ax.plot(idx, med, color=color, label=label, lw=1.4)
    if v.shape[0] > 1 and band:
        lo, hi = np.quantile(v, [(1 - band) / 2, (1 + band) / 2], axis=0)
        ax.fill_between(idx, lo, hi, color=line.get_color(), alpha=0.25, lw=0)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("index k (descending)")
    return ax


def vlines(xs, *, ax=None, labels=None, color=REFERENCE, ls=":", lw=1.2):
    """Vertical reference lines (e.g. spectral edges λ±); one legend entry per label."""
    ax = _axes(ax)
    labels = labels if labels is not None else [None] * len(xs)
    for x, lab in zip(xs, labels, strict=True):
        ax.axvline(float(x), color=color, ls=ls, lw=lw, label=lab)
    return ax


def null_band(draws, *, x=None, ax=None, level=0.95, color="#999999", label=None,
              orientation="horizontal"):
    """The central ``level`` interval of a null, with its median: a constant span for ``draws``
    ``(n_draws,)``, a band along ``x`` for ``(len(x), n_draws)``."""
    ax = _axes(ax)
    d = np.asarray(draws, dtype=np.float64)
    q = [(1 - level) / 2, 0.5, (1 + level) / 2]
    lab = label if label is not None else f"null {100 * level:.0f}% band"
    if d.ndim == 1:
        lo, med, hi = np.quantile(d, q)
        span, line = (ax.axhspan, ax.axhline) if orientation == "horizontal" else (
            ax.axvspan, ax.axvline)
        span(lo, hi, color=color, alpha=0.3, lw=0, label=lab)
        line(med, color=color, lw=1.0)
    else:
        lo, med, hi = np.quantile(d, q, axis=-1)
        xx = np.arange(d.shape[0]) if x is None else np.asarray(x)
        ax.fill_between(xx, lo, hi, color=color, alpha=0.3, lw=0, label=lab)
        ax.plot(xx, med, color=color, lw=1.0)
    return ax


def per_head(values, *, ax=None, null=None, log=False, label=None, color=None,
             ylabel=None, layer_mean=True):
    """A statistic ``(n_layers, n_heads)`` at x = layer·n_heads + head, with layer separators and
    means; ``null`` (1-D draws) adds the 95 % band."""
    ax = _axes(ax)
    v = np.asarray(values, dtype=np.float64)
    n_layers, n_heads = v.shape
    x = np.arange(v.size)
    if null is not None:
        null_band(null, ax=ax)
    ax.plot(x, v.ravel(), "o", ms=3.5, color=color or series_color(0), label=label)
    if layer_mean:
        means = v.mean(axis=1)
        ax.stairs(means, np.arange(n_layers + 1) * n_heads - 0.5, color=OKABE_ITO[6],
                  ls="--", lw=1.2, label="layer mean")
    for b in range(1, n_layers):
        ax.axvline(b * n_heads - 0.5, color="#BBBBBB", ls="--", lw=0.6)
    ax.set_xticks((np.arange(n_layers) + 0.5) * n_heads - 0.5, [str(i) for i in range(n_layers)])
    ax.set_xlabel("layer (heads within a layer left to right)")
    if ylabel:
        ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    return ax


def density_heatmap(samples, *, edges, ax=None, n_heads=None, log=True, cmap="cividis",
                    xlabel="element value", colorbar=True, vmin=None):
    """Per-row densities as a heatmap (one row per head, x = value) from 1-D samples or
    ``(n_rows, n_bins)`` densities on ``edges``; ``log``: log10 colour, empty bins blank."""
    ax = _axes(ax)
    edges = np.asarray(edges, dtype=np.float64)
    if isinstance(samples, np.ndarray) and samples.ndim == 2 and samples.shape[1] == edges.size - 1:
        dens = samples.astype(np.float64)
    else:
        rows = []
        for s in samples:
            s = np.asarray(s, dtype=np.float64).ravel()
            c, _ = np.histogram(s, bins=edges)
            rows.append(c / (s.size * np.diff(edges)))
        dens = np.array(rows)
    z = np.log10(np.where(dens > 0, dens, np.nan)) if log else dens
    im = ax.pcolormesh(edges, np.arange(dens.shape[0] + 1) - 0.5, z, cmap=cmap, shading="flat",
                       vmin=vmin)
    ax.invert_yaxis()
    if n_heads:
        for b in range(n_heads, dens.shape[0], n_heads):
            ax.axhline(b - 0.5, color="white", ls="--", lw=0.7)
        n_layers = dens.shape[0] // n_heads
        ax.set_yticks((np.arange(n_layers) + 0.5) * n_heads - 0.5,
                      [f"L{i}" for i in range(n_layers)])
        ax.set_ylabel("head (grouped by layer)")
    else:
        ax.set_ylabel("row")
    ax.set_xlabel(xlabel)
    if colorbar:
        cb = ax.figure.colorbar(im, ax=ax)
        cb.set_label("log10 density" if log else "density")
    return ax


def entropy_sigma(sigma, entropy, *, ax=None, delta=False, label=None, color=None,
                  reference=True):
    """Element entropy (or ΔS = S − ½ln(2πeσ²), nats) against σ, with the Gaussian reference."""
    ax = _axes(ax)
    s = np.asarray(sigma, dtype=np.float64).ravel()
    h = np.asarray(entropy, dtype=np.float64).ravel()
    ax.plot(s, h, "o", ms=3.5, color=color or series_color(0), label=label, alpha=0.8)
    if reference:
        lo, hi = s.min() / 1.2, s.max() * 1.2
        grid = np.geomspace(lo, hi, 100)
        ref = np.zeros_like(grid) if delta else 0.5 * np.log(2 * np.pi * np.e * grid**2)
        analytic_curve(grid, ref, ax=ax, ls="-",
                       label="Gaussian: ΔS = 0" if delta else "Gaussian ½ln(2πeσ²)")
    ax.set_xscale("log")
    ax.set_xlabel("element std σ")
    ax.set_ylabel("ΔS = S − ½ln(2πeσ²) [nats]" if delta else "entropy S [nats]")
    return ax


def corner(data: Mapping[str, np.ndarray], *, axes=None, labels: Sequence[str] | None = None,
           groups=None, pearson: str | None = None, bins=30):
    """Corner plot (histograms on the diagonal, scatters below), ``(n, n)`` Axes; ``pearson``
    draws Pearson's (1916) bound: ``"excess"`` κ_ex = γ² − 2, ``"raw"`` κ = γ² + 1."""
    names = list(data)
    n = len(names)
    labels = list(labels) if labels is not None else names
    if axes is None:
        import matplotlib.figure

        fig = matplotlib.figure.Figure(figsize=(2.2 * n, 2.2 * n), layout="constrained")
        axes = fig.subplots(n, n, squeeze=False)
    g = np.zeros(len(data[names[0]]), dtype=int) if groups is None else np.asarray(groups)
    uniq = list(dict.fromkeys(g.tolist()))
    for i in range(n):
        for j in range(n):
            a = axes[i, j]
            if j > i:
                a.set_visible(False)
                continue
            xi = np.asarray(data[names[j]], dtype=np.float64)
            if i == j:
                for k, u in enumerate(uniq):
                    a.hist(xi[g == u], bins=bins, histtype="step", color=series_color(k),
                           density=True)
                a.set_yticks([])
            else:
                yi = np.asarray(data[names[i]], dtype=np.float64)
                for k, u in enumerate(uniq):
                    m = g == u
                    a.plot(xi[m], yi[m], "o", ms=2.5, alpha=0.7, color=series_color(k),
                           label=None if groups is None else str(u))
                if pearson and names[j] == "skewness" and names[i] in ("excess_kurtosis", "kurtosis"):
                    lim = np.nanmax(np.abs(xi)) * 1.1 + 1e-12
                    gg = np.linspace(-lim, lim, 200)
                    off = -2.0 if pearson == "excess" else 1.0
                    a.plot(gg, gg**2 + off, color=REFERENCE, ls="--", lw=1.0,
                           label="Pearson bound")
                    a.legend(fontsize=7, loc="upper center")
            if i == n - 1:
                a.set_xlabel(labels[j])
            if j == 0 and i > 0:
                a.set_ylabel(labels[i])
    return axes
