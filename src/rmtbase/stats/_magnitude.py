"""The histogram of |w| behind the Weibull fit and q99 (:mod:`rmtbase.stats.tiles`, pass 2).

Bins come from the bits of a = |w|: exponent and the top :data:`MAG_BITS` mantissa bits split each
octave into 2^MAG_BITS equal bins (relative width ≤ 4.9·10⁻⁴). :data:`MAG_OCTAVES` octaves up to
max a are covered; bin 0 holds exact zeros, bin 1 everything below. Bins hold count and Σ ln a."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from ._binning import Q_LEVEL, _cum_y, _cum_y_table, _rank_bin, trim_ranks

MAG_BITS = 11  # bins per octave: 2^MAG_BITS
MAG_OCTAVES = 32  # octaves covered below max|w|'s
MAG_BINS = (MAG_OCTAVES << MAG_BITS) + 2  # + exact zeros + below the covered range


def _int_view(dtype):
    """(integer dtype of the same width, mantissa bits) of a float dtype."""
    return (jnp.int64, 52) if jnp.dtype(dtype).itemsize == 8 else (jnp.int32, 23)


def mag_top(amax):
    """Key (top bits) of the bin holding ``amax``: every bin is keyed relative to it."""
    it, mant = _int_view(amax.dtype)
    return jax.lax.bitcast_convert_type(amax, it) >> (mant - MAG_BITS)


def mag_index(a, top):
    """Bin of each a = |w| ≥ 0 (module docstring): 0 for zeros, 1 below the covered octaves."""
    it, mant = _int_view(a.dtype)
    key = jax.lax.bitcast_convert_type(a, it) >> (mant - MAG_BITS)
    first = top - (MAG_BINS - 3)  # key of bin 2
    j = jnp.clip(key - first, -1, MAG_BINS - 3) + 2
    return jnp.where(a > 0, j, 0).astype(jnp.int32)


def _edges(s, top, dtype):
    """[lo, hi) of bin ``s`` ≥ 1 in a."""
    it, mant = _int_view(dtype)
    key = top - (MAG_BINS - 3) + (s - 2)

    def value(k):
        return jax.lax.bitcast_convert_type(
            (jnp.maximum(k, 0) << (mant - MAG_BITS)).astype(it), jnp.dtype(dtype))

    return jnp.where(s >= 2, value(key), 0.0), value(key + 1)


def q_rank(n: int) -> int:
    """Rank ⌈0.99 N⌉ of q99 (inverted-CDF order statistic, 1-based)."""
    return math.ceil(Q_LEVEL * n)


def q99(cnt, sx, top, n: int, exact_ties: bool, dtype, cum=None):
    """The ⌈0.99 N⌉-th smallest a: its bin, then interpolation by rank, ((r − below) − ½)/count;
    exact for a one-entry bin or with ``exact_ties`` (float16/bfloat16 lattice). ``cum``: cumsum."""
    r = q_rank(n)
    cum = jnp.cumsum(cnt) if cum is None else cum
    s = _rank_bin(cum, r)
    c = cnt[s]
    lo, hi = _edges(s, top, dtype)
    frac = ((r - (cum[s] - c)).astype(dtype) - 0.5) / jnp.maximum(c, 1).astype(dtype)
    value = jnp.where(c == 1, jnp.exp(sx[s]), lo + frac * (hi - lo))
    if exact_ties:
        value = jnp.where(s >= 2, lo, value)
    return jnp.where(s == 0, 0.0, value)


#: Bins of the window in which :func:`weibull_fit` looks up the cumulative y table: the bins
#: holding kept ranks when they span fewer bins than this (8 octaves, a ratio of 256 between
#: the largest and smallest kept |w|; a Gaussian's middle 80 % spans 3.7 octaves), else every
#: bin. The lookup (a binary search per bin) was most of the fit's cost.
FIT_WINDOW = 8 << MAG_BITS


#: Bins at the top of the histogram (8 octaves below max a's) whose cumulative counts
#: :func:`rank_cum` forms on its own when the bins below hold fewer entries than the first
#: rank looked up (a Gaussian sample puts ~1.4 % of its entries below max a / 256).
RANK_TOP = 8 << MAG_BITS


def rank_cum(cnt, below: int):
    """The cumulative counts ``cumsum(cnt)`` for look-ups of ranks ≥ ``below`` (exact integers).

    When the bins under the top :data:`RANK_TOP` hold fewer than ``below`` entries only the top
    ones are summed (the rest read 0; the same fit and q99 bit for bit)."""
    head, tail = cnt[:-RANK_TOP], cnt[-RANK_TOP:]
    m = jnp.sum(head)
    return jax.lax.cond(
        m < below,
        lambda: jnp.concatenate([jnp.zeros_like(head), m + jax.lax.cumsum(tail)]),
        lambda: jax.lax.cumsum(cnt))


def _ysum(ends, n: int, dtype, start):
    """Σy over each bin's kept ranks, C(ends[j+1]) − C(ends[j]), computed for the
    :data:`FIT_WINDOW` bins from ``start`` and zero elsewhere (where no rank is kept)."""
    part = jax.lax.dynamic_slice(ends, (start,), (FIT_WINDOW + 1,))
    c = _cum_y(part, n, dtype)
    return jax.lax.dynamic_update_slice(jnp.zeros(ends.shape[0] - 1, dtype), c[1:] - c[:-1],
                                        (start,))


def weibull_fit(cnt, sx, n: int, trim, dtype, cum=None):
    """k, λ of one trim: bin j holds ranks r0_j + 1 … r0_j + cnt_j, its kept ranks paired with its
    mean x and their exact Σy (:func:`rmtbase.stats._binning._cum_y_table`). ``cum``: cumsum."""
    i_lo, i_hi = trim_ranks(n, trim)
    n_keep = i_hi - i_lo + 1
    cum = jnp.cumsum(cnt) if cum is None else cum
    r0 = cum - cnt
    first = jnp.maximum(r0 + 1, i_lo)
    last = jnp.minimum(r0 + cnt, i_hi)
    n_in = jnp.maximum(last - first + 1, 0)
    has = n_in > 0
    xm = sx / jnp.maximum(cnt, 1).astype(dtype)
    n_in_f = n_in.astype(dtype)
    xbar = jnp.sum(jnp.where(has, n_in_f * xm, 0.0)) / n_keep
    # Σ y over the kept ranks of bin j is C(last_j) − C(first_j − 1). The kept rank window of
    # bin j ends where bin j+1's begins: with e_j = clip(r0_j + cnt_j, i_lo − 1, i_hi),
    # last_j = e_j and first_j − 1 = e_{j−1} for every bin that keeps a rank, so one lookup of
    # C at [e_{−1}, e_0, e_1, …] serves both ends (same arguments, same numbers). Only the bins
    # that keep a rank need it (ysum is masked by ``has`` below): when they lie within
    # FIT_WINDOW bins, only those are looked up (the same numbers, bit for bit).
    ends = jnp.clip(jnp.concatenate([r0[:1], cum]), i_lo - 1, i_hi)
    if cnt.shape[0] > FIT_WINDOW:
        s_lo = _rank_bin(cum, i_lo)
        s_hi = _rank_bin(cum, i_hi)
        start = jnp.minimum(s_lo, cnt.shape[0] - FIT_WINDOW)
        ysum = jax.lax.cond(s_hi - start < FIT_WINDOW,
                            lambda: _ysum(ends, n, dtype, start),
                            lambda: _ysum_all(ends, n, dtype))
    else:
        ysum = _ysum_all(ends, n, dtype)
    dx = jnp.where(has, xm - xbar, 0.0)
    sxy = jnp.sum(jnp.where(has, dx * ysum, 0.0))
    sxx = jnp.sum(jnp.where(has, n_in_f * dx * dx, 0.0))
    grid, vals = _cum_y_table(n)
    ybar = float(np.interp(i_hi, grid, vals) - np.interp(i_lo - 1, grid, vals)) / n_keep
    k = sxy / sxx
    return k, jnp.exp(-(ybar - k * xbar) / k)


def _ysum_all(ends, n: int, dtype):
    c_ends = _cum_y(ends, n, dtype)
    return c_ends[1:] - c_ends[:-1]


__all__ = ["MAG_BINS", "MAG_BITS", "MAG_OCTAVES", "RANK_TOP", "mag_index", "mag_top", "q99",
           "q_rank", "rank_cum", "weibull_fit"]
