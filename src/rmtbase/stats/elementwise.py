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
  ranks give NaN (ln 0). Computed without a sort (see below). How this differs from
  npm-weibull-py (v0.4, the paper's library): that package does not fit ranks but a
  1024-bin histogram of log10 a on the fixed range [−12, 2] (bins of 0.0137 decades, 3.2 % in
  a; values below 10⁻¹³ clipped, above 100 dropped), with F at each bin's mid-count, the bin
  centre as x and a least squares weighted by the bin counts over the bins whose F lies in the
  trim. Its fit therefore sees the weights only through that fixed grid: it moves with the
  weights' overall scale (rescaling a Gaussian 1536×384 matrix by factors 1 to 1.032, one bin
  width, moves its k by 2.6·10⁻³) while this estimator is scale-invariant to float rounding
  (< 10⁻⁶ over the same sweep: k is a function of ln a up to a shift). Measured difference in
  k between the two, middle-80 % trim: |Δk| ≤ 1.6·10⁻³ on Gaussian matrices (384² to
  1024×4096, σ = 0.02 to 1) and on the 36 matrices of all-MiniLM-L6-v2; as npm's k swings by
  2.6·10⁻³ with the scale, other scales give differences of that size — below the Weibull
  paper's band width (1.8·10⁻²), but above the null standard deviation of k of a matrix of a
  few million entries. ``tests/test_stats_elementwise.py`` re-implements that protocol
  from its description and checks both statements.
- max_over_q99: max|w| / q99, q99 the ⌈0.99 N⌉-th smallest |w| (inverted-CDF order statistic),
  located in the |w| histogram below and interpolated by rank across its bin: within one bin
  (≤ 2⁻¹¹ of q99, 4.9·10⁻⁴ relative; measured 2·10⁻⁵ on 60,000 Student-t values and float32
  rounding for a few million), exact when the bin holds one entry, and exact for values stored
  on a float16/bfloat16 lattice (every entry of a bin then has the same value, its lower edge).

Sort-free Weibull fit and q99 (pass 2 of :mod:`rmtbase.stats.tiles`, which computes every
statistic here from sums and histograms, so that a matrix of any size can be run tile by tile
through the same estimator). One histogram of a = |w| in bins read from the bits of a
(:mod:`rmtbase.stats._magnitude`): 2¹¹ equal bins per octave over the 32 octaves below max a
(relative width 2⁻¹¹–2⁻¹², so Δx ≤ 4.9·10⁻⁴ in x = ln a), a bin for exact zeros and one for
what lies below; each bin accumulates its count and Σx. The bins are contiguous in rank, so
the kept ranks of every trim are located exactly and their Σy over a bin's ranks is exact (from
a table of the cumulative sums of y_i computed once per N in float64); the only approximation is
the pairing of x and y inside one bin: the bin mean of x stands for each element's x. Both
centred sums S_xy = Σ_b (x̄_b − x̄) Y_b and S_xx = Σ_b n_b (x̄_b − x̄)² then miss terms of
relative size O(Δx²/var x) ≲ 10⁻⁷ — float32 rounding. The test suite checks the fit against a
sorted reference implementation of the protocol (agreement to 10⁻⁶ relative), and q99 against
the order statistic.

History: the shipped null tables were made by the earlier form of this estimator (three
passes: a 4096-bin histogram of a on [0, max a] to find the kept bracket, then 16384 ln-bins
across it, and q99 refined to max a/(4096·16384)). Their first 20–40 draws, recomputed now with
the same keys (384×32 to 4096×128, float32 and bfloat16): max_over_q99 moves by ≤ 3.3·10⁻³ of
its null standard deviation, Weibull k and λ by ≤ 1.0·10⁻³, the other statistics by float32
rounding of sums taken in other tiles (≤ 1.8·10⁻² sd; qk delta_entropy 5.8·10⁻² sd, which is
one float32 ulp of the entropy at 4096×128), all with mean shift ≤ 6·10⁻⁴ sd: the tables
stand for this estimator to well below their Monte Carlo error.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from .._matmul import mm_tn
from ..errors import InputError
from ._binning import (  # noqa: F401 - re-exported: the binning constants and helpers
    Q_LEVEL,
    _cell_histogram,
    _trim_fraction,
    entropy_bins,
    trim_ranks,
)
from .precision import check_storage
from .statistic import element_names
from .tiles import one_tile

#: The element statistics of a head's matrices, in registry order: the records of
#: :data:`rmtbase.stats.statistic.STATISTICS` of kind "element" that a head's tables hold.
ELEMENT_STATS = element_names()


def _one(w, trim, storage="float32", side=None):
    """All element statistics of one flat sample ``w`` ``(N,)`` stored as ``storage``
    (:func:`rmtbase.stats.tiles.one_tile` with one trim); with ``side`` (see ``one_tile``)
    returns (statistics, side counts)."""
    st = one_tile(w, (trim,), storage, side)
    out = _named(st)
    return out if side is None else (out, st["side"])


def _named(st: dict) -> dict:
    """:data:`ELEMENT_STATS` from one trim's statistics of :mod:`.tiles` (its ``"weibull"``
    pair named ``weibull_k``, ``weibull_lambda``)."""
    k, lam = st.pop("weibull")[0]
    st["weibull_k"], st["weibull_lambda"] = k, lam
    return {s: st[s] for s in ELEMENT_STATS}


def _qk_one(q, k, trim, side=None):
    """:func:`_one` of the flat W_QK = qᵀ k (q, k: (d_h, d); the product in float32 at full
    precision, :func:`rmtbase._matmul.mm`): the one definition of W_QK's element statistics,
    used by the null (``stats.head_stats``) and the permutation null; scoring takes the same
    product, tile passes and finish in two programs (``scoring.qk_histogram``:
    ``passes_and_histogram``, ``finish``), so a head and its null go through the same
    computation."""
    return _one(mm_tn(q, k).reshape(-1), trim, side=side)


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
