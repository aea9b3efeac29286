"""The head decision from every tested axis: the statistics' omnibus and the profile's factor axes.

p_S is the statistics' calibrated Cauchy combination (:mod:`.omnibus`). p_A tests the factor
axes :data:`DECISION_AXES` (those of :mod:`.axes` with ``decision``: alignment, symmetry, q and
k input focus, :mod:`rmtbase.scoring.profile.factors`): per-axis two-sided p
(:class:`~.tails.TailModel`) combined by the capped Cauchy statistic and calibrated on the
profile null's own joint draws (:func:`~.omnibus.calibrated_p`), never below the smallest axis p.

p = min(1, 2·min(p_S, p_A)) (Bonferroni: P(p ≤ α) ≤ α whatever the dependence); a family with
no finite p leaves the other alone. BH (1995) over all heads gives ``head_flag``.
:func:`add_axes_decision` writes ``head_p_value``, ``head_p_method``, ``head_p_source``,
``head_p_statistics``, ``head_p_axes``, ``head_q_value``, ``head_flag`` and attr ``decision_axes``.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .axes import DECISION_AXES
from .omnibus import calibrated_p, cauchy_statistic, resolution_floor
from .significance import benjamini_hochberg
from .tails import TailModel

#: Families combined by :func:`combined_p` (Bonferroni over them).
FAMILIES = ("statistics", "axes")


def axis_null(draws: np.ndarray) -> tuple[list, np.ndarray]:
    """(a :class:`~.tails.TailModel` per axis of ``draws`` (N, A), the Cauchy statistic of each
    draw with every axis finite, its p left-one-out): :func:`axes_p`'s calibration."""
    models = [TailModel(draws[:, a]) for a in range(draws.shape[1])]
    ok = np.isfinite(draws).all(axis=1)
    p_null = np.stack([m.evaluate(draws[ok, a], loo=True)["p"]
                       for a, m in enumerate(models)], -1)
    return models, cauchy_statistic(p_null)


def axes_p(values: np.ndarray, draws: np.ndarray, null=None) -> tuple[np.ndarray, np.ndarray]:
    """(p_A, method) of heads' axis ``values`` (..., A) against a profile null's ``draws``
    (N, A) (``null``: their :func:`axis_null`, if at hand). NaN where no axis value is finite;
    draws with a non-finite axis are left out."""
    values = np.asarray(values, dtype=np.float64)
    draws = np.asarray(draws, dtype=np.float64)
    if draws.ndim != 2 or values.shape[-1] != draws.shape[1]:
        raise ValueError(f"axes_p: values (..., {draws.shape[-1]}) and draws (N, A) disagree: "
                         f"{values.shape}, {draws.shape}")
    models, t_null = axis_null(draws) if null is None else null
    p_heads = np.stack([m.evaluate(values[..., a])["p"] for a, m in enumerate(models)], -1)
    p, method = calibrated_p(cauchy_statistic(p_heads), t_null)
    return resolution_floor(p, p_heads), method


def combined_p(p_stats, p_axes) -> tuple[np.ndarray, np.ndarray]:
    """(p, source): Bonferroni over the two families, p = min(1, 2·min(p_S, p_A)); where one
    family's p is NaN the other's alone (module docstring). source names the family that sets
    p (``statistics`` on ties, ``""`` where both are NaN)."""
    ps = np.asarray(p_stats, dtype=np.float64)
    pa = np.asarray(p_axes, dtype=np.float64)
    fs, fa = np.isfinite(ps), np.isfinite(pa)
    k = fs.astype(np.int64) + fa
    low = np.fmin(ps, pa)
    p = np.where(k > 0, np.minimum(1.0, k * low), np.nan)
    source = np.where(fs & (~fa | (ps <= pa)), FAMILIES[0],
                      np.where(fa, FAMILIES[1], "")).astype(object)
    return p, source


def _axis_values(ds: xr.Dataset, axes) -> np.ndarray:
    return np.stack([ds["profile_value"].sel(axis=a).transpose("layer", "head").values
                     for a in axes], axis=-1).astype(np.float64)


def add_axes_decision(ds: xr.Dataset, axis_nulls, *, alpha: float) -> xr.Dataset:
    """Combine ``ds``'s omnibus head p with its profile's factor axes, in place; returns ``ds``.

    ``axis_nulls``: ``[(rows, {axis: (N,)})]`` (layer positions, None = all) or per-head
    ``{axis: (layer, head, N)}``. A score holding ``head_p_statistics`` is left as it is."""
    if "head_p_statistics" in ds or "profile_value" not in ds:
        return ds
    axes = [a for a in DECISION_AXES if a in ds["axis"].values]
    shape = (ds.sizes["layer"], ds.sizes["head"])
    p_axes = np.full(shape, np.nan)
    m_axes = np.full(shape, "", dtype=object)
    if axes:
        values = _axis_values(ds, axes)
        if isinstance(axis_nulls, dict):  # per head: (layer, head, N) each
            for h in np.ndindex(shape):
                draws = np.stack([np.asarray(axis_nulls[a])[h] for a in axes], axis=-1)
                p_axes[h], m_axes[h] = axes_p(values[h], draws)
        else:
            for rows, null in axis_nulls:
                rows = np.arange(shape[0]) if rows is None else np.asarray(rows, np.int64)
                draws = np.stack([np.asarray(null[a], np.float64) for a in axes], axis=-1)
                p_axes[rows], m_axes[rows] = axes_p(values[rows], draws)
    p_stats = ds["head_p_value"].transpose("layer", "head").values.astype(np.float64)
    m_stats = ds["head_p_method"].transpose("layer", "head").values.astype(object)
    p, source = combined_p(p_stats, p_axes)
    method = np.where(source == "axes", m_axes, m_stats)
    dims = ("layer", "head")
    ds["head_p_statistics"] = (dims, p_stats, {"definition": (
        "calibrated Cauchy combination of the head's family statistics (spectral and element; "
        "rmtbase.decision.omnibus)")})
    ds["head_p_axes"] = (dims, p_axes, {"definition": (
        "calibrated Cauchy combination of the factor axes' p (" + ", ".join(axes) + ") against "
        "the profile null (rmtbase.decision.combined)")})
    ds["head_p_value"] = (dims, p)
    ds["head_p_method"] = (dims, method.astype(str))
    ds["head_p_source"] = (dims, source.astype(str), {"definition": (
        "family that sets head_p_value: statistics | axes")})
    ok = np.isfinite(p)
    flag, q = benjamini_hochberg(p, alpha) if ok.any() else (np.zeros(shape, bool),
                                                             np.full(shape, np.nan))
    ds["head_q_value"] = (dims, q)
    ds["head_flag"] = (dims, flag)
    ds.attrs["decision_axes"] = ",".join(axes)
    return ds


__all__ = ["DECISION_AXES", "FAMILIES", "add_axes_decision", "axes_p", "combined_p"]
