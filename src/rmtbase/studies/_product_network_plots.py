"""Figures of the ``product_networks`` study. Every ``plot_*`` draws on the ``ax`` it is given
(and returns it); the ``*_figure`` functions lay them out and save a PNG."""

from __future__ import annotations

import math

import numpy as np

from .. import plot
from . import _output as io

LOGISTIC_SCALE = math.sqrt(3) / math.pi  # unit-variance logistic
#: Caption note: every draw is one chain through all depths.
CHAIN_NOTE = ("each draw is one chain through all depths: the Monte Carlo errors of different L "
              "are correlated")


def plot_log_spectrum(ax, loglam, kind, depth, d):
    """Density of ln λ (all draws pooled) against the limit density x ρ(x), x = e^y."""
    from ..analytic import product_network as pn

    y = np.asarray(loglam, dtype=float).ravel()
    hi = math.log(pn.edges(kind, depth)[1])
    lo = float(np.quantile(y, 0.001))
    plot.hist_density(y, bins=80, range=(lo, max(hi, y.max()) + 0.3), ax=ax,
                      color=plot.series_color(0), label=f"Monte Carlo, d = {d}")
    grid = np.linspace(lo, hi, 600)
    x = np.exp(grid)
    plot.analytic_curve(grid, x * pn.density(x, kind, depth), ax=ax, label="d → ∞ limit")
    ax.set_xlabel("ln λ, λ eigenvalue of M_LᵀM_L")
    ax.set_title(f"{kind}, L = {depth}", fontsize=9)
    return ax


def plot_m2_deviation(ax, rows, kind, d):
    """(1/d) Σλ² / m₂ − 1 against depth: Monte Carlo (± 2 SE), exact at d and at larger d."""
    rr = [r for r in rows if r["kind"] == kind]
    L = np.array([r["depth"] for r in rr])
    mc, se = np.array([r["mc_rel_dev"] for r in rr]), np.array([r["mc_se"] for r in rr])
    ax.errorbar(L, mc, yerr=2 * se, fmt="o", ms=3, color=plot.series_color(0),
                label=f"Monte Carlo, d = {d} (± 2 SE)")
    for dd, ls in ((d, "-"), (384, "--"), (4096, ":")):
        ax.plot(L, [r[f"exact_rel_dev_d{dd}"] for r in rr], color=plot.REFERENCE, ls=ls,
                label=f"exact, d = {dd}")
    ax.axhline(0.0, color=plot.REFERENCE, lw=0.6)
    ax.set_xlabel("depth L")
    ax.set_ylabel("(1/d) E Σλ² / m₂(limit) − 1")
    ax.set_title(f"{kind}: finite-d correction to the free limit", fontsize=9)
    ax.legend(fontsize=7)
    return ax


def plot_kurtosis(ax, rows, *, analytic="analytic_marginal", one="mc_one_matrix", title=""):
    """Analytic marginal kurtosis against depth, its pooled Monte Carlo estimate and the mean
    sample kurtosis of one matrix (or vector), each ± 2 SE."""
    L = np.array([r["depth"] for r in rows])
    ax.plot(L, [r[analytic] for r in rows], color=plot.REFERENCE, ls="--",
            label="exact marginal kurtosis")
    for i, (key, lab) in enumerate((("mc_pooled", "Monte Carlo, pooled over draws"),
                                    (one, "Monte Carlo, mean of one-draw kurtosis"))):
        m = np.array([r[key if key == "mc_pooled" else key + "_mean"] for r in rows])
        s = np.array([r[key + "_se"] for r in rows])
        ax.errorbar(L + 0.3 * i, m, yerr=2 * s, fmt="os"[i], ms=3, color=plot.series_color(i),
                    label=lab + " (± 2 SE)")
    ax.axhline(0.0, color=plot.REFERENCE, lw=0.8, ls=":")
    ax.set_xlabel("depth L")
    ax.set_ylabel("excess kurtosis")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return ax


def plot_stream_elements(ax, ys, depths, show):
    """Pooled standardised residual-stream entries at ``show`` depths (log density) against
    the Gaussian and the unit-variance logistic."""
    z = np.linspace(-8, 8, 400)
    for i, L in enumerate(show):
        y = ys[:, list(depths).index(L), :].ravel()
        plot.hist_density(y / np.sqrt(np.mean(y * y)), bins=120, range=(-8, 8), ax=ax, log=True,
                          color=plot.series_color(i), label=f"L = {L}")
    plot.analytic_curve(z, np.exp(-z**2 / 2) / math.sqrt(2 * math.pi), ax=ax, label="Gaussian")
    e = np.exp(-np.abs(z) / LOGISTIC_SCALE)
    plot.analytic_curve(z, e / (LOGISTIC_SCALE * (1 + e) ** 2), ax=ax, ls=":", label="logistic")
    ax.set_ylim(1e-6, 1.0)
    ax.set_xlabel("residual-stream entry / rms (pooled over draws)")
    ax.legend(fontsize=7)
    return ax


def plot_lyapunov_spectrum(ax, loglam, kind, depth, d, color):
    """Exponents ln s_i/L (mean over draws, sorted) against the limit quantile μ(t)."""
    from ..analytic import network_finite as nf
    from ..analytic import product_network as pn

    mu = np.sort(np.asarray(loglam) / (2 * depth), axis=-1)[:, ::-1].mean(0)
    t = (d - np.arange(1, d + 1) + 0.5) / d
    ax.plot(t, mu, "o", ms=2.5, color=color, label=f"{kind}: Monte Carlo, d = {d}, L = {depth}")
    tt = np.linspace(0.002, 1, 400)
    ax.plot(tt, pn.lyapunov_quantile(tt, kind), color=color, lw=1.2,
            label=f"{kind}: limit −½ ln S(t − 1)")
    if kind == "ginibre":
        ax.plot(t, nf.lyapunov_ginibre(d), color=plot.REFERENCE, ls=":", lw=1.0,
                label="ginibre: exact finite-d means")
    ax.set_xlabel("rank fraction t from the bottom")
    ax.set_ylabel("Lyapunov exponent ln s / L")
    return ax


def plot_lyapunov_depth(ax, tables, d):
    """Mean over draws of the largest and mean exponents against depth, with their limits."""
    from ..analytic import product_network as pn

    for i, (kind, ds) in enumerate(tables.items()):
        c = ds.sel(d=d, gain=1.0)
        L = c["depth"].values
        lim = pn.lyapunov_limits(kind)
        for name, mk in (("max", "o"), ("mean", "s")):
            ax.plot(L, c[f"lyapunov_{name}"].values.mean(-1), mk, ms=3, color=plot.series_color(i),
                    label=f"{kind}: {name} (Monte Carlo)")
            ax.axhline(lim[name], color=plot.series_color(i), lw=0.9, ls="--")
    ax.set_xlabel("depth L")
    ax.set_ylabel("exponent (dashed: L → ∞, d → ∞ limit)")
    ax.legend(fontsize=7)
    return ax


def spectra_figure(path, spectra, d, show):
    fig, axes = io.figure(len(spectra), len(show), size=(3.6, 3.0))
    for r, (kind, ll) in enumerate(spectra.items()):
        for c, L in enumerate(show):
            plot_log_spectrum(axes[r, c], ll[:, c, :], kind, L, d)
    axes[0, 0].legend(fontsize=7)
    return io.save_figure(fig, path)


def moments_figure(path, rows, d):
    from ..analytic._network_kind import KINDS

    fig, axes = io.figure(1, 2, size=(4.6, 3.6))
    for i, kind in enumerate(KINDS):
        plot_m2_deviation(axes[0, i], rows, kind, d)
    fig.suptitle(CHAIN_NOTE, fontsize=8)
    return io.save_figure(fig, path)


def kurtosis_figure(path, rows, d):
    from ..analytic._network_kind import KINDS

    fig, axes = io.figure(1, 2, size=(4.6, 3.6))
    for i, kind in enumerate(KINDS):
        plot_kurtosis(axes[0, i], [r for r in rows if r["kind"] == kind],
                      title=f"{kind}: off-diagonal entries of M_L, d = {d}")
    fig.suptitle(CHAIN_NOTE, fontsize=8)
    return io.save_figure(fig, path)


def stream_figure(path, ys, rows, d, depths, show):
    fig, axes = io.figure(1, 2, size=(4.8, 3.8))
    plot_stream_elements(axes[0, 0], ys, depths, show)
    plot_kurtosis(axes[0, 1], rows, analytic="analytic", one="mc_one_vector",
                  title=f"residual stream y = M_L x, d = {d}, W_l ~ N(0, 1/d)")
    axes[0, 1].axhline(1.2, color=plot.REFERENCE, lw=0.8, ls="-.", label="logistic")
    axes[0, 1].legend(fontsize=7)
    fig.suptitle(CHAIN_NOTE + "; one-vector kurtosis: the entries of a single y", fontsize=8)
    return io.save_figure(fig, path)


def lyapunov_figure(path, spectra, tables, d, show):
    fig, axes = io.figure(1, 2, size=(4.8, 3.8))
    for i, (kind, ll) in enumerate(spectra.items()):
        plot_lyapunov_spectrum(axes[0, 0], ll[:, -1, :], kind, show[-1], d, plot.series_color(i))
    axes[0, 0].legend(fontsize=6)
    plot_lyapunov_depth(axes[0, 1], tables, d)
    return io.save_figure(fig, path)
