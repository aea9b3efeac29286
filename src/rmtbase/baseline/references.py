"""Analytic reference values beside a baseline table's statistics, and its summary.

:func:`reference_values`: exact finite-(d, d_h) values or large-d limits (:data:`REFERENCE_NOTES`,
float64); :func:`summary` puts the draws' mean, std and quantiles beside them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError, TableError
from ..stats.statistic import reference_notes

if TYPE_CHECKING:
    import xarray as xr

#: What each reference value is (x = λ / (σ_Q²σ_K²d²), c = d_h / d, s = σ_Qσ_K), from the
#: records (:mod:`rmtbase.stats.statistic`).
REFERENCE_NOTES = reference_notes()


def reference_values(d: int, d_h: int, sigma_q: float = 1.0, sigma_k: float = 1.0) -> dict:
    """Analytic reference values at the table's (d, d_h, σ_Q, σ_K), keyed by variable name; float64.
    Undefined or non-finite values are left out."""
    import importlib

    def mod(name):
        return importlib.import_module(f"rmtbase.analytic.{name}")

    c, s = d_h / d, sigma_q * sigma_k
    s2d2 = s**2 * float(d) ** 2

    def edges():
        lo, hi = (float(e) for e in mod("product").edges(c))
        return lo, hi

    def anchor():
        k0, lambda0 = mod("weibull").anchor()
        return float(k0), float(lambda0)

    recipes = {
        "npr": lambda: mod("product").npr_limit(c),
        "pr": lambda: d_h * mod("product").npr_limit(c),
        "spectral_entropy": lambda: mod("product").spectral_entropy_limit(d, d_h),
        "lambda_max": lambda: edges()[1] * s2d2,
        "lambda_min": lambda: edges()[0] * s2d2,
        "condition_number": lambda: edges()[1] / edges()[0],
        "stable_rank": lambda: d_h / edges()[1],
        "sum_lambda": lambda: mod("product").expected_sum_lambda(d, d_h, sigma_q, sigma_k),
        "sum_lambda2": lambda: mod("product").expected_sum_lambda2(d, d_h, sigma_q, sigma_k),
        "qk_std": lambda: np.sqrt(d_h) * s,
        "qk_excess_kurtosis": lambda: mod("variance_gamma").excess_kurtosis(d_h),
        "q_std": lambda: sigma_q, "k_std": lambda: sigma_k,
        "q_rms": lambda: sigma_q, "k_rms": lambda: sigma_k,
        "qk_entropy": lambda: mod("variance_gamma").entropy(d_h, s),
        "qk_delta_entropy": lambda: (mod("variance_gamma").entropy(d_h, s)
                                     - mod("gaussian").entropy(np.sqrt(d_h) * s)),
        "qk_kl_gaussian": lambda: mod("variance_gamma").kl_to_gaussian(d_h),
        "q_entropy": lambda: mod("gaussian").entropy(sigma_q),
        "k_entropy": lambda: mod("gaussian").entropy(sigma_k),
        "qk_mean": lambda: 0.0, "q_mean": lambda: 0.0, "k_mean": lambda: 0.0,
        "qk_skewness": lambda: 0.0, "q_skewness": lambda: 0.0, "k_skewness": lambda: 0.0,
        "q_excess_kurtosis": lambda: 0.0, "k_excess_kurtosis": lambda: 0.0,
        "q_delta_entropy": lambda: 0.0, "k_delta_entropy": lambda: 0.0,
        "q_kl_gaussian": lambda: 0.0, "k_kl_gaussian": lambda: 0.0,
        "q_weibull_k": lambda: anchor()[0], "k_weibull_k": lambda: anchor()[0],
        "q_weibull_lambda": lambda: anchor()[1] * sigma_q,
        "k_weibull_lambda": lambda: anchor()[1] * sigma_k,
    }
    refs = {}
    for name, recipe in recipes.items():
        try:
            value = float(recipe())
        except ZeroDivisionError:
            continue  # e.g. the condition number at c = 1, where the lower edge is 0
        if np.isfinite(value):
            refs[name] = value
    return refs



def _references(text, cell: str) -> dict:
    """The reference values of ``cell`` from a table's ``analytic_reference_values`` attr;
    :class:`TableError` if the attribute is not the JSON object rmtbase writes."""
    try:
        refs = json.loads(text).get(cell, {})
        return {str(k): float(v) for k, v in refs.items()}
    except (TypeError, ValueError, AttributeError):
        raise TableError(f"the table's analytic_reference_values attribute is not the JSON "
                         f"object rmtbase writes (starts {str(text)[:30]!r})") from None


#: Quantile levels of :func:`summary`, in percent.
QUANTILES = (0.1, 1.0, 5.0, 50.0, 95.0, 99.0, 99.9)


def summary(ds: xr.Dataset, d: int | None = None, d_h: int | None = None) -> dict:
    """Per statistic of one cell: ``n``, ``mean``, ``std`` (ddof 1), quantiles ``q0.1 .. q99.9``
    (linear interpolation) and ``analytic`` with its ``analytic_note`` where one exists.
    ``d``/``d_h`` pick the cell of a grid table; product-network tables are refused."""
    if ds.attrs.get("rmtbase_table_kind") == "product_network":
        raise InputError("this is a product-network table (dims d, depth, gain, draw); "
                         "summaries cover head tables only: open it with "
                         "rmtbase.baseline.read_table or xarray")
    cells = [(int(a), int(b)) for a in ds["d"].values for b in ds["d_h"].values]
    if d is None and d_h is None and len(cells) == 1:
        d, d_h = cells[0]
    if (d, d_h) not in cells:
        listed = ", ".join(f"{a}x{b}" for a, b in cells)
        raise InputError(f"pick one cell (d, d_h) of the table: {listed}")
    cell = ds.sel(d=d, d_h=d_h)
    refs = _references(ds.attrs.get("analytic_reference_values", "{}"), f"{d}x{d_h}")
    out = {}
    # one number per draw only: the stored spectrum (``lambda``, dims … draw, eig) is skipped
    names = [v for v in ds.data_vars if cell[v].dims == ("draw",)]
    if all(np.all(np.isnan(np.asarray(cell[v].values, dtype=np.float64))) for v in names):
        raise InputError(f"cell d={d}, d_h={d_h} was not computed in this table")
    for name in names:
        x = np.asarray(cell[name].values, dtype=np.float64)
        if np.all(np.isnan(x)):
            raise TableError(f"{name} has no draw (all NaN) in cell d={d}, d_h={d_h}: a damaged "
                             "table")
        q = np.quantile(x, np.array(QUANTILES) / 100)
        entry = {"n": int(x.size), "mean": float(x.mean()), "std": float(x.std(ddof=1))}
        entry.update({f"q{lvl:g}": float(v) for lvl, v in zip(QUANTILES, q, strict=True)})
        if name in refs:
            entry["analytic"] = float(refs[name])
            entry["analytic_note"] = REFERENCE_NOTES.get(name, "")
        out[str(name)] = entry
    return out
