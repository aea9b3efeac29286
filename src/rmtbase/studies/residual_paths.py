"""Study ``residual_paths``: seed 004's residual-path products, and effective depth of MiniLM.

M_L = ∏_{l=1}^{L} (I + W_l), W_l i.i.d. N(0, 1/d), d = 384: element density against Gaussian
and logistic, singular values of M_L / ‖M_L‖_F·√d and excess kurtosis against depth;
``effective_depth_minilm``: :func:`rmtbase.depth.effective_depth` of MiniLM's W_Q, W_K
  (per layer) and W_QK (per head); a random W_QK has excess kurtosis 6/d_h, so its depth is
  not comparable with W_Q/W_K's."""

from __future__ import annotations

import math

import numpy as np

from . import _output as io

SHOW_DEPTHS = (1, 2, 4, 8, 16, 32, 48)
LOGISTIC_SCALE = math.sqrt(3) / math.pi  # logistic with unit variance


def _logistic_pdf(z):
    s = LOGISTIC_SCALE
    e = np.exp(-np.abs(z) / s)
    return e / (s * (1 + e) ** 2)


def _chain(key, d, depths, draws):
    """Standardised off-diagonal elements and singular values of M_L at ``depths``."""
    import jax
    import jax.numpy as jnp

    from .._matmul import mm

    l_max = max(depths)
    scale = math.sqrt(2.0)  # 1 + σ²d with σ² = 1/d; features are scale free
    step = jax.jit(lambda m, k: (m + mm(jax.random.normal(k, (d, d), dtype=jnp.float32)
                                        / math.sqrt(d), m)) / scale)
    off = ~np.eye(d, dtype=bool)
    elems = {L: [] for L in depths}
    svals = {L: [] for L in depths}
    for i in range(draws):
        k = jax.random.fold_in(key, i)
        m = jnp.eye(d, dtype=jnp.float32)
        for layer in range(1, l_max + 1):
            m = step(m, jax.random.fold_in(k, layer))
            if layer in elems:
                a = np.asarray(m, dtype=np.float64)
                x = a[off]
                elems[layer].append((x - x.mean()) / x.std())
                s = np.linalg.svd(a, compute_uv=False)
                svals[layer].append(s / np.sqrt(np.sum(s**2)) * math.sqrt(d))
    return ({L: np.concatenate(v) for L, v in elems.items()},
            {L: np.array(v) for L, v in svals.items()})


def run(out_dir, quick=False, seed=0) -> dict:
    """Run the study; see the module docstring."""
    import jax

    from ..depth import FEATURES, depth_null

    out = io.prepare(out_dir)
    key = jax.random.key(seed)
    d = 384
    draws_show = 1 if quick else 6
    draws_null = 20 if quick else 64
    depths = (1, 2, 3, 4, 6, 8, 12, 16, 20, 24) if quick else range(1, 49)
    show = tuple(L for L in SHOW_DEPTHS if L <= max(depths))
    figures, data = [], []

    elems, svals = _chain(jax.random.fold_in(key, 1), d, show, draws_show)
    figures.append(_fig_elements(out, elems, show))
    figures.append(_fig_svals(out, svals, show, jax.random.fold_in(key, 2), d))

    null = depth_null((d, d), d=d, depths=depths, draws=draws_null,
                      key=jax.random.fold_in(key, 3))
    kurt = null.features[:, :, FEATURES.index("excess_kurtosis")]
    rows = [dict(depth=int(L), kurtosis_mean=float(k.mean()), kurtosis_sd=float(k.std(ddof=1)),
                 q025=float(np.quantile(k, 0.025)), q975=float(np.quantile(k, 0.975)))
            for L, k in zip(null.depths, kurt, strict=True)]
    data.append(io.write_csv(rows, out / "kurtosis_vs_depth.csv"))
    figures.append(_fig_kurtosis(out, null.depths, kurt, d))

    res_rows = _minilm_depths(null)
    data.append(io.write_csv(res_rows, out / "effective_depth_minilm.csv"))
    figures.append(_fig_minilm(out, res_rows, null.depths))
    wq = [r for r in res_rows if r["matrix"] == "W_Q"]
    return {"figures": figures, "data": data,
            "summary": {f"kurtosis_depth{rows[-1]['depth']}": rows[-1]["kurtosis_mean"],
                        "minilm_W_Q_depths": [r["depth"] for r in wq],
                        "minilm_W_Q_intervals": [r["interval"] for r in wq]}}


def _minilm_depths(null):
    from ..depth import effective_depth
    from ..models import default_model_path, load_heads

    rows = []
    for lh in load_heads(default_model_path()):
        mats = [("W_Q", -1, lh.wq.reshape(-1, lh.wq.shape[-1])),
                ("W_K", -1, lh.wk.reshape(-1, lh.wk.shape[-1]))]
        mats += [("W_QK", h, lh.wq[h].T.astype(np.float64) @ lh.wk[h]) for h in range(lh.n_heads)]
        for name, head, w in mats:
            r = effective_depth(w, null=null)
            rows.append(dict(layer=lh.layer, head=head, matrix=name, depth=r.depth,
                             interval="" if r.interval is None else f"{r.interval[0]}-{r.interval[1]}",
                             lo=np.nan if r.interval is None else r.interval[0],
                             hi=np.nan if r.interval is None else r.interval[1],
                             n_accepted=int(r.accepted.size), consistent=r.consistent,
                             excess_kurtosis=float(r.features[0]),
                             best_pvalue=float(r.pvalues.max()),
                             note="" if name != "W_QK" else "random W_QK has kurtosis 6/d_h"))
    return rows


def _fig_elements(out, elems, show):
    from .. import plot

    fig, axes = io.figure(1, 1, size=(6.4, 4.4))
    ax = axes[0, 0]
    z = np.linspace(-8, 8, 400)
    for i, L in enumerate(show):
        plot.hist_density(elems[L], bins=160, range=(-8, 8), ax=ax, log=True,
                          color=plot.SERIES[i % len(plot.SERIES)], label=f"L = {L}")
    plot.analytic_curve(z, np.exp(-z**2 / 2) / math.sqrt(2 * math.pi), ax=ax, ls="--",
                        label="Gaussian (moment fit)")
    plot.analytic_curve(z, _logistic_pdf(z), ax=ax, ls=":", label="logistic (moment fit)")
    ax.set_ylim(1e-7, 1.0)
    ax.set_xlabel("standardised element z of ∏(I + W_l) (off-diagonal)")
    ax.legend(fontsize=7, ncol=2)
    return io.save_figure(fig, out / "elements_vs_depth.png")


def _fig_svals(out, svals, show, key, d):
    import jax
    import jax.numpy as jnp

    from .. import plot

    g = np.asarray(jax.random.normal(jax.random.fold_in(key, 0), (d, d), dtype=jnp.float32),
                   dtype=np.float64)
    u = np.asarray(jax.random.uniform(jax.random.fold_in(key, 1), (d, d), dtype=jnp.float32,
                                      minval=1e-7, maxval=1 - 1e-7), dtype=np.float64)
    lg = LOGISTIC_SCALE * np.log(u / (1 - u))
    fig, axes = io.figure(1, 1, size=(6.4, 4.4))
    ax = axes[0, 0]
    for i, L in enumerate(show):
        plot.ordered_values(svals[L], ax=ax, color=plot.SERIES[i % len(plot.SERIES)],
                            label=f"L = {L}", log=True)
    for m, lab, ls in ((g, "Gaussian matrix", "--"), (lg, "logistic matrix", ":")):
        s = np.linalg.svd(m, compute_uv=False)
        s = s / np.sqrt(np.sum(s**2)) * math.sqrt(d)
        ax.plot(np.arange(1, d + 1), s, color=plot.REFERENCE, ls=ls, label=lab)
    ax.set_ylabel("singular value / (‖M‖_F/√d)")
    ax.set_title(f"d = {d}; Gaussian and logistic: same shape, unit element variance", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    return io.save_figure(fig, out / "singular_values_vs_depth.png")


def _fig_kurtosis(out, depths, kurt, d):
    from .. import plot

    fig, axes = io.figure(1, 1, size=(6.0, 4.0))
    ax = axes[0, 0]
    plot.null_band(kurt, x=depths, ax=ax, color=plot.series_color(0),
                   label=f"central 95 % over {kurt.shape[1]} draws")
    ax.plot(depths, kurt.mean(axis=1), "o-", ms=3, color=plot.series_color(0), label="mean")
    ax.axhline(0.0, color=plot.REFERENCE, ls="--", label="Gaussian")
    ax.axhline(1.2, color=plot.REFERENCE, ls=":", label="logistic")
    ax.set_xlabel("depth L")
    ax.set_ylabel("excess kurtosis of elements")
    ax.set_title(f"∏(I + W_l), d = {d}, W_l ~ N(0, 1/d)", fontsize=9)
    ax.legend(fontsize=7)
    return io.save_figure(fig, out / "kurtosis_vs_depth.png")


def _fig_minilm(out, rows, depths):
    from .. import plot

    fig, axes = io.figure(1, 1, size=(7.0, 4.2))
    ax = axes[0, 0]
    for i, name in enumerate(("W_Q", "W_K", "W_QK")):
        rr = [r for r in rows if r["matrix"] == name]
        off = (i - 1) * 0.22
        x = np.array([r["layer"] + off + (0.012 * r["head"] if r["head"] >= 0 else 0) for r in rr])
        y = np.array([r["depth"] for r in rr], dtype=float)
        lo = np.array([r["lo"] for r in rr], dtype=float)
        hi = np.array([r["hi"] for r in rr], dtype=float)
        ok = np.isfinite(lo)
        c = plot.series_color(i)
        ax.errorbar(x[ok], y[ok], yerr=[y[ok] - lo[ok], hi[ok] - y[ok]], fmt="o", ms=3,
                    color=c, label=f"{name} (interval = accepted depths)", alpha=0.8)
        if (~ok).any():
            ax.plot(x[~ok], y[~ok], "x", color=c, label=f"{name}: no depth consistent")
    ax.set_xlabel("MiniLM layer")
    ax.set_ylabel("effective depth L")
    ax.set_ylim(0, max(depths) + 1)
    ax.legend(fontsize=7)
    return io.save_figure(fig, out / "effective_depth_minilm.png")
