"""A table's float range at σ: tables are sampled at σ = 1 and moved to (σ_Q, σ_K) exactly.

:func:`scale_draws` moves each statistic by its exact rule (:class:`Rule`) in float64, stored
in the table's dtype. :func:`check_sigma_range` refuses, with one line, a σ at which a statistic
leaves the dtype's normal range (λ ∝ (σ_Qσ_K)², Σλ² ∝ (σ_Qσ_K)⁴), before and after drawing."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .table_contents import LAMBDA_ATTRS, LAMBDA_KEY, LAMBDA_VAR

#: Margin kept from the ends of the float range by the up-front σ check (the draws spread
#: around the analytic magnitudes used there).
RANGE_MARGIN = 1e3


def _ratio(matrix: str, sigma_q: float, sigma_k: float) -> float:
    return {"qk": sigma_q * sigma_k, "q": sigma_q, "k": sigma_k}[matrix]


def _log10(x: float) -> float:
    return math.log10(x) if 0 < x < math.inf else (-math.inf if x <= 0 else math.inf)


def float_range(dtype) -> tuple[float, float]:
    """(smallest normal, largest finite) value of ``dtype``."""
    info = np.finfo(np.dtype(dtype))
    return float(info.tiny), float(info.max)


def check_sigma_range(cells, names, sigma_q: float, sigma_k: float, dtype: str) -> None:
    """Up-front check that statistics ``names`` of every cell stay inside ``dtype``'s normal range
    at (σ_Q, σ_K) within :data:`RANGE_MARGIN`, from the analytic σ = 1 magnitudes (else 1)."""
    from ..stats import STAT_INFO, table_name
    from .references import reference_values

    if sigma_q == 1.0 and sigma_k == 1.0:
        return
    tiny, big = float_range(dtype)
    for d, d_h in cells:
        refs = reference_values(d, d_h)
        for name in names:
            matrix, stat = name.split(".", 1)
            info = STAT_INFO[stat]
            if info["scaling"] != "power" or not info["sigma_power"]:
                continue
            base = abs(refs.get(table_name(name), 1.0)) or 1.0
            p = int(info["sigma_power"])
            log_m = math.log10(base) + p * _log10(_ratio(matrix, sigma_q, sigma_k))
            lo, hi = math.log10(tiny * RANGE_MARGIN), math.log10(big / RANGE_MARGIN)
            if not lo <= log_m <= hi:
                _refuse(table_name(name), _OF[matrix], p, f"about 1e{log_m:.0f}", sigma_q,
                        sigma_k, dtype)


_OF = {"qk": "(sigma_q*sigma_k)", "q": "sigma_q", "k": "sigma_k"}


def _refuse(var, of, p, value, sigma_q, sigma_k, dtype):
    tiny, big = float_range(dtype)
    alt = "dtype float64 (--dtype float64), or " if np.dtype(dtype) == np.float32 else ""
    raise InputError(f"at sigma_q={sigma_q:g}, sigma_k={sigma_k:g} the statistic {var} "
                     f"(proportional to {of}^{p}) is {value}, outside the {np.dtype(dtype).name} "
                     f"range [{tiny:.3g}, {big:.3g}]; use {alt}a sigma = 1 table and "
                     "rmtbase.baseline.rescale")


@dataclass(frozen=True)
class Rule:
    """How one statistic moves with σ (``sigma_power`` ``p``, ``scaling`` "power" or "log") and how
    a refusal names it (``label``, and ``of``, what it is proportional to)."""

    p: int
    scaling: str
    label: str
    of: str


def scale_values(x, rule: Rule, r: float, dtype, sigma_q: float, sigma_k: float) -> np.ndarray:
    """``x·r^p`` (``"power"``) or ``x + p ln r`` (``"log"``) in float64, returned as ``dtype``;
    InputError naming ``rule.label`` if a finite nonzero value would become infinite, zero or
    subnormal."""
    p, scaling = rule.p, rule.scaling
    x = np.asarray(x)
    if p == 0:  # shape statistics do not move with σ
        return x.astype(np.dtype(dtype), copy=False)
    tiny, big = float_range(dtype)
    x = x.astype(np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if scaling == "log":
            new = x + p * np.log(np.float64(r))
        else:
            new = x * (np.float64(r) ** p)
        a = np.abs(new[np.isfinite(x) & (x != 0)])
    if scaling == "log":  # an additive shift can only overflow
        a = a[a >= tiny]
    if a.size and (not np.all(np.isfinite(a)) or a.max() > big or a.min() < tiny):
        worst = a.max() if not np.all(np.isfinite(a)) or a.max() > big else a.min()
        _refuse(rule.label, rule.of, p, f"{worst:.3g}", sigma_q, sigma_k, dtype)
    return new.astype(np.dtype(dtype))


def scale_draws(draws: dict, sigma_q: float, sigma_k: float, dtype: str) -> dict:
    """σ = 1 draws ``{"qk.npr": array, …}`` at (σ_Q, σ_K) by :func:`scale_values` (the rule
    of :data:`rmtbase.stats.STAT_INFO`). At σ_Q = σ_K = 1 the arrays are returned unchanged."""
    from ..stats import STAT_INFO, table_name

    if sigma_q == 1.0 and sigma_k == 1.0:
        return draws
    out = {}
    for name, v in draws.items():
        matrix, stat = name.split(".", 1)
        if name == LAMBDA_KEY:  # the stored spectrum: lambda ∝ (sigma_q sigma_k)^2
            rule = Rule(LAMBDA_ATTRS["sigma_power"], "power", LAMBDA_VAR, _OF[matrix])
            out[name] = scale_values(v, rule, _ratio(matrix, sigma_q, sigma_k), dtype, sigma_q,
                                     sigma_k)
            continue
        if stat not in STAT_INFO:  # not a table variable
            out[name] = v
            continue
        info = STAT_INFO[stat]
        rule = Rule(int(info["sigma_power"]), info["scaling"], table_name(name), _OF[matrix])
        out[name] = scale_values(v, rule, _ratio(matrix, sigma_q, sigma_k), dtype, sigma_q,
                                 sigma_k)
    return out
