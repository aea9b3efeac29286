"""One layer's head statistics for scoring: rms, spectral statistics and the normalised
spectrum in one compiled program, W_QK element statistics head by head on threads.

The statistics are :func:`rmtbase.stats.head_stats`'s — the same implementation as the null's —
batched over the heads of a layer; :func:`rmtbase.scoring.score.score_model` calls
:func:`layer_stats` once per layer.
"""

from __future__ import annotations

import functools

import numpy as np


@functools.cache
def _compiled():
    """jax.jit of (head_stats without element statistics, eigvals_from_factors) over one
    layer's heads: rms and spectral statistics; compiled once per (shape, dtype, options) and
    reused across layers and models of the same shape. The element statistics are computed
    head by head on threads (:mod:`rmtbase.scoring.qk_elements`)."""
    import jax

    from ..stats import head_stats
    from ..stats.spectral import eigvals_from_factors

    def layer_stats(wq, wk, spectral):
        st = head_stats(wq, wk, spectral=spectral, elementwise=False)
        return st, eigvals_from_factors(wq, wk)

    return jax.jit(layer_stats, static_argnames=("spectral",))


def layer_stats(wq, wk, kind: str, storage: str = "float32", group: int = 1,
                 entry_law: bool = True, hist: bool = False):
    """head_stats batched over the heads of one layer, plus the normalised spectrum
    x = λ / (rms_Q² rms_K² d²) (descending). With GQA (``group`` > 1 query heads per key head,
    ``wk`` expanded) the element statistics of W_K are computed once per key head; those of
    W_QK (and W_Q, and W_K without GQA) run on
    :func:`rmtbase.scoring.qk_elements.scoring_threads` threads.
    With ``hist`` also returns the heads' W_QK histograms (:mod:`.qk_histogram`; None without
    element statistics)."""
    spectral, elementwise = kind in ("all", "spectral"), kind in ("all", "elementwise")
    which = ("q",) if group > 1 else ("q", "k")
    if not entry_law:
        which = ()
    # the layer's rms and spectra here; the element statistics of W_Q (and W_K) with W_QK's,
    # head by head on the worker threads (the same estimator, _one, as the null's head_stats)
    st, lam = _compiled()(wq, wk, spectral=spectral)
    st = {k: np.asarray(v, dtype=np.float64) for k, v in st.items() if np.ndim(v) == 1}
    qk_hist = None
    if elementwise:
        from .qk_elements import hist_scale, qk_elements

        scale = hist_scale(st["q.rms"], st["k.rms"], wq.shape[-2])
        qk_st, qk_hist = qk_elements(wq, wk, scale, which=which, storage=storage)
        st.update({k: np.asarray(v, dtype=np.float64) for k, v in qk_st.items()})
    if group > 1 and elementwise and entry_law:
        from ..stats import element_stats

        kst = element_stats(wk[::group], storage=storage)
        st.update({f"k.{s}": np.repeat(np.asarray(v, dtype=np.float64), group)
                   for s, v in kst.items()})
    lam = np.asarray(lam, dtype=np.float64)
    d = wq.shape[-1]
    x = lam / (st["q.rms"][:, None] ** 2 * st["k.rms"][:, None] ** 2 * d**2)
    return (st, x, qk_hist) if hist else (st, x)


__all__ = ["layer_stats"]
