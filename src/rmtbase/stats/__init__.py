"""The one statistics implementation, shared by the null and by model scoring.

:func:`head_stats` takes a head's factors W_Q, W_K ``(..., d_h, d)`` (raw weights or a null
draw: the same code either way) and returns ``{"<matrix>.<stat>": array}``:

- ``q.<stat>``, ``k.<stat>``: element statistics of W_Q, W_K (:mod:`.elementwise`);
- ``qk.<stat>``: element statistics of W_QK = W_Qᵀ W_K ``(d, d)`` (formed one head at a time);
- ``qk.<spectral>``: spectral statistics of W_QK from d_h×d_h cores (:mod:`.spectral`);
- ``q.rms``, ``k.rms`` always: √(tr G / (d_h d)) = ‖W‖_F/√(d_h d), for exact σ-normalisation.

:data:`STAT_INFO` documents every statistic (``long_name``, ``units``, ``definition``,
``sigma_power``, ``scaling``): value(σ) = σ^p value(1) for ``scaling="power"`` and
value(σ) = value(1) + p ln σ for ``scaling="log"``, where σ is σ_Q (q.*), σ_K (k.*) or σ_Q σ_K
(qk.*), so a σ = 1 table serves any σ exactly. Conventions: ``docs/conventions.md``.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from ..errors import InputError
from .elementwise import (
    ELEMENT_STATS,
    _element_stats_flat,
    _qk_one,
    _trim_fraction,
    element_stats,
)
from .precision import check_storage
from .spectral import SPECTRAL_STATS, eigvals_from_factors, spectral_stats

__all__ = [
    "ELEMENT_STATS",
    "SPECTRAL_STATS",
    "STAT_INFO",
    "element_stats",
    "head_stats",
    "spectral_stats",
    "table_name",
]


def _info(long_name, units, definition, sigma_power, scaling="power"):
    return {"long_name": long_name, "units": units, "definition": definition,
            "sigma_power": sigma_power, "scaling": scaling}


STAT_INFO: dict[str, dict] = {
    # spectral statistics of W_QK (lambda = squared singular values; sigma = sigma_Q sigma_K)
    "lambda_max": _info("largest eigenvalue of W_QK W_QK^T", "sigma^2",
                        "max_k lambda_k, lambda_k = s_k(W_QK)^2", 2),
    "lambda_min": _info("smallest nonzero eigenvalue of W_QK W_QK^T", "sigma^2",
                        "min over the d_h nonzero lambda_k", 2),
    "sum_lambda": _info("sum of eigenvalues", "sigma^2",
                        "sum_k lambda_k = ||W_QK||_F^2", 2),
    "sum_lambda2": _info("sum of squared eigenvalues", "sigma^4",
                         "sum_k lambda_k^2 = ||W_QK W_QK^T||_F^2", 4),
    "pr": _info("participation ratio", "1", "(sum lambda)^2 / sum lambda^2", 0),
    "npr": _info("normalised participation ratio", "1", "(sum lambda)^2 / sum lambda^2 / d_h", 0),
    "spectral_entropy": _info("spectral entropy", "nat",
                              "-sum_k p_k ln p_k, p_k = lambda_k / sum lambda", 0),
    "condition_number": _info("condition number", "1", "lambda_max / lambda_min (of lambda = s^2)", 0),
    "stable_rank": _info("stable rank", "1", "sum lambda / lambda_max", 0),
    # element statistics (of W_Q, W_K or W_QK)
    "mean": _info("mean of the entries", "sigma", "sum w / N over all N entries", 1),
    "std": _info("standard deviation of the entries", "sigma",
                 "sqrt(mean((w - mean)^2)), ddof 0", 1),
    "skewness": _info("skewness of the entries", "1", "m3 / m2^(3/2), central moments, ddof 0", 0),
    "excess_kurtosis": _info("excess kurtosis of the entries", "1",
                             "m4 / m2^2 - 3, central moments, ddof 0", 0),
    "entropy": _info(
        "differential entropy of the entries", "nat",
        "histogram plug-in with Miller-Madow correction: -sum_j p_j ln(p_j/D) + (m-1)/(2N) on "
        "B = ceil(2 N^(1/3)) equal bins spanning [min w, max w] (Rice rule; every entry counted), "
        "D = (max-min)/B, p_j = n_j/N, m = number of non-empty bins; for float16/bfloat16 "
        "storage each value spreads its unit mass uniformly over its rounding cell "
        "(lattice-robust, see rmtbase.stats.elementwise)", 1, "log"),
    "delta_entropy": _info("entropy residual against the Gaussian of equal variance", "nat",
                           "S - 0.5 ln(2 pi e s^2), S the entropy estimator, s the ddof-0 std", 0),
    "kl_gaussian": _info(
        "KL divergence to the moment-matched Gaussian", "nat",
        "binned plug-in sum_j p_j ln(p_j/q_j) - (m-1)/(2N) on the entropy histogram's bins, q_j the "
        "N(mean, std^2) mass of bin j, Miller-Madow corrected (may be slightly negative; not clipped)",
        0),
    "sigma_fit": _info(
        "Gaussian core width", "sigma",
        "weighted LS (weights n_j) of ln n_j = a + b u + e u^2 over non-empty entropy-histogram bins "
        "with |c_j - mean| <= 2 std, u = (c - mean)/std; sigma_fit^2 = std^2/(-2e) - D^2/12 "
        "(Sheppard); +inf if e >= 0 (no Gaussian core: flat-topped), 0 if the core is narrower "
        "than the bins, NaN if fewer than 3 bins qualify", 1),
    "weibull_k": _info(
        "Weibull shape of |w|", "1",
        "Weibull paper protocol (arXiv:2605.18898 App. A): Hazen plotting position F_i = (i-0.5)/N of "
        "the i-th smallest |w|; keep (1-trim)/2 <= F <= (1+trim)/2 (default trim 0.8); LS of "
        "ln(-ln(1-F)) on ln|w|; k = slope (sort-free binned sums, relative error < 1e-6)", 0),
    "weibull_lambda": _info("Weibull scale of |w|", "sigma",
                            "exp(-intercept/k) of the same fit as weibull_k", 1),
    # whole matrices (rmtbase.stats.matrix): the same fit at the paper's other trims
    "weibull_k_trim90": _info("Weibull shape of |w|, middle 90 %", "1",
                              "as weibull_k with trim 0.9: 0.05 <= F <= 0.95", 0),
    "weibull_lambda_trim90": _info("Weibull scale of |w|, middle 90 %", "sigma",
                                   "exp(-intercept/k) of the weibull_k_trim90 fit", 1),
    "weibull_k_trim100": _info("Weibull shape of |w|, all ranks", "1",
                               "as weibull_k with trim 1: every rank (Hazen F never 0 or 1)", 0),
    "weibull_lambda_trim100": _info("Weibull scale of |w|, all ranks", "sigma",
                                    "exp(-intercept/k) of the weibull_k_trim100 fit", 1),
    "max_over_q99": _info(
        "max |w| over the 99th percentile of |w|", "1",
        "max|w| / |w|_(ceil(0.99 N)) (inverted-CDF order statistic, located in the |w| "
        "histogram of 2^11 bins per octave and interpolated across its bin)", 0),
    "rms": _info("root mean square of the entries", "sigma",
                 "sqrt(tr(W W^T) / (d_h d)) = ||W||_F / sqrt(d_h d)", 1),
}

_MATRICES = ("q", "k", "qk")
#: Prefix of a whole weight matrix's statistics in scoring (``w.weibull_k``; rms: its own).
WHOLE_MATRIX = "w"


def table_name(name: str) -> str:
    """Table variable name of a ``head_stats`` key: ``"qk.npr" -> "npr"``, ``"q.std" -> "q_std"``.

    Spectral statistics of W_QK keep their bare names; element statistics (and rms) become
    ``<matrix>_<stat>``.
    """
    if not isinstance(name, str) or "." not in name:
        raise InputError(f"statistic name must look like '<matrix>.<stat>', got {name!r}")
    matrix, stat = name.split(".", 1)
    if matrix not in _MATRICES or stat not in STAT_INFO:
        raise InputError(f"unknown statistic {name!r}")
    if matrix == "qk" and stat in SPECTRAL_STATS:
        return stat
    return f"{matrix}_{stat}"


def _rms(w):
    return jnp.sqrt(jnp.mean(w * w, axis=(-2, -1)))


def _qk_element_stats(wq, wk, trim):
    """Element statistics of W_QK = wqᵀ wk, one head at a time (bounded memory)."""
    batch = wq.shape[:-2]
    fq = wq.reshape((-1, *wq.shape[-2:]))
    fk = wk.reshape((-1, *wk.shape[-2:]))

    out = jax.lax.map(lambda pair: _qk_one(*pair, trim), (fq, fk))
    return {s: v.reshape(batch) for s, v in out.items()}


def head_stats(wq, wk, *, which=("q", "k", "qk"), spectral=True, elementwise=True,
               trim=0.8, storage="float32") -> dict:
    """All statistics of one head (or a batch of heads) from its factors.

    wq, wk: ``(..., d_h, d)`` raw weights (no 1/√d scaling applied), any float dtype; leading
    axes are batch axes (heads, draws). which: matrices whose element statistics to compute
    (subset of ``("q", "k", "qk")``); spectral: add ``qk.<SPECTRAL_STATS>`` (needs ``"qk"`` in
    which); elementwise: add the element statistics; trim: Weibull trim (0.8, 0.9 or 1.0);
    storage: how W_Q and W_K were stored (:data:`rmtbase.stats.precision.STORAGES`; their
    element histograms use lattice cells for float16/bfloat16; W_QK is computed in the input
    dtype and counted as points). Always returns ``q.rms`` and ``k.rms``. Returns
    ``{"<matrix>.<stat>": array of shape wq.shape[:-2]}``.
    """
    wq = jnp.asarray(wq)
    wk = jnp.asarray(wk)
    if wq.ndim < 2 or wq.shape != wk.shape:
        raise InputError(f"wq and wk must have the same shape (..., d_h, d); got {wq.shape}, {wk.shape}")
    bad = [m for m in which if m not in _MATRICES]
    if bad:
        raise InputError(f"which must be a subset of {_MATRICES}, got {tuple(which)!r}")
    _trim_fraction(trim)
    return _head_stats(wq, wk, tuple(which), bool(spectral), bool(elementwise), float(trim),
                       check_storage(storage))


@partial(jax.jit, static_argnums=(2, 3, 4, 5, 6))
def _head_stats(wq, wk, which, spectral, elementwise, trim, storage="float32"):
    out = {"q.rms": _rms(wq), "k.rms": _rms(wk)}
    if elementwise:
        for m, w in (("q", wq), ("k", wk)):
            if m in which:
                flat = w.reshape((-1, w.shape[-2] * w.shape[-1]))
                st = _element_stats_flat(flat, trim, storage)
                out.update({f"{m}.{s}": v.reshape(w.shape[:-2]) for s, v in st.items()})
        if "qk" in which:
            out.update({f"qk.{s}": v for s, v in _qk_element_stats(wq, wk, trim).items()})
    if spectral and "qk" in which:
        lam = eigvals_from_factors(wq, wk)
        out.update({f"qk.{s}": v for s, v in spectral_stats(lam).items()})
    return out
