"""Study ``product_spectrum``: seed 003 Fig. 1 and the null of the spectral statistics.

At d = 768, d_h = 64, σ = 1, x = λ / (σ⁴ d²): ``spectrum.png`` (density of x against MP_c and
the exact MP_c ⊠ MP_c), ``null_stats.png`` (x_max, NPR, spectral entropy, condition number with
their d → ∞ limits), ``null_stats.nc``, ``summary.csv``."""

from __future__ import annotations

import math

import numpy as np

from . import _output as io
from . import _refs as ref

STATS = ("x_max", "npr", "spectral_entropy", "condition_number")


def _spectra(key, d, d_h, draws, chunk=100):
    import jax
    import jax.numpy as jnp

    from ..stats.spectral import eigvals_from_factors

    def one(i):
        k = jax.random.fold_in(key, i)
        wq = jax.random.normal(jax.random.fold_in(k, 0), (d_h, d), dtype=jnp.float32)
        wk = jax.random.normal(jax.random.fold_in(k, 1), (d_h, d), dtype=jnp.float32)
        return eigvals_from_factors(wq, wk)

    f = jax.jit(jax.vmap(one))
    out = [np.asarray(f(jnp.arange(s, min(s + chunk, draws)))) for s in range(0, draws, chunk)]
    return np.concatenate(out) / float(d) ** 2  # x = λ / (σ⁴ d²), descending


def run(out_dir, quick=False, seed=0) -> dict:
    """Run the study; see the module docstring."""
    import jax
    import xarray as xr

    from ..stats.spectral import spectral_stats

    out = io.prepare(out_dir)
    d, d_h = 768, 64
    c = d_h / d
    draws = 300 if quick else 2000
    x = _spectra(jax.random.key(seed), d, d_h, draws)
    st = {k: np.asarray(v) for k, v in spectral_stats(x).items()}
    vals = {"x_max": st["lambda_max"], "npr": st["npr"],
            "spectral_entropy": st["spectral_entropy"],
            "condition_number": st["condition_number"]}
    mp_lo, mp_hi = ref.mp_edges(c)
    pr_lo, pr_hi = ref.product_edges(c)
    lim = ref.product_limits(d, d_h)
    limits = {"x_max": pr_hi, "npr": lim["npr"], "spectral_entropy": lim["spectral_entropy"],
              "condition_number": pr_hi / pr_lo}

    ds = xr.Dataset({k: ("draw", v) for k, v in vals.items()})
    ds["spectrum"] = (("draw", "k"), x)
    ds.attrs.update(d=d, d_h=d_h, sigma=1.0, seed=seed, draws=draws,
                    normalisation="x = lambda / (sigma_q^2 sigma_k^2 d^2)",
                    **{f"limit_{k}": v for k, v in limits.items()},
                    mp_edges=[mp_lo, mp_hi], product_edges=[pr_lo, pr_hi])
    data = [io.write_netcdf(ds, out / "null_stats.nc")]
    rows = []
    for k, v in vals.items():
        q = np.quantile(v, [0.025, 0.5, 0.975])
        rows.append(dict(statistic=k, mean=v.mean(), std=v.std(ddof=1),
                         sem=v.std(ddof=1) / math.sqrt(v.size), q025=q[0], median=q[1],
                         q975=q[2], limit_d_inf=limits[k]))
    frac_above = float(np.mean(x > mp_hi))
    rows.append(dict(statistic="fraction of x above MP_c upper edge", mean=frac_above,
                     std=float("nan"), sem=math.sqrt(frac_above * (1 - frac_above) / x.size),
                     q025=float("nan"), median=float("nan"), q975=float("nan"), limit_d_inf=float(
                         "nan")))
    data.append(io.write_csv(rows, out / "summary.csv"))
    figures = [_fig_spectrum(out, x, c, (mp_lo, mp_hi), (pr_lo, pr_hi), draws),
               _fig_stats(out, vals, limits, draws)]
    return {"figures": figures, "data": data,
            "summary": {"x_max_mean": float(vals["x_max"].mean()), "x_max_limit": pr_hi,
                        "mp_upper_edge": mp_hi, "fraction_above_mp_edge": frac_above,
                        "npr_mean": float(vals["npr"].mean()), "npr_limit": lim["npr"],
                        "condition_number_median": float(np.median(vals["condition_number"]))}}


def _fig_spectrum(out, x, c, mp_e, pr_e, draws):
    from .. import plot

    fig, axes = io.figure(1, 2, size=(5.2, 3.8))
    a, z = axes[0]
    flat = x.ravel()
    top = max(flat.max(), pr_e[1]) * 1.05
    grid = np.linspace(1e-6, top, 1500)
    for ax, log, rng in ((a, False, (0, top)), (z, True, (0.8 * pr_e[1], top))):
        plot.hist_density(flat, bins=150 if not log else 60, range=rng, ax=ax, log=log,
                          color=plot.series_color(0), label=f"Monte Carlo ({draws} heads)")
        plot.analytic_curve(grid, ref.mp_density(grid, c), ax=ax, ls=":",
                            color=plot.OKABE_ITO[6], label="MP_c (single Wishart)")
        plot.analytic_curve(grid, ref.product_density(grid, c), ax=ax, label="MP_c ⊠ MP_c (exact)")
        plot.vlines(mp_e, ax=ax, color=plot.OKABE_ITO[6], labels=["MP_c edges", None])
        plot.vlines(pr_e, ax=ax, ls="--", labels=["MP_c⊠MP_c edges", None])
        ax.set_xlim(*rng)
        ax.set_xlabel("x = λ / (σ⁴ d²)")
    z.set_ylim(1e-5, None)
    a.legend(fontsize=7)
    a.set_title(f"d = 768, d_h = 64 (c = {c:.4f})", fontsize=9)
    z.set_title("upper edge (log scale)", fontsize=9)
    return io.save_figure(fig, out / "spectrum.png")


def _fig_stats(out, vals, limits, draws):
    from .. import plot

    labels = {"x_max": "x_max = λ_max/(σ⁴d²)", "npr": "NPR = PR/d_h",
              "spectral_entropy": "spectral entropy [nats]",
              "condition_number": "condition number λ_max/λ_min"}
    fig, axes = io.figure(1, 4, size=(3.6, 3.2))
    for ax, k in zip(axes[0], STATS, strict=True):
        v = vals[k]
        lo, hi = np.quantile(v, [0.0005, 0.9995])
        lo, hi = min(lo, limits[k]), max(hi, limits[k])
        pad = 0.05 * (hi - lo)
        plot.hist_density(v, bins=50, range=(lo - pad, hi + pad), ax=ax,
                          color=plot.series_color(0), label=f"null, {draws} draws")
        ax.axvline(limits[k], color=plot.REFERENCE, ls="--", label="d → ∞ limit")
        ax.set_xlabel(labels[k])
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("Null of W_QK spectral statistics at d = 768, d_h = 64", fontsize=10)
    return io.save_figure(fig, out / "null_stats.png")
