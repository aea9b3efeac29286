"""The per-head histogram of W_QK's entries stored with a score (``qk_hist``).

z = entry / (√d_h σ̂_Q σ̂_K), variance-gamma with variance 1 under the null (Gaunt 2014): a
density on :data:`QK_HIST_EDGES` (64 bins on [−8, 8]); mass beyond ±8 is 1 − Σ density × 0.25."""

from __future__ import annotations

import numpy as np
import xarray as xr

#: Bin edges of the stored histogram of z = W_QK entry / (√d_h σ̂_Q σ̂_K).
QK_HIST_EDGES = np.linspace(-8.0, 8.0, 65)


def elements_and_histogram(q, k, scale, trim: float = 0.8):
    """(element statistics, histogram) of one head's W_QK = qᵀ k (traceable JAX); q, k (d_h, d);
    scale √d_h σ̂_Q σ̂_K; the statistics are the null's (``stats.elementwise.qk_element_stats``)."""
    import jax.numpy as jnp

    from ...stats.elementwise import qk_element_stats

    lo, nb = float(QK_HIST_EDGES[0]), QK_HIST_EDGES.size - 1
    width = float(QK_HIST_EDGES[1] - QK_HIST_EDGES[0])
    st, counts = qk_element_stats(q, k, trim, side=(scale, lo, width, nb))
    return st, counts.astype(jnp.float32) / (q.shape[1] * k.shape[1] * width)


def passes_and_histogram(q, k, scale):
    """:func:`elements_and_histogram` up to the finish: ((accumulators, geometry), histogram);
    :func:`finish` gives the statistics, compiled apart."""
    import jax.numpy as jnp

    from ..._matmul import mm_tn
    from ...stats.tiles import tile_passes

    lo, nb = float(QK_HIST_EDGES[0]), QK_HIST_EDGES.size - 1
    width = float(QK_HIST_EDGES[1] - QK_HIST_EDGES[0])
    acc, geo = tile_passes(mm_tn(q, k).reshape(-1), "float32", side=(scale, lo, width, nb))
    counts = acc.pop("side")
    return (acc, geo), counts.astype(jnp.float32) / (q.shape[1] * k.shape[1] * width)


def finish(passes, n: int, trim: float = 0.8) -> dict:
    """W_QK's element statistics (those of :func:`elements_and_histogram`) from
    :func:`passes_and_histogram`'s ``(accumulators, geometry)`` over ``n`` = d² entries."""
    from ...stats.elementwise import named_element_stats
    from ...stats.tiles import tile_finish

    acc, geo = passes
    return named_element_stats(tile_finish(acc, geo, n, (trim,), "float32"))


def add_qk_hist(ds: xr.Dataset, hist: np.ndarray) -> None:
    """Store the heads' histograms as ``qk_hist`` (layer, head, qk_z), bin centres ``qk_z``."""
    e = QK_HIST_EDGES
    ds["qk_hist"] = (("layer", "head", "qk_z"), np.asarray(hist, dtype=np.float32))
    ds["qk_hist"].attrs.update(
        definition="density of z = W_QK entry / (sqrt(d_h) sigma_Q sigma_K) (sigma = the head's "
                   "entry rms) on fixed bins; variance-gamma with variance 1 under the null",
        bin_width=float(e[1] - e[0]), z_min=float(e[0]), z_max=float(e[-1]))
    ds.coords["qk_z"] = 0.5 * (e[:-1] + e[1:])


__all__ = ["QK_HIST_EDGES", "add_qk_hist", "elements_and_histogram", "finish",
           "passes_and_histogram"]
