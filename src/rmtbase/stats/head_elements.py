"""One head's element statistics as compiled programs shared by scoring and the null tables.

A head's W_QK = W_Qᵀ W_K (d×d) element statistics, with the histogram of its entries stored with
a score, and the element statistics of a factor (W_Q or W_K) are each one compiled program per
(shape, dtype, storage), called one head — or one null draw — at a time:

- :func:`compiled` (``which``, ``storage``): W_QK's statistics (``_qk_one``, W_QK counted as
  points) and its histogram (:func:`elements_and_histogram`), and the statistics of the
  factors in ``which`` stored as ``storage``, over a stack of heads (``lax.map``).
  :mod:`rmtbase.scoring.qk_elements` calls it with one head a call, and the CPU null tables
  (:mod:`rmtbase.baseline.null_elements`) with one draw a call (the histogram discarded), so a
  cold quantised score compiles the program once where it compiled the table's copy inlined
  in its draw program too (issue 59 item 4).
- ``stats.elementwise._element_stats_flat`` on one row (1, d_h·d): W_K's statistics where
  scoring takes them apart from W_QK's (GQA) and the table's W_K.

Same numbers, bit for bit: a 200-draw Q4_1 table at 576×64 drawn with its element statistics
inlined in the draw program and drawn through these programs agreed in every variable's bytes
(45 of 45), and one head a call against five (and one row against three) in every byte.
XLA does not promise it; ``scripts/restructure_check.sh`` and ``tests/test_head_elements.py``
keep checking.

The histogram: z = entry / scale (scale = √d_h σ̂_Q σ̂_K, the null's entry std at the head's
measured rms), a density on the fixed bins :data:`QK_HIST_EDGES` (64 bins on [−8, 8]),
counted in the same scatter as the entropy histogram (``stats.tiles.one_tile``'s ``side``).
"""

from __future__ import annotations

import functools

import numpy as np

#: Bin edges of the stored histogram of z = W_QK entry / (√d_h σ̂_Q σ̂_K).
QK_HIST_EDGES = np.linspace(-8.0, 8.0, 65)

#: Weibull trim of the element statistics: ``stats.head_stats``' default, with which the null
#: tables are made.
TRIM = 0.8


def elements_and_histogram(q, k, scale, trim: float = TRIM):
    """(element statistics, histogram) of one head's W_QK = qᵀ k (traceable JAX). q, k:
    (d_h, d); scale: √d_h σ̂_Q σ̂_K. The statistics are ``stats.elementwise._qk_one``, the
    computation the null's ``stats.head_stats`` and the permutation null use; the histogram
    is counted in the same scatter as their entropy histogram (``stats.tiles.one_tile``'s
    ``side``)."""
    import jax.numpy as jnp

    from .elementwise import _qk_one

    lo, nb = float(QK_HIST_EDGES[0]), QK_HIST_EDGES.size - 1
    width = float(QK_HIST_EDGES[1] - QK_HIST_EDGES[0])
    st, counts = _qk_one(q, k, trim, side=(scale, lo, width, nb))
    return st, counts.astype(jnp.float32) / (q.shape[1] * k.shape[1] * width)


def compiled(which: tuple = (), storage: str = "float32", trim: float = TRIM):
    """jax.jit of ``(wq, wk, scale) -> ({"qk.<stat>", "q.<stat>", …: (n,)}, (n, bins))``: the
    element statistics of W_QK and its histogram, head by head (``lax.map``), and the element
    statistics of the factors named in ``which`` ("q", "k") stored as ``storage``
    (``stats.elementwise._one``, the estimator of the null's ``head_stats``). One jit per
    (which, storage name, trim) however they are spelled, so scoring and the tables share it."""
    from .precision import check_storage

    return _compiled(tuple(which), check_storage(storage), float(trim))


@functools.cache
def _compiled(which: tuple, storage: str, trim: float):
    import jax

    from .elementwise import _one

    def head(a):
        q, k, scale = a
        st, hist = elements_and_histogram(q, k, scale, trim)
        out = {f"qk.{s}": v for s, v in st.items()}
        for m, w in (("q", q), ("k", k)):
            if m in which:
                out.update({f"{m}.{s}": v for s, v in _one(w.reshape(-1), trim, storage).items()})
        return out, hist

    return jax.jit(lambda wq, wk, scale: jax.lax.map(head, (wq, wk, scale)))


def factor_elements(w, storage: str = "float32", trim: float = TRIM) -> dict:
    """Element statistics of each matrix of ``w`` (numpy (n, m, d)) stored as ``storage``, one
    matrix a call of ``_element_stats_flat`` on (1, m·d): ``{stat: (n,)}`` numpy."""
    from .elementwise import _element_stats_flat
    from .precision import check_storage

    storage = check_storage(storage)
    rows = [_element_stats_flat(np.reshape(w[i], (1, -1)), float(trim), storage)
            for i in range(w.shape[0])]
    return {s: np.concatenate([np.asarray(r[s]) for r in rows]) for s in rows[0]}


__all__ = ["QK_HIST_EDGES", "TRIM", "compiled", "elements_and_histogram", "factor_elements"]
