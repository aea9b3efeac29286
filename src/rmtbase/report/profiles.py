"""Layer profiles of the spectral statistics, each against its null.

``lambda_max`` (as x_max = λ_max / (σ_Q² σ_K² d²)), ``npr``, ``spectral_entropy`` and
``condition_number`` (seed 003's Figs 13–16): a layer's mean over heads, heads as dots, the band
the central 95 % of one head's statistic under the Gaussian null at the model's (d, d_h) and
storage. Depth = layer / (n_layers − 1)."""

from __future__ import annotations

import functools

import numpy as np
import xarray as xr

from ..errors import InputError
from ._labels import figure_axes

#: statistic -> (axis label, log scale)
PROFILE_STATS = {
    "lambda_max": (r"$\lambda_{max} / (\sigma_Q^2\sigma_K^2 d^2)$", True),
    "npr": ("NPR", False),
    "spectral_entropy": (r"spectral entropy $S_\lambda$ (nats)", False),
    "condition_number": (r"condition number $\kappa$", True),
}
BAND_QUANTILES = (0.025, 0.5, 0.975)
def _check(stat: str) -> str:
    if stat not in PROFILE_STATS:
        raise InputError(f"profile statistic must be one of {', '.join(PROFILE_STATS)}, "
                         f"got {stat!r}")
    return stat


def head_values(ds: xr.Dataset, stat: str) -> np.ndarray:
    """(layer, head) values of ``stat`` for a single score, scale-free (module docstring):
    from the stored statistic where scored, else from the normalised spectrum ``qk_spectrum``."""
    _check(stat)
    name = f"qk.{stat}"
    if name in ds["stat"].values:
        v = ds["value"].sel(stat=name).values
        if stat == "lambda_max":
            v = v / ((ds["sigma_q"].values * ds["sigma_k"].values) ** 2 * float(ds.attrs["d"]) ** 2)
        return np.asarray(v, dtype=float)
    x = ds["qk_spectrum"].values
    if stat == "lambda_max":
        return x[..., 0]
    if stat == "condition_number":
        return x[..., 0] / x[..., -1]
    p = x / x.sum(-1, keepdims=True)
    if stat == "npr":
        return 1.0 / (x.shape[-1] * np.sum(p * p, axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=-1)


@functools.cache
def null_band(d: int, d_h: int, storage: str = "float32", seed: int = 0) -> dict:
    """{stat: (2.5 %, 50 %, 97.5 %)} of one null head's scale-free statistics at (d, d_h)."""
    from ..baseline.cache import null_table
    from ..decision.scale import normalise

    t = null_table(int(d), int(d_h), stats="spectral", seed=int(seed), storage=storage)
    rq, rk = t["q_rms"].values.ravel(), t["k_rms"].values.ravel()
    out = {}
    for stat in PROFILE_STATS:
        v = t[stat].values.ravel()
        if stat == "lambda_max":
            v = normalise("qk.lambda_max", v, rq, rk) / float(d) ** 2
        out[stat] = tuple(float(q) for q in np.quantile(v[np.isfinite(v)], BAND_QUANTILES))
    return out


def band_of(ds: xr.Dataset, stat: str, layer: int | None = None) -> tuple[float, float, float]:
    """(2.5 %, 50 %, 97.5 %) null band of ``stat``; with per-layer storages, that of layer
    ``layer``'s storage, or for None the storage most layers share."""
    storage = str(ds.attrs.get("null_storage", "float32")) or "float32"
    if "layer_null_storage" in ds:
        per = [str(s) for s in np.asarray(ds["layer_null_storage"].values).ravel() if str(s)]
        if layer is not None and str(ds["layer_null_storage"].values[layer]):
            storage = str(ds["layer_null_storage"].values[layer])
        elif per:
            storage = max(dict.fromkeys(per), key=per.count)
    return null_band(int(ds.attrs["d"]), int(ds.attrs["d_h"]), storage)[_check(stat)]


def _depth(n: int) -> np.ndarray:
    return np.arange(n) / max(n - 1, 1)


def profile_table(items, stat: str):
    """``pandas.DataFrame``: per model and layer, the depth, the layer mean of ``stat`` and
    the null band. ``items``: [(label, single score)]."""
    import pandas as pd

    rows = []
    for label, ds in items:
        v = head_values(ds, stat)
        for i, (layer, depth) in enumerate(zip(ds["layer"].values, _depth(v.shape[0]),
                                               strict=True)):
            lo, med, hi = band_of(ds, stat, i)
            rows.append(dict(model=label, layer=int(layer), depth=float(depth), stat=stat,
                             mean=float(np.nanmean(v[i])), null_lo=lo, null_median=med,
                             null_hi=hi, d=int(ds.attrs["d"]), d_h=int(ds.attrs["d_h"])))
    return pd.DataFrame(rows)


def plot_layer_profile(items, stat: str, ax=None):
    """Layer profile of ``stat`` per (label, score) over depth 0–1: layer mean line, head dots,
    each model's one-head null 95 % band shaded and median dashed."""
    ax = figure_axes(ax)
    ylab, log = PROFILE_STATS[_check(stat)]
    drawn = {}
    for i, (label, ds) in enumerate(items):
        colour = f"C{i % 10}"
        v = head_values(ds, stat)
        depth = _depth(v.shape[0])
        key = (int(ds.attrs["d"]), int(ds.attrs["d_h"]), str(ds.attrs.get("null_storage", "")))
        if key not in drawn:
            lo, med, hi = band_of(ds, stat)
            drawn[key] = colour
            ax.axhspan(lo, hi, color=colour, alpha=0.10, lw=0,
                       label=f"null 95 %, one head (d={key[0]}, d_h={key[1]})")
            ax.axhline(med, color=colour, ls="--", lw=0.8, alpha=0.7)
        ax.scatter(np.repeat(depth, v.shape[1]), v.ravel(), s=5, color=colour, alpha=0.35,
                   lw=0)
        ax.plot(depth, np.nanmean(v, axis=1), "o-", ms=3, color=colour, label=label)
    if log:
        ax.set_yscale("log")
    ax.set_xlim(-0.03, 1.03)
    ax.set_xlabel("depth (layer / (n_layers − 1))")
    ax.set_ylabel(ylab)
    ax.set_title(f"{stat}: layer mean over heads (dots: heads)", fontsize=9)
    ax.legend(fontsize=7)
    return ax


__all__ = ["BAND_QUANTILES", "PROFILE_STATS", "band_of", "head_values", "null_band",
           "plot_layer_profile", "profile_table"]
