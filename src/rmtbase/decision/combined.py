"""The head decision from every tested axis: the omnibus over the statistics and the profile's
factor axes, combined by one stated rule (issue 48, item 1).

Two families of evidence decide a head:

- **statistics**: the calibrated Cauchy combination of the head's spectral and element
  statistics (:mod:`rmtbase.decision.omnibus`), p_S;
- **axes**: the profile's factor axes :data:`DECISION_AXES` — alignment ⟨W_Q, W_K⟩/(‖W_Q‖‖W_K‖),
  symmetry tr(W_QK²)/‖W_QK‖², and W_Q's and W_K's input focus
  (:mod:`rmtbase.scoring.factor_axes`) — which no statistic of the first family sees: a head
  made symmetric (W_K ← 0.6·A·W_Q + 0.8·W_K, A = diag(±1)) has symmetry 0.35 against a null
  band of ±0.007 at 384 × 32, yet its p_S was 0.45. The profile's other axes are not in this
  family: ``concentration`` and ``entry_tails`` are statistics of the first (``qk.npr``,
  ``k.excess_kurtosis``), ``scale`` and ``outliers`` are descriptive.

Axes p (p_A). Each axis a gets a two-sided tail-resolving p_a against the profile null's draws
of that axis (:class:`rmtbase.decision.tails.TailModel`: add-one empirical, a conservative GPD
tail beyond the draws, never below :data:`~rmtbase.decision.tails.P_MIN`). They are combined as
the statistics are, by the Cauchy statistic of the p-values capped at ½
(:func:`~rmtbase.decision.omnibus.cauchy_statistic`), **calibrated on the profile null's own
draws**: draw j's four axes are evaluated against the draws with j left out and give T_j, and a
head's T is read against {T_j} (:func:`~rmtbase.decision.omnibus.calibrated_p`: empirical while
≥ 10 draws lie beyond, then the Cauchy tail index anchored at the 10th largest), never below the
head's smallest axis p (:func:`~rmtbase.decision.omnibus.resolution_floor`). No independence
between axes is assumed: the calibration uses the draws' joint law. (The Gaussian null of
float storages draws alignment and symmetry jointly — exactly — and the two input focuses from
independent column energies, as W_Q and W_K are independent; the reduced draws take the
energies independent of the Gram that alignment and symmetry read, where for full factors they
are weakly dependent. Block formats and FP8 draw full factors: the joint law exactly. The
permutation null: each head against its own shuffles, every axis from the same shuffle.)

Combination. p = min(1, 2·min(p_S, p_A)): Bonferroni over the two families. It needs no model
of the dependence between p_S and p_A (spectral statistics and the factor axes read the same
W_Q, W_K) and P(p ≤ α) ≤ α under the null whatever that dependence; for independent uniform
p_S, p_A it is 1 − (1 − α/2)² = 0.0494 at α = 0.05, so the rule is nearly exact where the
dependence is weak (measured on random models: ``tests/test_decision_calibration.py``). A
family with no finite p (no statistics scored, or no profile) leaves the other alone, without
the factor 2. The p-floor conventions carry over: p_S and p_A are each ≥ P_MIN and ≥ their
own family's smallest p, and 2·min(p_S, p_A) keeps both bounds. Benjamini–Hochberg (1995) over
all heads then gives ``head_flag``, as before.

:func:`add_axes_decision` writes the combination into a score: ``head_p_value`` (the combined
p), ``head_p_method`` (the method of the family that sets it), ``head_p_source``
(``statistics`` | ``axes``), ``head_p_statistics`` (p_S, what ``head_p_value`` was before),
``head_p_axes`` (p_A), ``head_q_value``/``head_flag`` (BH over heads), and the attribute
``decision_axes``. One function for every path that decides a head (the Gaussian null and its
per-storage layer groups, the permutation null, a fine-tune's delta, collections of scores).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .omnibus import calibrated_p, cauchy_statistic, resolution_floor
from .significance import benjamini_hochberg
from .tails import TailModel

#: The profile axes that enter the head decision (module docstring).
DECISION_AXES = ("alignment", "symmetry", "q_input_focus", "k_input_focus")
#: Families combined by :func:`combined_p` (Bonferroni over them).
FAMILIES = ("statistics", "axes")


def axes_p(values: np.ndarray, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p_A, method) of heads against one profile null (module docstring, "Axes p").

    values: (..., A) the heads' axis values; draws: (N, A) the null's draws of the same axes
    (row j one draw). Returns p_A (...) and its method (``empirical`` | ``extrapolated`` |
    ``floor``, :func:`~rmtbase.decision.omnibus.calibrated_p`). A head with no finite axis
    value gets NaN. Each axis needs ≥ 2 finite draws; draws with a non-finite axis are left
    out of the calibration."""
    values = np.asarray(values, dtype=np.float64)
    draws = np.asarray(draws, dtype=np.float64)
    if draws.ndim != 2 or values.shape[-1] != draws.shape[1]:
        raise ValueError(f"axes_p: values (..., {draws.shape[-1]}) and draws (N, A) disagree: "
                         f"{values.shape}, {draws.shape}")
    models = [TailModel(draws[:, a]) for a in range(draws.shape[1])]
    p_heads = np.stack([m.evaluate(values[..., a])["p"] for a, m in enumerate(models)], -1)
    ok = np.isfinite(draws).all(axis=1)
    p_null = np.stack([m.evaluate(draws[ok, a], loo=True)["p"]
                       for a, m in enumerate(models)], -1)
    p, method = calibrated_p(cauchy_statistic(p_heads), cauchy_statistic(p_null))
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
    """Combine ``ds``'s omnibus head p with its profile's factor axes (module docstring), in
    place; returns ``ds``.

    ``ds``: a score with ``head_p_value``/``head_p_method`` (the statistics' omnibus) and
    ``profile_value`` over ``axis``. ``axis_nulls``: what the axes were tested against — a list
    of ``(rows, {axis: (N,)})``, the layer positions (None = every layer) sharing one Gaussian
    profile null, or ``{axis: (layer, head, N)}``, per-head (permutation) draws. Called once:
    a score that already holds ``head_p_statistics`` is left as it is."""
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
