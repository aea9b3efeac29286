"""WeightWatcher's heavy-tail spectral metrics of a whole weight matrix, defined as its 0.7.7 code.

ESD: λ = s²(W), the squared singular values of the stored (m, n) matrix in float64, all
M = min(m, n) of them, ascending; no 1/N factor (``analyze()``'s default ``normalize=False``:
the eigenvalues of WᵀW for m ≥ n). Q = max(m, n)/M.

Power law (``WW_powerlaw.WWFit``, the defaults ``fix_fingers=False``, ``xmax=None``, PL): the
x = λ > 10⁻⁵ (``EVALS_THRESH``), N of them, sorted; for each candidate xmin = x_i, i < N − 1, the
continuous MLE α_i = 1 + n / Σ_{j ≥ i} ln(x_j / x_i), n = N − i (Clauset, Shalizi & Newman 2009,
eq. 3.1, no n − 1 correction), and D_i = max_{j ≥ i} |1 − (x_j/x_i)^{1−α_i} − (j − i)/n| (D_i = 1
where α_i ≤ 1): the KS distance of the fitted CDF to the empirical one taken at its left limits.
xmin minimises D (the first minimum); σ_α = (α − 1)/√n; num_pl_spikes = #{λ ≥ xmin}. WW switches
to another objective below N = 20 (``SMALL_N_CUTOFF``); here that is NaN.

Norm metrics (``apply_norm_metrics``, over every λ): log_norm = log₁₀ Σλ (= log₁₀ ‖W‖_F²),
log_spectral_norm = log₁₀ λ_max, alpha_weighted = α log₁₀ λ_max, log_alpha_norm = log₁₀ Σ λ^α,
stable_rank = Σλ / λ_max. Martin & Mahoney (2021), JMLR 22(165); Martin, Peng & Mahoney (2021),
Nat. Commun. 12:4122. The MP fit (``mp_softrank``, ``num_spikes``) is in :mod:`.heavy_tail_mp`.

:data:`HEAVY_TAIL` are these as registry records (kind spectral, ``fn`` of λ): each joins a
head score only when named (``--stats spectral,ww_alpha``; :func:`.choice.optional`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .statistic import Statistic

#: WeightWatcher's threshold on the eigenvalues entering the power-law fit.
EVALS_THRESH = 1e-5
#: Below this many fitted eigenvalues WW uses a different xmin objective (NaN here).
SMALL_N = 20
#: Candidate xmin rows per block of the KS search (memory: block × M).
_BLOCK = 128

FIT_KEYS = ("alpha", "xmin", "ks_distance", "alpha_sigma", "num_pl_spikes")
NORM_KEYS = ("log_norm", "log_spectral_norm", "alpha_weighted", "log_alpha_norm",
             "stable_rank")


#: How :func:`esd` computes λ (part of the null tables' file names).
ESD_METHOD = "gram"


def _gram(w) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    wt = np.swapaxes(w, -1, -2)
    return w @ wt if w.shape[-2] <= w.shape[-1] else wt @ w


def esd(w) -> np.ndarray:
    """λ = s²(w) ascending, ``(..., m, n) -> (..., min(m, n))``, float64 numpy, as
    WeightWatcher's ``combined_eigenvalues`` for one matrix: the eigenvalues of the smaller
    Gram matrix (``w wᵀ`` or ``wᵀ w`` in float64, LAPACK's ``syevd``), a third of the SVD's
    time; clipped at 0. Their error is ``ε λ_max``, far below WeightWatcher's ``λ > 10⁻⁵``
    cut. ``w`` may be a list of matrices of one shape (each Gram made alone, no stacked copy)."""
    from .._blas import one_blas_thread

    with one_blas_thread():  # many small decompositions: threads only spin (rmtbase._blas)
        gram = np.stack([_gram(x) for x in w]) if isinstance(w, list | tuple) else _gram(w)
        return np.maximum(np.linalg.eigvalsh(gram), 0.0)


def _fit_one(lam):
    x = jnp.sort(lam)
    total = x.shape[-1]
    valid = x > EVALS_THRESH
    first = total - jnp.sum(valid)  # invalid eigenvalues are a sorted prefix
    logx = jnp.log(jnp.where(valid, x, 1.0))
    suffix = jnp.flip(jnp.cumsum(jnp.flip(logx)))  # Σ_{j ≥ i} ln x_j
    idx = jnp.arange(total)
    n = (total - idx).astype(x.dtype)
    alpha = 1.0 + n / (suffix - n * logx)
    pad = (-total) % _BLOCK
    rows = jnp.pad(idx, (0, pad), constant_values=total - 1).reshape(-1, _BLOCK)

    def block(ii):
        xi, ai, ni = x[ii][:, None], alpha[ii][:, None], n[ii][:, None]
        ratio = jnp.where(idx[None, :] >= ii[:, None], x[None, :] / xi, 1.0)
        emp = (idx[None, :] - ii[:, None]) / ni
        dev = jnp.abs(1.0 - ratio ** (1.0 - ai) - emp)
        return jnp.max(jnp.where(idx[None, :] >= ii[:, None], dev, 0.0), axis=-1)

    d = jax.lax.map(block, rows).reshape(-1)[:total]
    d = jnp.where(alpha > 1.0, d, 1.0)
    d = jnp.where((idx >= first) & (idx < total - 1), d, jnp.inf)
    best = jnp.argmin(d)
    xmin = x[best]
    ok = (total - first) >= SMALL_N
    nan = jnp.asarray(jnp.nan, x.dtype)
    out = {"alpha": alpha[best], "xmin": xmin, "ks_distance": d[best],
           "alpha_sigma": (alpha[best] - 1.0) / jnp.sqrt(n[best]),
           "num_pl_spikes": jnp.sum(lam >= xmin).astype(x.dtype)}
    return {k: jnp.where(ok, v, nan) for k, v in out.items()}


def powerlaw_fit(lam) -> dict:
    """WeightWatcher's power-law fit of each spectrum ``lam`` ``(..., M)`` (any order):
    ``{alpha, xmin, ks_distance, alpha_sigma, num_pl_spikes}``, each ``(...)``, in lam's dtype;
    NaN where fewer than :data:`SMALL_N` eigenvalues exceed :data:`EVALS_THRESH`."""
    lam = jnp.asarray(lam)
    got = _fit_flat(lam.reshape(-1, lam.shape[-1]))
    return {k: v.reshape(lam.shape[:-1]) for k, v in got.items()}


#: One compiled program per (count, M, dtype): traced inside another jit it is inlined.
_fit_flat = jax.jit(jax.vmap(_fit_one))


def norm_metrics(lam, alpha) -> dict:
    """The norm metrics of the module docstring from ``lam`` ``(..., M)`` and the fitted
    ``alpha`` ``(...)``: ``{log_norm, log_spectral_norm, alpha_weighted, log_alpha_norm,
    stable_rank}``."""
    lam = jnp.asarray(lam)
    total, top = jnp.sum(lam, axis=-1), jnp.max(lam, axis=-1)
    log_top = jnp.log10(top)
    # Σ λ^α in scaled form: λ_max^α Σ (λ/λ_max)^α (no overflow for large α)
    scaled = jnp.sum((lam / top[..., None]) ** jnp.asarray(alpha)[..., None], axis=-1)
    return {"log_norm": jnp.log10(total), "log_spectral_norm": log_top,
            "alpha_weighted": alpha * log_top,
            "log_alpha_norm": alpha * log_top + jnp.log10(scaled),
            "stable_rank": total / top}


def spectrum_metrics(lam) -> dict:
    """:func:`powerlaw_fit` and :func:`norm_metrics` of ``lam`` ``(..., M)``, one dict."""
    fit = powerlaw_fit(lam)
    return {**fit, **norm_metrics(lam, fit["alpha"])}


def matrix_spectrum(w) -> np.ndarray:
    """The float64 ESD (:func:`esd`) of one stored matrix or a stack ``(..., m, n)``, as numpy."""
    return esd(w)


def heavy_tail_metrics(w) -> dict:
    """Every metric of this module for the matrix ``w`` ``(m, n)`` (or a stack), numpy float64:
    ``{name: value}`` with :data:`FIT_KEYS` and :data:`NORM_KEYS`."""
    lam = matrix_spectrum(w)
    with jax.enable_x64(True):
        got = spectrum_metrics(jnp.asarray(lam))
        return {k: np.asarray(v, dtype=np.float64)[()] for k, v in got.items()}


def _record(name, long_name, units, definition, key, **kw):
    def fn(lam):
        return spectrum_metrics(lam)[key]

    fn.__name__ = f"_{name}"
    return Statistic(name, "spectral", long_name, units, definition, fn=fn, **kw)


#: The metrics as spectral registry records (joining a score when named; module docstring).
HEAVY_TAIL = (
    _record("ww_alpha", "WeightWatcher power-law exponent of the ESD tail", "1",
            "CSN MLE 1 + n / sum ln(x/xmin) over lambda >= xmin, xmin minimising the KS "
            "distance (WeightWatcher 0.7.7 WWFit)", "alpha", effect="shift",
            undefined_reason="fewer than 20 eigenvalues above 1e-5"),
    _record("ww_alpha_weighted", "alpha * log10 lambda_max", "1",
            "alpha log10 lambda_max, lambda = s^2(W)", "alpha_weighted", effect="shift",
            undefined_reason="fewer than 20 eigenvalues above 1e-5"),
    _record("ww_log_norm", "log10 of the squared Frobenius norm", "1",
            "log10 sum lambda", "log_norm", sigma_power=2 / np.log(10), scaling="log"),
    _record("ww_log_spectral_norm", "log10 of the largest eigenvalue", "1",
            "log10 lambda_max", "log_spectral_norm", sigma_power=2 / np.log(10),
            scaling="log"),
    _record("ww_log_alpha_norm", "log10 of the Schatten alpha-norm to the alpha", "1",
            "log10 sum lambda^alpha", "log_alpha_norm", effect="shift",
            undefined_reason="fewer than 20 eigenvalues above 1e-5"),
)

__all__ = ["ESD_METHOD", "EVALS_THRESH", "FIT_KEYS", "HEAVY_TAIL", "NORM_KEYS", "SMALL_N", "esd",
           "heavy_tail_metrics", "matrix_spectrum", "norm_metrics", "powerlaw_fit",
           "spectrum_metrics"]
