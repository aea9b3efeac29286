"""Study ``minilm``: seeds 000/003 per-head figures for all-MiniLM-L6-v2 (d 384, d_h 32), raw
weights (query/key biases are not part of W_QK): W_Q and W_QK element densities and heatmaps
(seed 000 Figs 6, 7, 10, 11), S and ΔS against σ (Figs 14, 15), NPR, x_max and condition number
per head with the null 95 % band (seed 003 Figs 7–10), W_QK moments with Pearson's bound
(seed 000 Fig 20); ``heads.csv``, ``null_spectral.csv``."""

from __future__ import annotations

import math

import numpy as np

from . import _output as io


def run(out_dir, quick=False, seed=0) -> dict:
    """Run the study; see the module docstring."""
    import jax

    from ..models import default_model_path, load_heads
    from ..stats.elementwise import element_stats
    from ..stats.spectral import eigvals_from_factors, spectral_stats
    from .product_spectrum import _spectra

    out = io.prepare(out_dir)
    layers = list(load_heads(default_model_path()))
    n_heads = layers[0].n_heads
    d_h, d = layers[0].wq.shape[1:]
    rows, wq_all, wqk_all = [], [], []
    for lh in layers:
        wq = lh.wq.astype(np.float64)
        wk = lh.wk.astype(np.float64)
        wqk = np.einsum("hid,hie->hde", wq, wk)
        eq = {k: np.asarray(v) for k, v in element_stats(wq).items()}
        eqk = {k: np.asarray(v) for k, v in element_stats(wqk).items()}
        lam = np.asarray(eigvals_from_factors(wq, wk))
        rq, rk = np.sqrt(np.mean(wq**2, axis=(1, 2))), np.sqrt(np.mean(wk**2, axis=(1, 2)))
        x = lam / ((rq * rk)[:, None] ** 2 * d**2)
        sp = {k: np.asarray(v) for k, v in spectral_stats(x).items()}
        for h in range(n_heads):
            rows.append(dict(layer=lh.layer, head=h,
                             **{f"q_{k}": float(v[h]) for k, v in eq.items()},
                             **{f"qk_{k}": float(v[h]) for k, v in eqk.items()},
                             x_max=float(sp["lambda_max"][h]), npr=float(sp["npr"][h]),
                             spectral_entropy=float(sp["spectral_entropy"][h]),
                             condition_number=float(sp["condition_number"][h])))
        wq_all.append(wq)
        wqk_all.append(wqk)
    data = [io.write_csv(rows, out / "heads.csv")]
    draws = 200 if quick else 2000
    xn = _spectra(jax.random.key(seed), d, d_h, draws)
    sn = {k: np.asarray(v) for k, v in spectral_stats(xn).items()}
    null = {"x_max": sn["lambda_max"], "npr": sn["npr"],
            "condition_number": sn["condition_number"]}
    data.append(io.write_csv([dict(draw=i, **{k: float(v[i]) for k, v in null.items()})
                              for i in range(draws)], out / "null_spectral.csv"))
    wq_all, wqk_all = np.concatenate(wq_all), np.concatenate(wqk_all)
    figures = [_fig_densities(out, wq_all[:n_heads], wqk_all[:n_heads]),
               _fig_heatmaps(out, wq_all, wqk_all, n_heads),
               _fig_entropy(out, rows),
               _fig_spectral(out, rows, null, len(layers), n_heads),
               _fig_corner(out, rows)]
    pct = {k: float(np.mean([np.mean(null[k] < r[k]) for r in rows])) for k in null}
    out_band = {k: int(sum(not (np.quantile(null[k], 0.025) <= r[k] <= np.quantile(null[k], 0.975))
                           for r in rows)) for k in null}
    return {"figures": figures, "data": data,
            "summary": {"heads": len(rows), "heads_outside_null_95%": out_band,
                        "mean_null_percentile": pct}}


def _fig_densities(out, wq, wqk):
    from .. import plot

    fig, axes = io.figure(2, 6, size=(2.6, 2.2))
    for row, (mats, name) in enumerate(((wq, "W_Q"), (wqk, "W_QK"))):
        lim = max(np.abs(m).max() for m in mats) * 1.02
        z = np.linspace(-lim, lim, 300)
        for h in range(6):
            ax = axes[row, h]
            m = mats[2 * h].ravel()
            plot.hist_density(m, bins=80, range=(-lim, lim), ax=ax, log=True,
                              color=plot.series_color(0))
            mu, sd = m.mean(), m.std()
            plot.analytic_curve(z, np.exp(-(z - mu) ** 2 / (2 * sd**2)) / (sd * math.sqrt(2 * math.pi)),
                                ax=ax, label="Gaussian fit")
            ax.set_ylim(1e-4 / sd, 2 / sd)
            ax.set_title(f"{name} L0 H{2 * h}", fontsize=8)
            ax.set_xlabel("element value", fontsize=7)
            if h:
                ax.set_ylabel("")
    axes[0, 0].legend(fontsize=6)
    fig.suptitle("MiniLM layer 0 (even heads): densities with N(μ̂, σ̂²)", fontsize=10)
    return io.save_figure(fig, out / "densities_layer0.png")


def _fig_heatmaps(out, wq, wqk, n_heads):
    from .. import plot

    fig, axes = io.figure(1, 2, size=(5.2, 5.0))
    for ax, mats, name in ((axes[0, 0], wq, "W_Q"), (axes[0, 1], wqk, "W_QK")):
        lim = float(np.quantile(np.abs(mats), 0.99999))
        plot.density_heatmap(list(mats), edges=np.linspace(-lim, lim, 121), ax=ax,
                             n_heads=n_heads, xlabel=f"element of {name}")
        ax.set_title(f"{name}, all heads", fontsize=9)
    return io.save_figure(fig, out / "heatmaps.png")


def _fig_entropy(out, rows):
    from .. import plot

    fig, axes = io.figure(2, 2, size=(4.4, 3.4))
    layer = np.array([r["layer"] for r in rows])
    for j, m in enumerate(("q", "qk")):
        s = np.array([r[f"{m}_std"] for r in rows])
        for i, delta in enumerate((False, True)):
            key = f"{m}_delta_entropy" if delta else f"{m}_entropy"
            ax = axes[i, j]
            plot.entropy_sigma(s, [r[key] for r in rows], ax=ax, delta=delta, label="heads")
            ax.scatter(s, [r[key] for r in rows], c=layer, cmap="cividis", s=12, zorder=3)
            ax.set_title("W_Q" if m == "q" else "W_QK", fontsize=9)
    axes[0, 0].legend(fontsize=7)
    return io.save_figure(fig, out / "entropy_sigma.png")


def _fig_spectral(out, rows, null, n_layers, n_heads):
    from .. import plot

    labels = {"npr": "NPR", "x_max": "x_max = λ_max/(σ_Q²σ_K²d²)",
              "condition_number": "condition number"}
    fig, axes = io.figure(3, 1, size=(8.0, 2.6))
    for ax, k in zip(axes[:, 0], ("npr", "x_max", "condition_number"), strict=True):
        v = np.array([r[k] for r in rows]).reshape(n_layers, n_heads)
        plot.per_head(v, ax=ax, null=null[k], log=k != "npr", ylabel=labels[k], label="MiniLM head")
    axes[0, 0].legend(fontsize=7, ncol=3)
    return io.save_figure(fig, out / "spectral_per_head.png")


def _fig_corner(out, rows):
    from .. import plot

    data = {k: np.array([r[f"qk_{k}"] for r in rows])
            for k in ("mean", "std", "skewness", "excess_kurtosis")}
    axes = plot.corner(data, pearson="excess", groups=[f"L{r['layer']}" for r in rows],
                       labels=["mean", "std", "skewness γ", "excess kurtosis κ−3"])
    axes[1, 0].legend(fontsize=6)
    return io.save_figure(axes[0, 0].figure, out / "moments_corner.png")
