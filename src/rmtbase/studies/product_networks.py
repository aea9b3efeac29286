"""Study ``product_networks``: deep Ginibre and residual products against their analytic laws.

M_L = W_L⋯W_1 and (I + W_L)⋯(I + W_1), entries N(0, 1/d), depths 1–48, against
:mod:`rmtbase.analytic.product_network` and :mod:`rmtbase.analytic.network_finite`: ln λ
densities, (1/d) Σλ² / m₂ − 1, off-diagonal excess kurtosis, seed 004's stream y = M_L x, and
Lyapunov exponents against μ(t) = −½ ln S(t − 1); tables ``table_ginibre.nc``,
``table_residual.nc``."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .._matmul import mm
from ..analytic._network_kind import KINDS
from ..progress import stage
from . import _output as io
from . import _product_network_plots as pp

DEPTHS = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48)
SHOW = (2, 8, 48)


def _sizes(quick: bool):
    if quick:
        return SimpleNamespace(d=24, draws=8, depths=(1, 2, 4, 8, 12), show=(2, 12),
                               spec_draws=2, stream_d=64, stream_draws=16)
    return SimpleNamespace(d=128, draws=80, depths=DEPTHS, show=SHOW, spec_draws=8,
                           stream_d=384, stream_draws=400)


def _log_lambdas(key, kind, d, depths, draws, progress=False):
    """ln λ of M_L at ``depths``: ``(draws, len(depths), d)`` (stable QR singular values)."""
    import jax
    import jax.numpy as jnp

    from ..ensembles import map_draws
    from ..ensembles.products import log_singular_values, network_chain

    def one(k):
        res = network_chain(k, kind, depths, 1.0, d=d, dtype=jnp.float64,
                            at_depth=lambda q, ld, t, L: 2.0 * log_singular_values(ld, t))
        return jnp.stack(res)

    with jax.enable_x64(True):
        return map_draws(one, key, draws, method="map", chunk_size=1, progress=progress)


def _stream(key, d, depths, draws, progress=False):
    """Residual stream y = M_L x at ``depths`` (G = 1) and the per-vector excess kurtosis
    (:func:`rmtbase.stats.element_stats`): ``(draws, n_depths, d)``, ``(draws, n_depths)``."""
    import jax
    import jax.numpy as jnp

    from ..ensembles import map_draws, named_key
    from ..ensembles.products import network_layer
    from ..stats import element_stats

    idx = jnp.asarray([L - 1 for L in depths])

    def one(k):
        x0 = jax.random.normal(named_key(k, "x"), (d,), jnp.float64)

        def step(x, layer):
            x = x + mm(network_layer(k, layer, d, d, 1.0, jnp.float64), x)
            return x, x

        _, xs = jax.lax.scan(step, x0, jnp.arange(1, max(depths) + 1))
        ys = xs[idx]
        return ys, element_stats(ys[:, None, :])["excess_kurtosis"]

    with jax.enable_x64(True):
        return map_draws(one, key, draws, method="map", chunk_size=min(draws, 16),
                         progress=progress)


def _pooled_kurtosis(a2, a4):
    """Marginal kurtosis mean(a⁴)/mean(a²)² − 3 from per-draw raw moments, with its delta-method
    standard error over the draws (rows of ``a2``, ``a4``)."""
    n = a2.shape[0]
    m2, m4 = a2.mean(0), a4.mean(0)
    k = m4 / m2**2 - 3
    g2, g4 = -2 * m4 / m2**3, 1 / m2**2
    var = (g2**2 * a2.var(0, ddof=1) + g4**2 * a4.var(0, ddof=1)
           + 2 * g2 * g4 * np.array([np.cov(a2[:, j], a4[:, j])[0, 1] for j in range(a2.shape[1])]))
    return k, np.sqrt(var / n)


def _element_rows(kind, ds, d):
    from ..analytic import network_finite as nf

    c = ds.sel(d=d, gain=1.0)
    mu, s, sk, k = (c[f"m_{n}"].values.T for n in ("mean", "std", "skewness", "excess_kurtosis"))
    a2 = s**2 + mu**2
    a4 = (k + 3) * s**4 + 4 * sk * s**3 * mu + 6 * s**2 * mu**2 + mu**4
    pooled, pooled_se = _pooled_kurtosis(a2, a4)
    depths = c["depth"].values
    curve = nf.kurtosis_curve(kind, d, depths)
    return [dict(kind=kind, d=d, depth=int(L), analytic_marginal=float(curve[i]),
                 mc_pooled=float(pooled[i]), mc_pooled_se=float(pooled_se[i]),
                 mc_one_matrix_mean=float(k[:, i].mean()),
                 mc_one_matrix_se=float(k[:, i].std(ddof=1) / np.sqrt(k.shape[0])))
            for i, L in enumerate(depths)]


def _moment_rows(kind, ds, d):
    from ..analytic import network_finite as nf
    from ..analytic import product_network as pn

    c = ds.sel(d=d, gain=1.0)
    rows = []
    for i, L in enumerate(c["depth"].values):
        m2 = pn.moments_exact(kind, int(L), 1, 2)[1]
        x = c["sum_lambda2"].values[i] / d / float(m2)
        row = dict(kind=kind, depth=int(L), mc_rel_dev=float(x.mean() - 1),
                   mc_se=float(x.std(ddof=1) / np.sqrt(x.size)))
        for dd in (d, 384, 4096):
            row[f"exact_rel_dev_d{dd}"] = (nf.expected_trace_sq(kind, dd, int(L), 1.0) / dd
                                           / float(m2) - 1)
        rows.append(row)
    return rows


def run(out_dir, quick=False, seed=0) -> dict:
    """Run the study; see the module docstring."""
    import jax

    from ..analytic import network_finite as nf
    from ..baseline.network_tables import network_table

    out = io.prepare(out_dir)
    sz = _sizes(quick)
    key = jax.random.key(seed)
    figures, data = [], []
    tables, spectra, krows, mrows = {}, {}, [], []
    for i, kind in enumerate(KINDS):
        # minutes at full size: say what runs (progress bars on stderr)
        stage("product_networks", f"{kind} products, d = {sz.d}, depths up to "
              f"{max(sz.depths)}, {sz.draws} draws", enabled=not quick)
        tables[kind] = network_table(sz.d, sz.depths, 1.0, kind=kind, draws=sz.draws, seed=seed,
                                     progress=not quick)
        data.append(io.write_netcdf(tables[kind], out / f"table_{kind}.nc"))
        stage("product_networks", f"{kind} spectra at depths {', '.join(map(str, sz.show))}, "
              f"{sz.spec_draws} draws", enabled=not quick)
        spectra[kind] = _log_lambdas(jax.random.fold_in(key, i), kind, sz.d, sz.show,
                                     sz.spec_draws, progress=not quick)
        krows += _element_rows(kind, tables[kind], sz.d)
        mrows += _moment_rows(kind, tables[kind], sz.d)
    stage("product_networks", f"residual stream, d = {sz.stream_d}, {sz.stream_draws} draws",
          enabled=not quick)
    ys, yk = _stream(jax.random.fold_in(key, 7), sz.stream_d, sz.depths, sz.stream_draws,
                     progress=not quick)
    srows = _stream_rows(ys, yk, sz.stream_d, sz.depths)

    data.append(io.write_csv(krows, out / "kurtosis_vs_depth.csv"))
    data.append(io.write_csv(mrows, out / "moments_vs_depth.csv"))
    data.append(io.write_csv(srows, out / "residual_stream.csv"))
    figures.append(pp.spectra_figure(out / "spectra.png", spectra, sz.d, sz.show))
    figures.append(pp.moments_figure(out / "moments_vs_depth.png", mrows, sz.d))
    figures.append(pp.kurtosis_figure(out / "kurtosis_vs_depth.png", krows, sz.d))
    figures.append(pp.stream_figure(out / "residual_stream.png", ys, srows, sz.stream_d,
                                    sz.depths, sz.show))
    figures.append(pp.lyapunov_figure(out / "lyapunov.png", spectra, tables, sz.d, sz.show))
    last = {r["kind"]: r for r in krows if r["depth"] == max(sz.depths)}
    return {"figures": figures, "data": data, "summary": {
        "d": sz.d, "depth": max(sz.depths),
        **{f"{k}_kurtosis_marginal": round(last[k]["analytic_marginal"], 4) for k in KINDS},
        **{f"{k}_kurtosis_one_matrix_mc": round(last[k]["mc_one_matrix_mean"], 4) for k in KINDS},
        "stream_kurtosis_analytic": round(srows[-1]["analytic"], 4),
        "stream_kurtosis_mc_pooled": round(srows[-1]["mc_pooled"], 4),
        "residual_m2_rel_dev_exact": round(float(mrows[-1]["exact_rel_dev_d" + str(sz.d)]), 4),
        "stream_kurtosis_d384_depth48": round(float(nf.stream_kurtosis("residual", 384, 48, 1)), 4),
    }}


def _stream_rows(ys, yk, d, depths):
    from ..analytic import network_finite as nf

    a2, a4 = (ys**2).mean(-1), (ys**4).mean(-1)
    pooled, se = _pooled_kurtosis(a2, a4)
    curve = nf.kurtosis_curve("residual", d, depths, of="stream")
    return [dict(d=d, depth=int(L), analytic=float(curve[i]), mc_pooled=float(pooled[i]),
                 mc_pooled_se=float(se[i]), mc_one_vector_mean=float(yk[:, i].mean()),
                 mc_one_vector_se=float(yk[:, i].std(ddof=1) / np.sqrt(yk.shape[0])))
            for i, L in enumerate(depths)]
