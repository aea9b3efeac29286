"""The Dataset of :func:`rmtbase.scoring.composition.run.composition`: each pair's one-sided add-one p
(and GPD tail p under the Gaussian-factor null), BH q over all pairs and per (kind, layer pair),
effect (score over the null median), flag, **standing** (rank among the receiver's sources and
over the kind, 1 = strongest: :func:`standing`; against the Gaussian null most trained pairs are
flagged, so the ranks screen circuits), the QK overlap, the heads' norms and the null's attrs."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import xarray as xr

from ...decision.significance import benjamini_hochberg
from ...stats import composition as C


def upper_p(values, null_sorted):
    """One-sided add-one p = (1 + #{null ≥ v}) / (1 + N); NaN stays NaN."""
    n = null_sorted.size
    v = np.asarray(values, np.float64)
    ge = n - np.searchsorted(null_sorted, v, side="left")
    p = (1.0 + ge) / (1.0 + n)
    return np.where(np.isfinite(v), p, np.nan)


def tail_p(comp, null_sorted):
    """One-sided upper p of scores ``comp`` against the sorted null scores: the tail-resolving p of
    :class:`rmtbase.decision.tails.TailModel` (add-one while ≥ 10 draws lie beyond, then a
    conservative GPD tail, ≥ :data:`~rmtbase.decision.tails.P_MIN`); a moment-matched Beta tail of
    s² is 2–5× too light (``tests/test_pvalue_tails.py``). NaN stays NaN."""
    from ...decision.tails import TailModel

    v = np.asarray(comp, np.float64)
    p = TailModel(null_sorted).evaluate(v)["p_hi"]
    return np.where(np.isfinite(v), p, np.nan)


_TAIL_DEF = ("composition_p where >= 10 null draws reach s; further out a generalized Pareto "
             "tail fitted to the draws with a conservative shape (rmtbase.decision.tails."
             "TailModel), floored at 1e-16",
             "composition_p: no tail beyond the draws under the permutation null")


def _moment_attrs(attrs) -> dict:
    """The Gaussian-factor null's moments of s² (stated only under that null)."""
    m, v = (C.null_moments(attrs["d"], attrs["d_h"], attrs["d_h"]) if "d" in attrs
            else (np.nan, np.nan))
    return {"null_exact_mean_s2": m, "null_var_s2": v,
            "null_var_s2_exact": int("d" in attrs and attrs["d_h"] <= 2)}


def standing(comp) -> tuple[np.ndarray, np.ndarray]:
    """("min") ranks of scores (3, L, H, L, H), 1 = largest, NaN off the pairs: among each
    receiver's (layer_to, head_to) sources, and over every cross-layer pair of the kind."""
    from scipy.stats import rankdata

    comp = np.asarray(comp, np.float64)
    n_k, n_l, n_h = comp.shape[0], comp.shape[1], comp.shape[2]
    by_source = np.full(comp.shape, np.nan, np.float32)
    by_kind = np.full(comp.shape, np.nan, np.float32)
    for i in range(n_k):
        for c in range(1, n_l):
            block = comp[i, :c, :, c, :].reshape(c * n_h, n_h)
            r = rankdata(-block, axis=0, method="min", nan_policy="omit")
            by_source[i, :c, :, c, :] = np.where(np.isfinite(block), r, np.nan).reshape(
                c, n_h, n_h)
        fin = np.isfinite(comp[i])
        by_kind[i][fin] = rankdata(-comp[i][fin], method="min")
    return by_source, by_kind


def _p_values(comp, null_sorted, attrs, p, median):
    """(p, tail p, null median): add-one and :func:`tail_p` from sorted Gaussian-null scores, or
    with ``null_sorted=None`` the given permutation ``p`` (no tail) and ``median``."""
    if null_sorted is None:
        return p, p, median
    p = upper_p(comp, null_sorted)
    return p, tail_p(comp, null_sorted), float(np.median(null_sorted))


#: Draws against which :func:`p_error` asks whether a flag could differ: this many times the
#: run's own.
OPEN_FACTOR = 10


def p_error(p, pt, draws: int, alpha: float, tail: bool):
    """The Monte Carlo error of the pairs' p: ``(se, open)``.

    ``se`` = √(p(1 − p)/N), the binomial se of the add-one ``p`` (Davison & Hinkley 1997 §4.2).
    ``open``: pairs whose BH flag at ``alpha`` (over ``pt``) could differ at :data:`OPEN_FACTOR` × N
    draws (:func:`rmtbase.scoring.stopping.joint.p_bounds` at level ε/m, ε = ``STOP_ERROR``)."""
    from ...decision.tails import MIN_EXCEEDANCES
    from ..stopping.joint import p_bounds
    from ..stopping.rule import STOP_ERROR

    p = np.asarray(p, np.float64)
    pt = np.asarray(pt, np.float64)
    n = int(draws)
    se = np.sqrt(p * (1.0 - p) / n)
    ok = np.isfinite(pt)
    k = np.rint(np.nan_to_num(p) * (n + 1) - 1)
    method = np.where(tail & (k < MIN_EXCEEDANCES), "gpd", "empirical")
    lo, hi = p_bounds(pt[ok], method[ok], n, OPEN_FACTOR * n, STOP_ERROR / max(int(ok.sum()), 1),
                      exceedances=k[ok])
    flag_lo = benjamini_hochberg(lo, alpha)[0]
    flag_hi = benjamini_hochberg(hi, alpha)[0]
    open_ = np.zeros(p.shape, bool)
    open_[ok] = flag_lo & ~flag_hi
    return se, open_


def _add_error(ds, dims, error, draws: int, alpha: float) -> None:
    """``composition_p_se``, a ``draws`` attr on the p variables, attrs ``composition_size_sd``
    (:func:`~rmtbase.scoring.stopping.joint.rate_sd` at α) and ``composition_open_pairs``."""
    from ..stopping.joint import rate_sd

    se, open_ = error
    ds["composition_p_se"] = xr.DataArray(se.astype(np.float32), dims=dims, attrs={
        "long_name": "Monte Carlo se of composition_p", "units": "1", "draws": draws,
        "definition": "sqrt(p (1 - p) / draws), p = composition_p: the binomial se of the "
                      "exceedance it estimates (beyond the draws the tail model's error is "
                      "not this)"})
    for name in ("composition_p", "composition_p_tail"):
        ds[name].attrs["draws"] = draws
    ds.attrs["composition_size_sd"] = rate_sd(draws, alpha)
    ds.attrs["composition_open_pairs"] = int(open_.sum())
    ds.attrs["composition_open_pairs_definition"] = (
        f"pairs whose BH flag at alpha could differ at {OPEN_FACTOR} x the draws "
        "(rmtbase.scoring.composition.dataset.p_error)")


def _family_q(pt, alpha: float) -> np.ndarray:
    """Benjamini–Hochberg q within each (kind, layer pair) family; NaN off the pairs."""
    n_l = pt.shape[1]
    qf = np.full(pt.shape, np.nan)
    for i in range(3):
        for a in range(n_l):
            for b in range(a + 1, n_l):
                qf[i, a, :, b, :] = benjamini_hochberg(pt[i, a, :, b, :], alpha)[1]
    return qf


def _definitions(gaussian: bool, med, alpha: float) -> dict:
    """{variable: (long_name, units, definition)} of the pair variables."""
    return {
        "composition": ("composition score", "1", "q: |W_OV1^T W_QK2|_F, k: |W_QK2 W_OV1|_F, "
                        "v: |W_OV2 W_OV1|_F, each over the product of the two heads' Frobenius "
                        "norms; NaN where layer_to <= layer_from"),
        "composition_p": ("one-sided add-one Monte Carlo p-value", "1",
                          "(1 + #{null >= s}) / (1 + draws), " + (
                              "independent Gaussian factors" if gaussian else
                              "each factor's entries permuted")),
        "composition_p_tail": ("p-value with a tail beyond the draws", "1",
                               _TAIL_DEF[not gaussian]),
        "composition_q": ("Benjamini-Hochberg q over all pairs and kinds", "1",
                          "BH over composition_p_tail"),
        "composition_q_family": ("Benjamini-Hochberg q within (kind, layer pair)", "1", ""),
        "composition_effect": ("composition over the null median", "1",
                               f"s / {med:.6g} (null median at d, d_h)" if gaussian
                               else "s / median of the pair's own permuted "
                               "scores (its first draws)"),
        "composition_flag": ("BH flag over all pairs at alpha", "1", f"composition_q <= {alpha}"),
        "composition_rank_source": (
            "rank among the receiver's earlier sources", "1",
            "1 = the largest score of this kind among the layer_to * n_heads pairs into "
            "(layer_to, head_to) from earlier layers; ties share the smallest rank"),
        "composition_rank_kind": (
            "rank over all pairs of the kind", "1",
            "1 = the largest score of this kind over every cross-layer pair (out of the "
            "attribute pairs_per_kind); ties share the smallest rank"),
    }


def _attrs(gaussian: bool, alpha: float, attrs: dict) -> dict:
    """The Dataset's attrs: conventions, the null and its kind, (Gaussian null) the moments
    of s², then the caller's ``attrs``."""
    from ... import __version__
    return {"Conventions": "CF-1.8", "title": "rmtbase head-head composition",
            "source": f"rmtbase {__version__}", "alpha": float(alpha),
            "null": ("independent Gaussian factors at each head's shapes (exact law, "
                     "scale-free); p one-sided upper, add-one" if gaussian
                     else "permutation: each factor's own entries shuffled (one "
                     "permutation per factor type and draw, shared by all heads); p "
                     "one-sided upper, add-one"),
            "null_kind": "gaussian" if gaussian else "permutation",
            **(_moment_attrs(attrs) if gaussian else {}),
            "history": datetime.now(UTC).isoformat(timespec="seconds"),
            **attrs}


def assemble(comp, overlap, norms, null_sorted, *, alpha: float = 0.05, attrs=None,
             p=None, median=None) -> xr.Dataset:
    """The Dataset from scores (3, L, H, L, H), overlap (L, H, H) and sorted null s, or with
    ``null_sorted=None`` the permutation ``p`` and ``median``; attr ``null_kind`` says which."""
    n_l, n_h = comp.shape[1], comp.shape[2]
    attrs = dict(attrs or {})
    gaussian = null_sorted is not None
    p, pt, med = _p_values(comp, null_sorted, attrs, p, median)
    flag, q = benjamini_hochberg(pt, alpha)
    draws = attrs.get("draws", null_sorted.size if gaussian else None)
    error = None if draws is None else p_error(p, pt, int(draws), alpha, gaussian)
    by_source, by_kind = standing(comp)
    dims = ("kind", "layer_from", "head_from", "layer_to", "head_to")
    coords = {"kind": list(C.KINDS), "layer_from": np.arange(n_l), "head_from": np.arange(n_h),
              "layer_to": np.arange(n_l), "head_to": np.arange(n_h), "layer": np.arange(n_l)}
    defs = _definitions(gaussian, med, alpha)
    data = {"composition": comp, "composition_p": p, "composition_p_tail": pt,
            "composition_q": q,
            "composition_q_family": _family_q(pt, alpha), "composition_effect": comp / med,
            "composition_flag": np.where(np.isfinite(p), flag, False).astype(np.int8),
            "composition_rank_source": by_source, "composition_rank_kind": by_kind}
    ds = xr.Dataset(coords=coords)
    for name, arr in data.items():
        ln, units, definition = defs[name]
        ds[name] = xr.DataArray(arr, dims=dims, attrs={"long_name": ln, "units": units,
                                                        "definition": definition})
    if error is not None:
        _add_error(ds, dims, error, int(draws), alpha)
    ds["qk_overlap"] = xr.DataArray(overlap, dims=("layer", "head_from", "head_to"), attrs={
        "long_name": "QK overlap (Frobenius cosine) of two heads of one layer", "units": "1",
        "definition": "<W_QK^a, W_QK^b>_F / (|W_QK^a|_F |W_QK^b|_F)"})
    ds["qk_norm"] = xr.DataArray(np.sqrt(norms["qk"]), dims=("layer", "head_to"),
                                 attrs={"long_name": "|W_QK|_F", "units": "weight^2"})
    ds["ov_norm"] = xr.DataArray(np.sqrt(norms["ov"]), dims=("layer", "head_to"),
                                 attrs={"long_name": "|W_OV|_F", "units": "weight^2"})
    if gaussian:
        ds["null_median"] = med
    else:
        ds["null_median"] = xr.DataArray(med, dims=dims, attrs={
            "long_name": "median of the pair's permuted scores", "units": "1"})
    ds.attrs.update(_attrs(gaussian, alpha, attrs))
    ds.attrs["pairs_per_kind"] = int(np.isfinite(comp[0]).sum())
    return ds
