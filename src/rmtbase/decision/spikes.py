"""Spectral outliers of a head: ``n_spikes``, the eigenvalues of W_QK above its null's largest.

With x = λ / (rms_Q² rms_K² d²) and t the (1 − α) quantile of the head's null largest x (the
⌈(1 − α)(N + 1)⌉-th smallest of its ``qk.lambda_max`` draws):

    n_spikes = #{k : x_(k) > t},        spike_x_k = x_(k) / x₊ for k ≤ n_spikes,

x₊ the upper edge of MP_c ⊠ MP_c (:func:`rmtbase.analytic.product.edges`). A rank-r change of
W_Q or W_K changes W_QK by rank ≤ r, so by Weyl P(n_spikes > r) ≤ α (Kritchman & Nadler 2008's
step-down with the largest-eigenvalue law). Full-rank alignment also gives outliers: read
n_spikes as spectral concentration, not as the rank training added."""

from __future__ import annotations

import numpy as np
import xarray as xr

#: Family-wise level of the count per head.
SPIKE_ALPHA = 0.05


def spike_threshold(null_xmax, alpha: float = SPIKE_ALPHA) -> np.ndarray:
    """The ⌈(1 − α)(N + 1)⌉-th smallest finite null draw of x_max over the last axis (+inf
    where N is too small); ``null_xmax`` (N,) or (..., N)."""
    x = np.sort(np.asarray(null_xmax, dtype=np.float64), axis=-1)
    n = np.isfinite(x).sum(axis=-1)
    k = np.ceil((1.0 - alpha) * (n + 1)).astype(np.int64)
    ok = k <= n
    idx = np.clip(k - 1, 0, x.shape[-1] - 1)
    t = np.take_along_axis(x, np.asarray(idx)[..., None], axis=-1)[..., 0]
    return np.where(ok, t, np.inf)


def count_spikes(x, threshold, upper_edge: float) -> tuple[np.ndarray, np.ndarray]:
    """(n_spikes, spike_x) of spectra ``x`` (..., d_h), sorted descending, against
    ``threshold`` (broadcast over the leading axes): the number of leading eigenvalues above
    it, and x / ``upper_edge`` for those (NaN beyond n_spikes)."""
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(threshold, dtype=np.float64)[..., None]
    above = np.cumprod(x > t, axis=-1).astype(bool)  # step-down: stop at the first miss
    n = above.sum(axis=-1)
    return n, np.where(above, x / float(upper_edge), np.nan)


def spike_p(x, null_xmax) -> np.ndarray:
    """Add-one p of each eigenvalue x_k (..., d_h) against the null draws of the largest
    eigenvalue ``null_xmax`` ((N,) shared or (..., N)): (1 + #{draws ≥ x_k}) / (1 + N), the
    probability that a null head's largest eigenvalue reaches x_k."""
    draws = np.sort(np.asarray(null_xmax, dtype=np.float64), axis=-1)
    x = np.asarray(x, dtype=np.float64)
    if draws.ndim == 1:
        fin = draws[np.isfinite(draws)]
        below = np.searchsorted(fin, x, side="left")
        return (1.0 + fin.size - below) / (1.0 + fin.size)
    out = np.empty(x.shape)
    for idx in np.ndindex(x.shape[:-1]):
        fin = draws[idx][np.isfinite(draws[idx])]
        out[idx] = (1.0 + fin.size - np.searchsorted(fin, x[idx], side="left")) / (1.0 + fin.size)
    return out


def spikes_of(x, null_xmax, d: int, d_h: int, alpha: float = SPIKE_ALPHA):
    """n_spikes (...,) and spike_x (..., d_h) of normalised spectra ``x`` against null draws of
    the normalised largest eigenvalue ``null_xmax`` ((N,) shared or (..., N) per head)."""
    from ..analytic.product import edges

    if not 0 < alpha < 1:  # False for NaN too
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return count_spikes(x, spike_threshold(null_xmax, alpha), edges(d_h / d)[1])


def add_spikes(ds: xr.Dataset, x: np.ndarray, ref: dict, d: int, d_h: int) -> None:
    """``n_spikes`` (layer, head) and ``spike_x`` (layer, head, spike) from normalised spectra ``x``
    against the null draws of normalised λ_max in ``ref``, or a list of ``(rows, ref)`` for layers
    with nulls of their own."""
    from ..analytic.product import edges
    from .scale import normalise

    def of(r):
        return normalise("qk.lambda_max", r["qk.lambda_max"], r["q.rms"], r["k.rms"]) / d**2

    x = np.asarray(x, dtype=np.float64)
    if isinstance(ref, list):
        n, sx = np.zeros(x.shape[:-1], dtype=np.int64), np.full(x.shape, np.nan)
        sp = np.full(x.shape, np.nan)
        for rows, r in ref:
            n[rows], sx[rows] = spikes_of(x[rows], of(r), d, d_h)
            sp[rows] = spike_p(x[rows], of(r))
    else:
        n, sx = spikes_of(x, of(ref), d, d_h)
        sp = spike_p(x, of(ref))
    ds["n_spikes"] = (("layer", "head"), n.astype(np.int64))
    ds["spike_x"] = (("layer", "head", "spike"), sx)
    ds["spike_p"] = (("layer", "head", "spike"), np.where(np.isfinite(sx), sp, np.nan))
    ds["spike_p"].attrs["definition"] = (
        "for k <= n_spikes, (1 + #{null draws of the largest eigenvalue >= x_k}) / (1 + N): "
        "how often a null head's largest eigenvalue reaches the k-th outlier; NaN beyond "
        "n_spikes")
    ds.coords["spike"] = np.arange(1, sx.shape[-1] + 1)
    ds["n_spikes"].attrs["definition"] = (
        f"number of leading eigenvalues of W_QK above the {1 - SPIKE_ALPHA:.0%} quantile of the "
        "head's null largest eigenvalue (step-down; for an additive rank-r change of W_Q or "
        f"W_K, P(count > r) <= {SPIKE_ALPHA}; a full-rank alignment of W_Q and W_K also makes "
        "outliers: spectral concentration, not a count of learned directions; "
        "rmtbase.decision.spikes)")
    ds["n_spikes"].attrs["long_name"] = "eigenvalues of W_QK above the null's largest"
    ds["n_spikes"].attrs["units"] = "1"
    ds["spike_x"].attrs["definition"] = (
        f"x_k / x_+ for k <= n_spikes: the outliers in units of the MP_c x MP_c upper edge "
        f"x_+ = {edges(d_h / d)[1]:.6g} (c = d_h/d); NaN beyond n_spikes")


__all__ = ["SPIKE_ALPHA", "add_spikes", "count_spikes", "spike_p", "spike_threshold",
           "spikes_of"]
