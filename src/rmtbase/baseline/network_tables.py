"""Baseline tables of product networks over (d, depth, gain): Monte Carlo draws as xarray/netCDF.

Ensembles (:mod:`rmtbase.ensembles.products`): Ginibre ∏W_l or residual ∏(I + W_l), width d,
W_l entries N(0, G/d); one stable QR chain per draw to the largest depth, recording at each L:
spectral statistics of λ = s²(M_L) (bare names); ``lyapunov_max``, ``lyapunov_min``,
``lyapunov_mean`` = ln s_1/L, ln s_d/L, Σ ln s_i/(dL) (from the graded factors); element
statistics of M_L's off-diagonal entries as ``m_<stat>``.

Dims ``(d, depth, gain, draw)``, float64; ``attrs["rmtbase_table_kind"] = "product_network"``.
Keys: ``cell = fold_in(named_key(key(seed), name), d)``, draw j of block b
``fold_in(fold_in(cell, b), j)``: gains share variates and a shorter table is a prefix."""

from __future__ import annotations

import datetime as _dt
import json
from functools import lru_cache

import numpy as np

from .._version import __version__
from ..errors import InputError, check_keywords, check_positive_int
from .network_spec import (  # noqa: F401 - NetworkSpec and make_network_spec re-exported
    NETWORK_KEYWORDS,
    NetworkSpec,
    _gains,
    _ints,
    check_network_cells,
    make_network_spec,
    network_grid,
)
from .table_file import TABLE_FORMAT, check_writable, write_table

TABLE_KIND = "product_network"
LYAPUNOV_INFO = {
    "lyapunov_max": ("largest Lyapunov exponent at depth L", "ln s_1(M_L) / L"),
    "lyapunov_min": ("smallest Lyapunov exponent at depth L", "ln s_d(M_L) / L"),
    "lyapunov_mean": ("mean Lyapunov exponent at depth L", "sum_i ln s_i(M_L) / (d L)"),
}


#: The name a kind's keys are derived from: "ginibre" keeps the key name "gaussian", so its
#: draws, and every table drawn under that name, stay the same bit for bit.
KEY_NAME = {"ginibre": "gaussian", "residual": "residual"}


def network_cell_key(seed: int, kind: str, d: int):
    """``fold_in(named_key(jax.random.key(seed), KEY_NAME[kind]), d)`` (all gains and depths)."""
    import jax

    from ..ensembles import named_key

    return jax.random.fold_in(named_key(jax.random.key(seed), KEY_NAME[kind]), d)


@lru_cache(maxsize=32)
def _draw_fn(kind, d, depths, gains, stats, trim):
    """The per-draw function: ``key -> {name: (len(gains), len(depths)) array}`` (cached, so its
    compiled chunk runner is reused). The gains are one vmapped axis: one program per table."""
    import jax
    import jax.numpy as jnp

    from ..ensembles.products import (
        factors_to_matrix,
        log_singular_values,
        network_chain,
        offdiagonal,
    )
    from ..stats import element_stats, spectral_stats

    spectral, elementwise = stats in ("all", "spectral"), stats in ("all", "elementwise")

    def at(q, logd, t, L):
        out = {}
        if spectral:
            ls = log_singular_values(logd, t)
            out.update(spectral_stats(jnp.exp(2.0 * ls)))
            out.update(lyapunov_max=ls[0] / L, lyapunov_min=ls[-1] / L,
                       lyapunov_mean=jnp.mean(ls) / L)
        if elementwise:
            m = factors_to_matrix(q, logd, t)
            out.update({f"m_{k}": v for k, v in element_stats(offdiagonal(m), trim=trim).items()})
        return out

    def one_gain(key, gain):
        res = network_chain(key, kind, depths, gain, d=d, dtype=jnp.float64)
        q, logd, t = (jnp.stack([r[i] for r in res]) for i in range(3))
        # one copy of the statistics in the compiled program, mapped over the depths
        return jax.lax.map(lambda a: at(*a), (q, logd, t, jnp.asarray(depths, jnp.float64)))

    def fn(key):
        return jax.lax.map(lambda g: one_gain(key, g), jnp.asarray(gains, jnp.float64))

    return fn


def network_draws(key, kind, d, depths, gains, n_draws, *, stats="all", chunk_size=None,
                  trim=0.8, progress=False) -> dict:
    """``{name: (n_draws, len(gains), len(depths)) float64}``; draw i uses ``fold_in(key, i)``."""
    import jax

    from ..ensembles import map_draws

    n = check_positive_int(n_draws, "n_draws")
    fn = _draw_fn(kind, int(d), _ints(depths, "depth"), _gains(gains), stats, float(trim))
    chunk = chunk_size or max(1, min(n, 16 if jax.default_backend() == "cpu" else 256))
    method = "map" if jax.default_backend() == "cpu" else "vmap"
    with jax.enable_x64(True):
        return dict(map_draws(fn, key, n, chunk, method=method, progress=progress))


def generate_network_blocks(spec: NetworkSpec, d: int, gains, start: int = 0,
                            stop: int | None = None, bar=None) -> dict:
    """Draws of blocks ``start .. stop-1`` of width d: ``{name: (n, n_gains, n_depths)}``."""
    import jax

    from .tables import DRAW_BLOCK

    stop = spec.n_blocks() if stop is None else stop
    if not 0 <= start < stop <= spec.n_blocks():
        raise InputError(f"block range [{start}, {stop}) outside [0, {spec.n_blocks()})")
    parts = []
    cell = network_cell_key(spec.seed, spec.kind, d)
    for b in range(start, stop):
        n = min(DRAW_BLOCK, spec.draws - b * DRAW_BLOCK)
        parts.append(network_draws(jax.random.fold_in(cell, b), spec.kind, d, spec.depths, gains,
                                   n, stats=spec.stats, chunk_size=spec.chunk_size,
                                   trim=spec.trim))
        if bar is not None:
            bar.update(n)
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _variable_attrs(name: str) -> dict:
    from ..stats import STAT_INFO

    if name in LYAPUNOV_INFO:
        long_name, definition = LYAPUNOV_INFO[name]
        return {"long_name": long_name, "units": "nat per layer", "definition": definition,
                "matrix": "M_L", "statistic": name}
    element = name.startswith("m_")
    stat = name[2:] if element else name
    info = STAT_INFO[stat]
    what = "off-diagonal entries of M_L" if element else "lambda = s(M_L)^2 (all d)"
    units = "nat" if info["units"] == "nat" else "1"
    return {"long_name": f"{info['long_name']} ({what})", "units": units,
            "definition": info["definition"], "matrix": "M_L", "statistic": stat}


def assemble_network(spec: NetworkSpec, widths, gains, results: dict):
    """Dataset over (d, depth, gain, draw) from ``results[d] = {name: (draws, n_gains, n_depths)}``."""
    import xarray as xr

    ds_vals, g_vals = sorted(widths), sorted(gains)
    names = list(next(iter(results.values())))
    data = {}
    for name in names:
        arr = np.stack([np.transpose(np.asarray(results[d][name]), (2, 1, 0)) for d in ds_vals])
        data[name] = xr.Variable(("d", "depth", "gain", "draw"), arr, _variable_attrs(name))
    coords = {"d": ("d", np.array(ds_vals, dtype=np.int64), {"long_name": "width d"}),
              "depth": ("depth", np.array(spec.depths, dtype=np.int64),
                        {"long_name": "number of layers L"}),
              "gain": ("gain", np.array(g_vals), {"long_name": "per-layer gain G (W entries N(0, G/d))"}),
              "draw": ("draw", np.arange(spec.draws, dtype=np.int64),
                       {"long_name": "Monte Carlo draw index"})}
    out = xr.Dataset(data, coords=coords)
    out.attrs = _global_attrs(spec, ds_vals, g_vals)
    return out


def _references(kind, d, depths, gains) -> dict:
    """Exact finite-d E Σλ, E Σλ², off-diagonal excess kurtosis; limit Lyapunov max/mean."""
    from fractions import Fraction

    from ..analytic import network_finite as nf
    from ..analytic.product_network import lyapunov_limits

    refs = {}
    for g in gains:
        lyap = lyapunov_limits(kind, g)
        for L in depths:
            e1, e2, _ = nf.trace_moments(kind, d, L, Fraction(g))
            refs[f"d={d},depth={L},gain={g:g}"] = {
                "sum_lambda": float(e1), "sum_lambda2": float(e2),
                "m_excess_kurtosis": float(nf.element_kurtosis(kind, d, L, Fraction(g))),
                "lyapunov_max_limit": lyap["max"], "lyapunov_mean_limit": lyap["mean"]}
    return refs


def _global_attrs(spec: NetworkSpec, ds_vals, g_vals) -> dict:
    import jax

    from .tables import DRAW_BLOCK

    refs = {}
    for d in ds_vals:
        refs.update(_references(spec.kind, d, spec.depths, g_vals))
    layer = "W_l" if spec.kind == "ginibre" else "(I + W_l)"
    return {
        "title": "rmtbase Monte Carlo product-network baseline table",
        "Conventions": "CF-1.10",
        "rmtbase_table_format": TABLE_FORMAT,
        "rmtbase_table_kind": TABLE_KIND,
        "rmtbase_version": __version__,
        "ensemble": f"{spec.kind} product network", "network": spec.kind,
        "stats": spec.stats, "seed": spec.seed, "draws": spec.draws, "dtype": "float64",
        "backend": jax.default_backend(), "jax_version": jax.__version__,
        "prng_impl": str(jax.config.jax_default_prng_impl), "draw_block": DRAW_BLOCK,
        "key_derivation": ("cell=fold_in(named_key(jax.random.key(seed), name), d), name the "
                           "network ('gaussian' for ginibre, its former name); draw i = "
                           f"fold_in(fold_in(cell, i // {DRAW_BLOCK}), i % {DRAW_BLOCK}); layer l "
                           "= fold_in(named_key(draw, 'layers'), l); depths are one chain, gains "
                           "share normal variates"),
        "conventions": (f"M_L = product over l=1..L of {layer}, W_l (d, d) iid N(0, gain/d); "
                        "lambda = squared singular values of M_L (eigenvalues of M_L^T M_L), "
                        "no normalisation; singular values from the Benettin QR factorisation; "
                        "element statistics over the off-diagonal entries, std ddof=0"),
        "analytic_reference_values": json.dumps(refs, sort_keys=True),
        "creation_time": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def network_table(d, depth, gain=1.0, *, out=None, progress=True, **options):
    """Monte Carlo table of a product network over widths ``d``, depths ``depth`` and gains
    ``gain``: an :class:`xarray.Dataset` with dims ``(d, depth, gain, draw)``, also written
    atomically to ``out`` if given. ``options``: :func:`~.network_spec.make_network_spec`'s
    ``kind`` (``"residual"``), ``draws`` (200), ``seed``, ``stats``, ``chunk_size``. Bit for bit
    reproducible on the same backend."""
    check_keywords(options, NETWORK_KEYWORDS, "network_table")
    spec = make_network_spec(depth=depth, **options)
    widths, gains = network_grid(d, gain)
    check_network_cells(spec.kind, widths, spec.depths, gains)
    if out is not None:
        check_writable(out)
    from .tables import _progress

    with _progress(len(widths) * spec.draws, progress, "rmtbase network") as bar:
        results = {a: generate_network_blocks(spec, a, gains, bar=bar) for a in widths}
    ds = assemble_network(spec, widths, gains, results)
    if out is not None:
        write_table(ds, out)
    return ds
