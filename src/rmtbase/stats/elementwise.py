"""Element-wise statistics of any matrix (W_Q, W_K, W_QK, a null draw): O(N) work, no sort.

``element_stats(w)`` treats the N = m·n entries of each ``(..., m, n)`` matrix as one sample
(leading axes are batch axes). Every estimator is declared here and in
``rmtbase.stats.STAT_INFO[...]['definition']``; nothing is silently clipped.

- mean; std (ddof 0); skewness m3/m2^{3/2}; excess kurtosis m4/m2² − 3 (central moments by two
  passes: the mean first, then centred powers).
- entropy S: histogram plug-in with the Miller–Madow correction, on B_e = ⌈2 N^{1/3}⌉ equal bins
  (Rice rule: a bin count fixed by the sample size) spanning the data-adaptive range
  [min w, max w] (every entry is counted):  S = −Σ_j p_j ln(p_j/Δ) + (m − 1)/(2N), p_j = n_j/N,
  Δ = (max − min)/B_e, m = number of non-empty bins (Miller 1955). −inf for a constant matrix.
- Stored lattices (``storage="float16"``/``"bfloat16"``): a stored value stands for its whole
  rounding cell (:func:`rmtbase.stats.precision.lattice_cells`; bfloat16 keeps 8 significant
  bits, so a cell is up to 1/128 of the value). Counting points, B_e bins of a few lattice
  steps alias with the lattice (bins hold 2 or 3 lattice points by turns), which makes the
  histogram jagged and biases S down and the KL up by many null standard deviations at
  d_h·d ≳ 10⁵. With a lattice storage every value spreads its unit mass uniformly over its cell
  (n_j = Σ_i |cell_i ∩ bin j| / |cell_i|: the exact expectation of the histogram of ±½-cell
  dithered values, with no random numbers), the range is the union of the cells, and S, KL and
  σ_fit are computed from these n_j as above, except that Miller–Madow's m counts the bins that
  hold a stored value (mass spilled by a cell into an empty neighbour is not a new bin; counting
  it shifted S and KL by ~1 null sd at 4096×128). The cell-averaged law differs from the unrounded
  one by O((cell/σ)²) ≈ 10⁻⁵. ``storage="float32"`` (or a block format) counts points.
- delta_entropy ΔS = S − ½ ln(2πe σ̂²), σ̂ the ddof-0 std (seed 000).
- kl_gaussian: binned KL to N(μ̂, σ̂²) on the same bins, Miller–Madow corrected:
  Σ_j p_j ln(p_j/q_j) − (m − 1)/(2N), q_j the N(μ̂, σ̂²) mass of bin j (erfc, tail-safe). Its
  discretisation error largely cancels between p and q; it can be slightly negative for
  Gaussian data (it is an unbiased-to-first-order estimate of a quantity ≥ 0; not clipped).
- sigma_fit: Gaussian core fit. Weighted least squares (weights n_j, the inverse Poisson
  variance of ln n_j) of ln n_j = a + b u + e u² over the non-empty bins of the entropy
  histogram whose centres satisfy |c_j − μ̂| ≤ 2σ̂, u = (c − μ̂)/σ̂; σ_fit² = σ̂²/(−2e) − Δ²/12
  (Sheppard's correction for the bin width). When the fitted log-curvature is not negative
  (e ≥ 0: a flat-topped or dipped core, e.g. uniform entries) there is no Gaussian core and
  σ_fit = +inf (the limit e → 0⁻); when the fitted core is narrower than the bins resolve
  (σ_fit² ≤ 0 after Sheppard) σ_fit = 0. NaN only if fewer than 3 bins qualify.
- weibull_k, weibull_lambda: the Weibull paper's protocol (arXiv:2605.18898, App. A;
  npm-weibull-py) on a = |w|: plotting position F_i = (i − ½)/N (Hazen) for the i-th smallest
  a; keep the ranks with (1 − trim)/2 ≤ F_i ≤ (1 + trim)/2 (trim = 0.8: 0.10 ≤ F ≤ 0.90; with
  trim = 1 every rank is kept and F never reaches 0 or 1); least squares of
  y = ln(−ln(1 − F)) on x = ln a; k = slope, λ = exp(−intercept/k). Exact zeros inside the kept
  ranks give NaN (ln 0). Computed without a sort (see below).
- max_over_q99: max|w| / q99, q99 the ⌈0.99 N⌉-th smallest |w| (inverted-CDF order statistic),
  located by a two-pass histogram refinement and interpolated in a bracket of width
  max|w|/(4096·16384) (≈ 1.5·10⁻⁸ max|w|, float32 resolution).

Sort-free Weibull fit. Pass 1: a 4096-bin histogram of a on [0, max a] gives every bin's rank
range; the bins holding ranks i_lo and i_hi bound the kept ranks. Pass 2: 16384 bins uniform in
x = ln a across that bracket, accumulating counts and Σx per bin (exact zeros in their own bin).
Since the bins are contiguous in rank, the kept Σy over a bin's ranks is exact (from a table of
the cumulative sums of y_i computed once per N in float64), and the only approximation is the
pairing of x and y inside one bin: the bin mean of x stands for each element's x. Both
centred sums S_xy = Σ_b (x̄_b − x̄) Y_b and S_xx = Σ_b n_b (x̄_b − x̄)² then miss terms of
relative size O(Δx²) ≲ 10⁻⁸ for a fit range spread over 16384 bins — below float32 rounding.
The test suite checks the fit against a sorted reference implementation of the protocol.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import InputError
from .precision import check_storage, is_lattice, lattice_cells

ELEMENT_STATS = (
    "mean",
    "std",
    "skewness",
    "excess_kurtosis",
    "entropy",
    "delta_entropy",
    "kl_gaussian",
    "sigma_fit",
    "weibull_k",
    "weibull_lambda",
    "max_over_q99",
)

COARSE_BINS = 4096  # pass 1 on |w| in [0, max|w|]
FINE_BINS = 16384  # pass 2 (Weibull bracket, in ln|w|) and q99 refinement
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
    """1-based kept ranks [i_lo, i_hi] of the Weibull fit: (1−trim)/2 ≤ (i − ½)/N ≤ (1+trim)/2.

    Exact rational arithmetic (trim is read through its decimal string, so 0.8 means 8/10).
    """
    t = _trim_fraction(trim)
    lo = (1 - t) / 2
    hi = (1 + t) / 2
    i_lo = max(1, math.ceil(lo * n + Fraction(1, 2)))
    i_hi = min(n, math.floor(hi * n + Fraction(1, 2)))
    return i_lo, i_hi


def _trim_fraction(trim) -> Fraction:
    try:
        t = Fraction(str(trim))
    except (ValueError, TypeError) as exc:
        raise InputError(f"trim must be a number in (0, 1], got {trim!r}") from exc
    if not (0 < t <= 1):
        raise InputError(f"trim must be in (0, 1], got {trim!r}")
    return t


@lru_cache(maxsize=32)
def _cum_y_table(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Grid t and C(t) = Σ_{i ≤ t} ln(−ln(1 − (i − ½)/N)) (float64), dense at both ends.

    Exact integers for t ≤ 2048 and t ≥ N − 2048, geometric spacing towards both ends and a
    uniform middle; C is linearly interpolated between grid points (C'' = y' is small away
    from the ends, where the grid is exact). Built by chunked float64 cumulative sums.
    """
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


def _cum_y(t, n: int, dtype):
    grid, vals = _cum_y_table(n)
    return jnp.interp(t.astype(dtype), jnp.asarray(grid, dtype), jnp.asarray(vals, dtype))


def _rank_bin(cum, r):
    """Index of the first bin whose cumulative count reaches rank r (1-based)."""
    return jnp.searchsorted(cum, r, side="left")


def _weibull(a, x, idx1, amax, cum1, n: int, trim, dtype):
    """Sort-free Weibull (k, λ) of a = |w| by the paper's protocol (see module docstring)."""
    i_lo, i_hi = trim_ranks(n, trim)
    n_keep = i_hi - i_lo + 1
    d1 = amax / COARSE_BINS
    b_lo = _rank_bin(cum1, i_lo)
    b_hi = _rank_bin(cum1, i_hi)
    n_below = jnp.where(b_lo > 0, cum1[jnp.maximum(b_lo - 1, 0)], 0)
    lo_edge = b_lo.astype(dtype) * d1
    hi_edge = (b_hi + 1).astype(dtype) * d1
    inside = (idx1 >= b_lo) & (idx1 <= b_hi)
    pos_min = jnp.min(jnp.where(inside & (a > 0), a, amax))
    x_lo = jnp.log(jnp.maximum(lo_edge, pos_min))
    x_hi = jnp.log(hi_edge)
    span = jnp.where(x_hi > x_lo, x_hi - x_lo, 1.0)
    z = jnp.clip(jnp.floor((x - x_lo) / span * FINE_BINS), 0, FINE_BINS - 1)
    # layout: 0 = exact zeros (lowest ranks), 1..FINE_BINS = bracket bins, FINE_BINS+1 = outside
    idx2 = jnp.where(inside, jnp.where(a > 0, z.astype(jnp.int32) + 1, 0), FINE_BINS + 1)
    nb = FINE_BINS + 2
    cnt = jnp.bincount(idx2, length=nb)[: nb - 1]
    sx = jnp.bincount(idx2, weights=x, length=nb)[: nb - 1]
    r0 = n_below + jnp.cumsum(cnt) - cnt  # ranks r0+1 .. r0+cnt
    first = jnp.maximum(r0 + 1, i_lo)
    last = jnp.minimum(r0 + cnt, i_hi)
    n_in = jnp.maximum(last - first + 1, 0)
    has = n_in > 0
    xm = sx / jnp.maximum(cnt, 1).astype(dtype)
    n_in_f = n_in.astype(dtype)
    sx_keep = jnp.sum(jnp.where(has, n_in_f * xm, 0.0))
    xbar = sx_keep / n_keep
    # Σ y over the kept ranks of bin j is C(last_j) − C(first_j − 1). The kept rank window of
    # bin j ends where bin j+1's begins: with e_j = clip(r0_j + cnt_j, i_lo − 1, i_hi),
    # last_j = e_j and first_j − 1 = e_{j−1} for every bin that keeps a rank, so one lookup of
    # C at [e_{−1}, e_0, e_1, …] serves both ends (same arguments, same numbers).
    ends = jnp.clip(jnp.concatenate([r0[:1], r0 + cnt]), i_lo - 1, i_hi)
    c_ends = _cum_y(ends, n, dtype)
    ysum = c_ends[1:] - c_ends[:-1]
    dx = jnp.where(has, xm - xbar, 0.0)
    sxy = jnp.sum(jnp.where(has, dx * ysum, 0.0))
    sxx = jnp.sum(jnp.where(has, n_in_f * dx * dx, 0.0))
    grid, vals = _cum_y_table(n)
    ybar = float(np.interp(i_hi, grid, vals) - np.interp(i_lo - 1, grid, vals)) / n_keep
    k = sxy / sxx
    intercept = ybar - k * xbar
    return k, jnp.exp(-intercept / k)


def _q99(a, idx1, amax, cum1, n: int, dtype):
    """⌈0.99N⌉-th smallest a by two-pass histogram refinement (bracket amax/(4096·16384))."""
    r = math.ceil(Q_LEVEL * n)
    d1 = amax / COARSE_BINS
    b = _rank_bin(cum1, r)
    below = jnp.where(b > 0, cum1[jnp.maximum(b - 1, 0)], 0)
    lo = b.astype(dtype) * d1
    d2 = d1 / FINE_BINS
    sub = jnp.clip(jnp.floor((a - lo) / d2), 0, FINE_BINS - 1).astype(jnp.int32)
    idx = jnp.where(idx1 == b, sub, FINE_BINS)
    cnt = jnp.bincount(idx, length=FINE_BINS + 1)[:FINE_BINS]
    cum = below + jnp.cumsum(cnt)
    s = _rank_bin(cum, r)
    prev = cum[s] - cnt[s]
    frac = ((r - prev).astype(dtype) - 0.5) / jnp.maximum(cnt[s], 1).astype(dtype)
    return lo + (s.astype(dtype) + frac) * d2


def _det3(c0, c1, c2):
    """Determinant of the 3×3 matrix with columns c0, c1, c2."""
    return (c0[0] * (c1[1] * c2[2] - c2[1] * c1[2]) - c1[0] * (c0[1] * c2[2] - c2[1] * c0[2])
            + c2[0] * (c0[1] * c1[2] - c1[1] * c0[2]))


def _third_coefficient(a, b):
    """x[2] of a x = b for a 3×3 system, by Cramer's rule (no LAPACK call: the element
    statistics then run in several threads at once without jaxlib's LAPACK custom calls,
    which deadlock when executed concurrently on CPU). The quadratic fit's normal matrix is
    well conditioned (κ ≈ 10 for a Gaussian core), so this matches an LU solve to float
    rounding (measured: 4e-7 relative in σ_fit in float32, identical digits in float64)."""
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

    Bin j receives Σ_i |[lo_i, hi_i] ∩ bin j| / (hi_i − lo_i): the expected histogram of the
    values dithered uniformly over their rounding cells (exact, no random numbers). A cell
    spans at most a few bins; the loop runs over the largest span present.
    """
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


def _one(w, trim, storage="float32"):
    """All element statistics of one flat sample ``w`` ``(N,)`` stored as ``storage``."""
    n = w.shape[0]
    dtype = w.dtype
    mean = jnp.sum(w) / n
    c = w - mean
    c2 = c * c
    m2 = jnp.sum(c2) / n
    m3 = jnp.sum(c2 * c) / n
    m4 = jnp.sum(c2 * c2) / n
    std = jnp.sqrt(m2)
    wmin = jnp.min(w)
    wmax = jnp.max(w)

    # entropy histogram on [min, max] (points) or on the union of the lattice cells
    be = entropy_bins(n)
    if is_lattice(storage):
        below, above = lattice_cells(w, storage)
        cell_lo, cell_hi = w - below, w + above
        hmin, hmax = jnp.min(cell_lo), jnp.max(cell_hi)
    else:
        hmin, hmax = wmin, wmax
    width = hmax - hmin
    wsafe = jnp.where(width > 0, width, 1.0)
    delta = wsafe / be
    if is_lattice(storage):
        cnt = _cell_histogram(cell_lo, cell_hi, hmin, delta, be, dtype)
    else:
        ie = jnp.clip(jnp.floor((w - hmin) / delta), 0, be - 1).astype(jnp.int32)
        cnt = jnp.bincount(ie, length=be).astype(dtype)
    p = cnt / n
    nonempty = cnt > 0
    if is_lattice(storage):  # Miller-Madow's m counts the bins that hold a stored value
        ip = jnp.clip(jnp.floor((w - hmin) / delta), 0, be - 1).astype(jnp.int32)
        m_bins = jnp.sum(jnp.bincount(ip, length=be) > 0)
    else:
        m_bins = jnp.sum(nonempty)
    mm = (m_bins - 1).astype(dtype) / (2 * n)
    plogp = jnp.where(nonempty, p * jnp.log(jnp.where(nonempty, p, 1.0)), 0.0)
    entropy = jnp.where(width > 0, -jnp.sum(plogp) + jnp.log(delta) + mm, -jnp.inf)
    delta_entropy = entropy - 0.5 * jnp.log(2 * math.pi * math.e * m2)

    edges = hmin + delta * jnp.arange(be + 1, dtype=dtype)
    lo, hi = edges[:-1], edges[1:]
    q = _gauss_mass(lo, hi, mean, std)
    z_mid = (0.5 * (lo + hi) - mean) / std
    logq_mid = jnp.log(delta / std) - 0.5 * math.log(2 * math.pi) - 0.5 * z_mid * z_mid
    logq = jnp.where(q > 0, jnp.log(jnp.where(q > 0, q, 1.0)), logq_mid)
    kl = jnp.sum(jnp.where(nonempty, plogp - p * logq, 0.0)) - mm

    # Gaussian core fit on the same histogram
    u = (0.5 * (lo + hi) - mean) / std
    use = nonempty & (jnp.abs(u) <= 2.0)
    wt = jnp.where(use, cnt, 0.0)
    lc = jnp.log(jnp.where(use, cnt, 1.0))
    basis = jnp.stack([jnp.ones_like(u), u, u * u], axis=-1)
    ata = (basis * wt[:, None]).T @ basis
    atb = (basis * wt[:, None]).T @ lc
    e = _third_coefficient(ata, atb)
    var_fit = m2 / (-2.0 * e) - delta * delta / 12.0
    enough = (jnp.sum(use) >= 3) & jnp.isfinite(e)
    ok = (e < 0) & (var_fit > 0)
    sigma_fit = jnp.where(ok, jnp.sqrt(jnp.where(ok, var_fit, 1.0)),
                          jnp.where(e >= 0, jnp.inf, 0.0))
    sigma_fit = jnp.where(enough, sigma_fit, jnp.nan)

    # |w|: coarse histogram shared by the Weibull fit and q99
    a = jnp.abs(w)
    amax = jnp.maximum(jnp.abs(wmin), jnp.abs(wmax))
    asafe = jnp.where(amax > 0, amax, 1.0)
    idx1 = jnp.clip(jnp.floor(a / (asafe / COARSE_BINS)), 0, COARSE_BINS - 1).astype(jnp.int32)
    cum1 = jnp.cumsum(jnp.bincount(idx1, length=COARSE_BINS))
    x = jnp.log(a)
    wk, wl = _weibull(a, x, idx1, asafe, cum1, n, trim, dtype)
    q99 = _q99(a, idx1, asafe, cum1, n, dtype)
    return {
        "mean": mean,
        "std": std,
        "skewness": m3 / (m2 * std),
        "excess_kurtosis": m4 / (m2 * m2) - 3.0,
        "entropy": entropy,
        "delta_entropy": delta_entropy,
        "kl_gaussian": kl,
        "sigma_fit": sigma_fit,
        "weibull_k": wk,
        "weibull_lambda": wl,
        "max_over_q99": amax / q99,
    }


def element_stats(w, *, trim=0.8, storage="float32") -> dict:
    """Element statistics of ``w`` ``(..., m, n)`` over its last two axes; keys :data:`ELEMENT_STATS`.

    Each statistic has shape ``w.shape[:-2]``, in the dtype of ``w`` (float inputs; integers
    are promoted to the default float). ``trim`` ∈ (0, 1] is the Weibull fit's kept central
    fraction (0.8 default, 0.9, 1.0 by option). ``storage``: how the values were stored
    (:data:`rmtbase.stats.precision.STORAGES`); for ``"float16"``/``"bfloat16"`` the
    histogram statistics use lattice cells (module docstring). Estimators: see the module
    docstring.
    """
    _trim_fraction(trim)
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
    return jax.lax.map(lambda v: _one(v, trim, storage), flat)
