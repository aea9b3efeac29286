"""Binning helpers of the element statistics (definitions and bounds: :mod:`.elementwise`)."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import InputError

Q_LEVEL = Fraction(99, 100)


def entropy_bins(n: int) -> int:
    """Rice rule ⌈2 N^{1/3}⌉ bins for the entropy histogram of N entries (at least 1)."""
    b = max(1, math.ceil(2.0 * n ** (1.0 / 3.0) - 1e-9))
    while (b - 1) ** 3 >= 8 * n:  # guard the float cube root
        b -= 1
    while b**3 < 8 * n:
        b += 1
    return b


def trim_ranks(n: int, trim) -> tuple[int, int]:
    """1-based kept ranks [i_lo, i_hi] of the Weibull fit: (1−trim)/2 ≤ (i − ½)/N ≤ (1+trim)/2,
    in exact rational arithmetic (trim read through its decimal string)."""
    t = trim_fraction(trim)
    lo = (1 - t) / 2
    hi = (1 + t) / 2
    i_lo = max(1, math.ceil(lo * n + Fraction(1, 2)))
    i_hi = min(n, math.floor(hi * n + Fraction(1, 2)))
    return i_lo, i_hi


def trim_fraction(trim) -> Fraction:
    """``trim`` as an exact Fraction in (0, 1]; InputError otherwise."""
    try:
        t = Fraction(str(trim))
    except (ValueError, TypeError) as exc:
        raise InputError(f"trim must be a number in (0, 1], got {trim!r}") from exc
    if not (0 < t <= 1):
        raise InputError(f"trim must be in (0, 1], got {trim!r}")
    return t


@lru_cache(maxsize=32)
def _cum_y_table(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Grid t and C(t) = Σ_{i ≤ t} ln(−ln(1 − (i − ½)/N)) (float64), linearly interpolated between
    grid points: exact integers within 2048 of both ends, geometric towards the ends, uniform in
    the middle."""
    pts = [np.arange(0, min(n, 2048) + 1), np.arange(max(0, n - 2048), n + 1),
           np.linspace(0, n, 16385).round()]
    if n > 2:
        geo = np.geomspace(1, max(n / 2, 1), 8192).round()
        pts += [geo, n - geo]
    grid = np.unique(np.clip(np.concatenate(pts), 0, n).astype(np.int64))
    vals = np.empty(grid.size)
    total, start, gi = 0.0, 0, 0
    chunk = 1 << 20
    while start < n or gi < grid.size:
        stop = min(n, start + chunk)
        i = np.arange(start + 1, stop + 1, dtype=np.float64)
        cs = total + np.cumsum(np.log(-np.log1p(-(i - 0.5) / n)))
        while gi < grid.size and grid[gi] <= stop:
            t = grid[gi]
            vals[gi] = total if t == start else cs[t - start - 1]
            gi += 1
        if stop > start:
            total = cs[-1]
        start = stop
        if start >= n and gi < grid.size:  # only t == n can remain
            vals[gi:] = total
            break
    return grid.astype(np.float64), vals


#: Largest N whose grid index table (:func:`_grid_words`, N/4 bytes) is built; above it the
#: interpolation finds its grid interval by ``jnp.interp``'s binary search.
GRID_WORDS_MAX_N = 2**20


@lru_cache(maxsize=32)
def _grid_words(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The grid of :func:`_cum_y_table` as bits: bit b of ``mask[w]`` marks integer 32w + b,
    ``base[w]`` counts grid points below 32w; grid points ≤ t are
    ``base[t >> 5] + popcount(mask[t >> 5] & low bits ≤ t & 31)`` (two gathers, no search)."""
    grid = _cum_y_table(n)[0].astype(np.int64)
    words = n // 32 + 1
    mask = np.zeros(words, np.uint32)
    np.bitwise_or.at(mask, grid >> 5, np.left_shift(np.uint32(1), (grid & 31).astype(np.uint32)))
    base = np.searchsorted(grid, np.arange(words, dtype=np.int64) * 32, side="left")
    return base.astype(np.int32), mask


def _grid_index(t, n: int):
    """``searchsorted(grid, t, side="right")`` for integers 0 ≤ t ≤ N (:func:`_grid_words`)."""
    base, mask = _grid_words(n)
    ti = t.astype(jnp.int32)
    w, b = ti >> 5, (ti & 31).astype(jnp.uint32)
    m = jnp.asarray(mask)[w]
    low = jnp.where(b == 31, m, m & ((jnp.uint32(1) << (b + 1)) - jnp.uint32(1)))
    return jnp.asarray(base)[w] + jax.lax.population_count(low).astype(jnp.int32)


def _cum_y(t, n: int, dtype):
    """C(t) of :func:`_cum_y_table` at integer ranks 0 ≤ t ≤ N: ``jnp.interp``'s formula step for
    step, the interval found by :func:`_grid_index` up to :data:`GRID_WORDS_MAX_N`."""
    grid, vals = _cum_y_table(n)
    x, xp, fp = t.astype(dtype), jnp.asarray(grid, dtype), jnp.asarray(vals, dtype)
    if n > GRID_WORDS_MAX_N:
        return jnp.interp(x, xp, fp)
    i = jnp.clip(_grid_index(t, n), 1, xp.shape[0] - 1)
    df = fp[i] - fp[i - 1]
    dx = xp[i] - xp[i - 1]
    delta = x - xp[i - 1]
    dx0 = jax.lax.abs(dx) <= np.spacing(np.finfo(np.dtype(dtype)).eps)
    f = jnp.where(dx0, fp[i - 1], fp[i - 1] + (delta / jnp.where(dx0, 1, dx)) * df)
    f = jnp.where(x < xp[0], fp[0], f)
    return jnp.where(x > xp[-1], fp[-1], f)


def sorted_bincount(idx, length: int):
    """``jnp.bincount(idx, length=length)`` without a scatter: sort, then count_j = #{idx < j+1} −
    #{idx < j} by binary search; the same integers."""
    s = jnp.sort(idx.reshape(-1))
    edges = jnp.searchsorted(s, jnp.arange(length + 1, dtype=s.dtype), side="left",
                             method="scan_unrolled")
    return jnp.diff(edges).astype(jax.dtypes.canonicalize_dtype(np.int64))


#: counters one blocked histogram may hold (blocks × bins), and entries a block at least holds
BLOCKED_COUNTERS = 2**21
BLOCK_MIN_ENTRIES = 4096


def histogram_blocks(n: int, length: int) -> int:
    """Blocks of a blocked histogram of ``n`` entries in ``length`` bins: at most 1,024, each
    of at least :data:`BLOCK_MIN_ENTRIES` entries, at most :data:`BLOCKED_COUNTERS` counters."""
    return max(1, min(n // BLOCK_MIN_ENTRIES, BLOCKED_COUNTERS // max(1, length), 1024))


def _block_ids(n: int, blocks: int):
    """The block of each of ``n`` entries: contiguous runs of ⌈n/blocks⌉."""
    return jnp.arange(n, dtype=jnp.int32) // -(-n // blocks)


def blocked_sum(idx, values, length: int, blocks: int | None = None):
    """Σ of ``values`` per bin ``idx`` in [0, ``length``) (flat arrays), by one histogram per block
    of entries summed over blocks (hot bins do not serialise atomic adds); floats summed in
    another order."""
    idx = idx.reshape(-1)
    n = idx.shape[0]
    blocks = histogram_blocks(n, length) if blocks is None else blocks
    acc = jnp.zeros((blocks, length), values.dtype)
    return acc.at[_block_ids(n, blocks), idx].add(values.reshape(-1)).sum(axis=0)


def blocked_bincount(idx, length: int, blocks: int | None = None):
    """``jnp.bincount(idx, length=length)`` by :func:`blocked_sum`: the same integers."""
    ones = jnp.ones(idx.size, jax.dtypes.canonicalize_dtype(np.int64))
    return blocked_sum(idx, ones, length, blocks)


def on_accelerator() -> bool:
    """Whether the program being traced is for an accelerator (JAX's default backend): the
    histograms take their blocked form there (:func:`bincount`)."""
    return jax.default_backend() != "cpu"


def bincount(idx, length: int):
    """The integer histogram of ``idx`` in [0, ``length``): one scatter on the CPU, per-block
    histograms on an accelerator (:func:`blocked_bincount`); the same counts either way."""
    if not on_accelerator():
        return jnp.bincount(idx, length=length)
    return blocked_bincount(idx, length)


def _rank_bin(cum, r):
    """Index of the first bin whose cumulative count reaches rank r (1-based)."""
    return jnp.searchsorted(cum, r, side="left")


def _det3(c0, c1, c2):
    """Determinant of the 3×3 matrix with columns c0, c1, c2."""
    return (c0[0] * (c1[1] * c2[2] - c2[1] * c1[2]) - c1[0] * (c0[1] * c2[2] - c2[1] * c0[2])
            + c2[0] * (c0[1] * c1[2] - c1[1] * c0[2]))


def _third_coefficient(a, b):
    """x[2] of a x = b for a 3×3 system by Cramer's rule (no LAPACK custom call, which deadlocks
    when run concurrently on CPU); the core fit's matrix is well conditioned (κ ≈ 10)."""
    return _det3(a[:, 0], a[:, 1], b) / _det3(a[:, 0], a[:, 1], a[:, 2])


def _gauss_mass(lo, hi, mu, sd):
    """N(mu, sd²) mass of [lo, hi], tail-safe (erfc on the side away from the mean)."""
    s2 = sd * math.sqrt(2.0)
    a = (lo - mu) / s2
    b = (hi - mu) / s2
    right = 0.5 * (jax.scipy.special.erfc(a) - jax.scipy.special.erfc(b))
    left = 0.5 * (jax.scipy.special.erfc(-b) - jax.scipy.special.erfc(-a))
    return jnp.where(a > 0, right, left)


def _cell_histogram(lo, hi, hmin, delta, nbins: int, dtype):
    """Histogram of the uniform laws on the cells [lo_i, hi_i] over bins hmin + [j, j+1)·Δ.

    Bin j receives Σ_i |[lo_i, hi_i] ∩ bin j| / (hi_i − lo_i), the expected histogram of the values
    dithered over their cells (exact, no random numbers)."""
    c = hi - lo
    j0 = jnp.clip(jnp.floor((lo - hmin) / delta), 0, nbins - 1).astype(jnp.int32)
    j1 = jnp.clip(jnp.floor((hi - hmin) / delta), 0, nbins - 1).astype(jnp.int32)
    span = j1 - j0

    def body(state):
        t, acc = state
        j = jnp.minimum(j0 + t, nbins - 1)
        left = jnp.where(j == 0, -jnp.inf, hmin + j.astype(dtype) * delta)
        right = jnp.where(j == nbins - 1, jnp.inf, hmin + (j + 1).astype(dtype) * delta)
        ov = jnp.clip(jnp.minimum(hi, right) - jnp.maximum(lo, left), 0.0, None)
        ov = jnp.where(c > 0, ov / jnp.where(c > 0, c, 1.0), 1.0)  # a zero-width cell: a point
        ov = jnp.where(t <= span, ov, 0.0)
        return t + 1, acc + jnp.bincount(j, weights=ov, length=nbins)

    _, cnt = jax.lax.while_loop(lambda s: s[0] <= jnp.max(span), body,
                                (jnp.int32(0), jnp.zeros(nbins, dtype)))
    return cnt
