"""A model's heavy-tail summaries with the null's spread, and the matrices unlike random.

:func:`model_summaries`: WeightWatcher's ``get_summary()`` (the mean over the matrices of
log_norm, alpha, alpha_weighted — once called "alpha_hat" —, log_alpha_norm, log_spectral_norm,
stable_rank, mp_softrank) and the mean rand_distance, each beside its null. The null of a mean
is the mean over the same matrices of one null draw each: replicate r takes draw
(r + j) mod D of the j-th matrix of each null table (tables are shared by matrices of one shape
and storage), so no replicate uses one draw twice while a table serves at most D matrices, and
tables of different shapes are independent. Per summary: the value, the add-one two-sided p
(:func:`rmtbase.decision.significance.empirical_p`) and the null's 2.5 / 50 / 97.5 % quantiles
over the D replicates. log_norm's null is the matrices' own (conditioned): no p.

:func:`alpha_flags`: the Benjamini–Hochberg (1995) step-up over the matrices' α p-values at
level ``fdr``: (flag, q)."""

from __future__ import annotations

import warnings

import numpy as np

#: WeightWatcher 0.7.7 ``get_summary()``'s metrics, then rand_distance (``randomize=True``).
SUMMARY = ("log_norm", "alpha", "alpha_weighted", "log_alpha_norm", "log_spectral_norm",
           "stable_rank", "mp_softrank", "rand_distance")
#: (value, p, null_lo, null_median, null_hi, matrices) per summary, in this order.
FIELDS = ("value", "p", "null_lo", "null_median", "null_hi", "matrices")


def replicates(nulls: list[tuple[object, dict]], metric: str) -> np.ndarray:
    """(k, D) null draws of ``metric`` of k matrices, ``nulls`` = [(table key, {metric: (D,)})]
    in the matrices' order, each row rotated by the matrix's index within its table (module
    docstring)."""
    seen: dict = {}
    rows = []
    for key, null in nulls:
        j = seen[key] = seen.get(key, -1) + 1
        rows.append(np.roll(np.asarray(null[metric], np.float64), -j))
    return np.vstack(rows)


def model_summaries(values: dict, nulls: list[tuple[object, dict]]) -> dict:
    """``{summary: FIELDS}`` of the described matrices: ``values`` {metric: (k,)} and their
    ``nulls`` (:func:`replicates`' input, the same k matrices, at each matrix's scale). A mean
    over the matrices where the metric is finite; the null's replicate means over those."""
    from ...decision.significance import empirical_p

    out = {}
    for metric in SUMMARY:
        v = np.asarray(values.get(metric, ()), np.float64)
        ok = np.isfinite(v)
        if not ok.any():
            out[metric] = (np.nan,) * 5 + (0,)
            continue
        reps = replicates([n for n, keep in zip(nulls, ok, strict=True) if keep], metric)
        with warnings.catch_warnings():  # a replicate without a finite draw: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            null = np.nanmean(reps, axis=0)
        mean = float(np.mean(v[ok]))
        finite = null[np.isfinite(null)]
        lo, med, hi = np.quantile(finite, [0.025, 0.5, 0.975]) if finite.size else (np.nan,) * 3
        spread = finite.size and np.ptp(finite) > 1e-12 * max(1.0, abs(med))
        p = float(empirical_p(mean, finite)[0]) if spread and metric != "log_norm" else np.nan
        out[metric] = (mean, p, float(lo), float(med), float(hi), int(ok.sum()))
    return out


def alpha_flags(p, fdr: float):
    """(flag, q) of the Benjamini–Hochberg step-up over the finite entries of ``p`` at
    ``fdr`` (NaN entries: not in the family, flag False)."""
    from ...decision.significance import benjamini_hochberg

    return benjamini_hochberg(p, fdr)


__all__ = ["FIELDS", "SUMMARY", "alpha_flags", "model_summaries", "replicates"]
