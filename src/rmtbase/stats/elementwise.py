"""Element-wise statistics of any matrix (W_Q, W_K, W_QK, a null draw): O(N) work, no sort.

``element_stats(w)`` treats the N = m·n entries of each ``(..., m, n)`` matrix as one sample;
each formula is its ``STAT_INFO[name]['definition']``: moments ddof 0; entropy Miller–Madow
(Miller 1955) on ⌈2 N^{1/3}⌉ Rice bins; the Weibull fit of arXiv:2605.18898 App. A. For
float16/bfloat16 each value spreads over its rounding cell
(:func:`rmtbase.stats.precision.lattice_cells`), so bins do not alias with the lattice.
Sort-free: a histogram of ln|w| with 2¹¹ bins per octave (:mod:`rmtbase.stats._magnitude`), only
x inside a bin replaced by the bin mean (≲ 10⁻⁷)."""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from .._matmul import mm_tn
from ..errors import InputError
from ._binning import (  # noqa: F401 - re-exported: the binning constants and helpers
    Q_LEVEL,
    _cell_histogram,
    entropy_bins,
    trim_fraction,
    trim_ranks,
)
from .precision import check_storage
from .statistic import element_names
from .tiles import one_tile

#: The element statistics of a head's matrices, in registry order: the records of
#: :data:`rmtbase.stats.statistic.STATISTICS` of kind "element" that a head's tables hold.
ELEMENT_STATS = element_names()


def flat_element_stats(w, trim, storage="float32", side=None):
    """All element statistics of a flat ``w`` ``(N,)`` stored as ``storage`` (one trim); with
    ``side`` returns (statistics, side counts)."""
    st = one_tile(w, (trim,), storage, side)
    out = named_element_stats(st)
    return out if side is None else (out, st["side"])


def named_element_stats(st: dict) -> dict:
    """:data:`ELEMENT_STATS` from one trim's statistics of :mod:`.tiles` (its ``"weibull"``
    pair named ``weibull_k``, ``weibull_lambda``)."""
    k, lam = st.pop("weibull")[0]
    st["weibull_k"], st["weibull_lambda"] = k, lam
    return {s: st[s] for s in ELEMENT_STATS}


def qk_element_stats(q, k, trim, side=None):
    """:func:`flat_element_stats` of the flat W_QK = qᵀ k (float32, :func:`rmtbase._matmul.mm`):
    W_QK's one definition, shared by the nulls and scoring."""
    return flat_element_stats(mm_tn(q, k).reshape(-1), trim, side=side)


def element_stats(w, *, trim=0.8, storage="float32") -> dict:
    """Element statistics of ``w`` ``(..., m, n)`` over its last two axes; keys :data:`ELEMENT_STATS`.

    Each has shape ``w.shape[:-2]`` in ``w``'s dtype (integers promoted to the default float).
    ``trim`` ∈ (0, 1]: the Weibull fit's kept central fraction. ``storage``: float16/bfloat16
    use lattice cells (module docstring)."""
    trim_fraction(trim)
    storage = check_storage(storage)
    w = jnp.asarray(w)
    if w.ndim < 2:
        raise InputError(f"element_stats needs a matrix (..., m, n), got shape {w.shape}")
    if not jnp.issubdtype(w.dtype, jnp.floating):
        w = w.astype(jnp.result_type(float))
    batch = w.shape[:-2]
    n = w.shape[-1] * w.shape[-2]
    if n < 2:
        raise InputError(f"element_stats needs at least 2 entries, got shape {w.shape}")
    out = _element_stats_flat(w.reshape((-1, n)), float(trim), storage)
    return {k: v.reshape(batch) for k, v in out.items()}


@partial(jax.jit, static_argnames=("trim", "storage"))
def _element_stats_flat(flat, trim, storage="float32"):
    """Compiled once per (shape, dtype, trim, storage): one matrix at a time (scatter-friendly
    on CPU)."""
    return jax.lax.map(lambda v: flat_element_stats(v, trim, storage), flat)


__all__ = ["ELEMENT_STATS", "Q_LEVEL", "element_stats", "entropy_bins", "flat_element_stats",
           "named_element_stats", "qk_element_stats", "trim_fraction", "trim_ranks"]
