"""One layer's head statistics in one compiled program (:func:`rmtbase.stats.head_stats`, the
null's implementation); W_QK element statistics head by head on threads.

In float32 Σλ² ∝ (σ_Q σ_K)⁴ leaves the range for entries outside ≈ [10⁻⁶, 10³], so a head whose
largest |entry| is outside :data:`SAFE_MAX` is divided by a power of two (:func:`safe_factors`,
exact) and restored in float64 by ``sigma_power`` (:func:`restore_scale`); overflow is refused."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

#: [lo, hi): largest |entry| of a head's W_Q or W_K at which its float32 statistics are
#: computed on the raw weights (module docstring).
SAFE_MAX = (2.0**-10, 2.0**6)


def _exponents(w) -> np.ndarray:
    """Per head (leading axes) the power-of-two exponent e to divide by (0 inside SAFE_MAX)."""
    m = np.max(np.abs(np.asarray(w)), axis=(-2, -1)).astype(np.float64)
    inside = (m >= SAFE_MAX[0]) & (m < SAFE_MAX[1])
    ok = np.isfinite(m) & (m > 0)
    e = np.floor(np.log2(np.where(ok, m, 1.0)))
    return np.where(inside | ~ok, 0, e).astype(np.int64)


class SafeFactors(NamedTuple):
    """Heads' factors divided by powers of two and the divisors (:func:`safe_factors`)."""

    wq: np.ndarray
    wk: np.ndarray
    cq: np.ndarray
    ck: np.ndarray


def safe_factors(wq, wk) -> SafeFactors:
    """(wq', wk', c_q, c_k): the heads' factors divided by powers of two ``c`` (per head,
    float64, 1 inside :data:`SAFE_MAX`) so that their largest |entry| is in [1, 2) when it
    was outside; ``ldexp`` makes the division exact (module docstring)."""
    wq, wk = np.asarray(wq), np.asarray(wk)
    eq, ek = _exponents(wq), _exponents(wk)
    cq, ck = np.exp2(eq.astype(np.float64)), np.exp2(ek.astype(np.float64))
    if eq.any():
        wq = np.ldexp(wq, -eq[..., None, None]).astype(wq.dtype, copy=False)
    if ek.any():
        wk = np.ldexp(wk, -ek[..., None, None]).astype(wk.dtype, copy=False)
    return SafeFactors(wq, wk, cq, ck)


class RawUnits(NamedTuple):
    """How :func:`layer_stats` moves its statistics back to raw units (:func:`restore_scale`'s
    arguments): the per-head divisors ``cq``, ``ck`` of :func:`safe_factors` and ``where``,
    the prefix of a refusal (e.g. ``"layer 3 of gpt2, "``)."""

    cq: np.ndarray
    ck: np.ndarray
    where: str = ""


def restore_scale(st: dict, cq, ck, where: str = "") -> dict:
    """Statistics ``st`` of factors divided by ``cq``, ``ck`` back in raw units (``x·c^p`` or
    ``x + p ln c``, float64); a value outside float64 is a one-line ModelError."""
    from ...decision.scale import scaling
    from ...errors import ModelError

    cq, ck = np.asarray(cq, np.float64), np.asarray(ck, np.float64)
    if not (np.any(cq != 1) or np.any(ck != 1)):
        return st
    rq, rk = st["q.rms"] * cq, st["k.rms"] * ck
    out = {}
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        for k, v in st.items():
            p, how = scaling(k)
            v = np.asarray(v, dtype=np.float64)
            if p == 0:
                out[k] = v
                continue
            matrix = k.split(".", 1)[0]
            c = {"q": cq, "k": ck}.get(matrix, cq * ck)
            raw_scale = {"q": rq, "k": rk}.get(matrix, rq * rk)
            new = v + p * np.log(c) if how == "log" else v * c**p
            lost = ~np.isfinite(new) | ((new == 0) & (v != 0)) | \
                ~np.isfinite(raw_scale**p) | (raw_scale**p < np.finfo(np.float64).tiny)
            if np.any(lost & np.isfinite(v)):
                i = int(np.argmax(lost & np.isfinite(v)))
                raise ModelError(
                    f"{where}head {i}: entry scale sigma_q={float(rq.flat[i]):.3g}, "
                    f"sigma_k={float(rk.flat[i]):.3g} puts {k} (proportional to scale^{p:g}) "
                    "outside the float64 range; cannot score weights this extreme")
            out[k] = new
    return out


@functools.cache
def _compiled():
    """jax.jit of (head_stats without element statistics, eigvals_from_factors) over one layer's
    heads, compiled once per (shape, dtype, options)."""
    import jax

    from ...stats import head_stats
    from ...stats.spectral import eigvals_from_factors

    def layer_stats(wq, wk, spectral):
        st = head_stats(wq, wk, spectral=spectral, elementwise=False)
        return st, eigvals_from_factors(wq, wk)

    from ..._compiled import few_calls

    return jax.jit(layer_stats, static_argnames=("spectral",), compiler_options=few_calls())


@functools.cache
def _compiled_factor_elements(storage: str):
    """jax.jit of ``element_stats(w, storage=storage)`` over a stack of factors, compiled with
    ``FEW_CALLS`` (same bytes, tests/test_compiler_options.py)."""
    import jax

    from ..._compiled import few_calls
    from ...stats import element_stats

    return jax.jit(lambda w: element_stats(w, storage=storage), compiler_options=few_calls())


def _factor_elements(wq, wk, group: int, storage: str) -> tuple[dict, dict]:
    """(``q.<stat>``, ``k.<stat>``) float64 per query head, in calls of n_kv = n / ``group`` factors
    (W_Q in ``group`` calls, the distinct ``wk[::group]`` in one) of one program."""
    n_kv = wk.shape[0] // group
    fn = _compiled_factor_elements(storage)
    parts = [fn(wq[i:i + n_kv]) for i in range(0, wq.shape[0], n_kv)]
    kst = fn(wk[::group])
    q = {f"q.{s}": np.concatenate([np.asarray(p[s], np.float64) for p in parts]) for s in kst}
    k = {f"k.{s}": np.repeat(np.asarray(v, dtype=np.float64), group) for s, v in kst.items()}
    return q, k


def layer_stats(wq, wk, kind: str, storage: str = "float32", group: int = 1,
                 entry_law: bool = True, raw: RawUnits | None = None, statistics=()):
    """``(st, x, hist)``: head_stats batched over one layer's heads, x = λ / (rms_Q² rms_K² d²)
    (descending) and the W_QK histograms (:mod:`.qk_histogram`; None unless elementwise).
    Under GQA (``group`` > 1, ``wk`` expanded) W_K's element statistics are computed once per key
    head. ``raw``:
    :class:`RawUnits` when ``wq``, ``wk`` come from :func:`safe_factors`; None: made safe here.
    ``statistics``: the plugins' spectral records named, beside the shipped ones."""
    if raw is None:
        wq, wk, cq, ck = safe_factors(wq, wk)
        raw = RawUnits(cq, ck)
    spectral, elementwise = kind in ("all", "spectral"), kind in ("all", "elementwise")
    # the layer's rms and spectra here; W_QK's element statistics head by head on the worker
    # threads, W_Q's and W_K's by a program of their own (the same estimator,
    # flat_element_stats, as the null's head_stats)
    st, lam = _compiled()(wq, wk, spectral=spectral)
    if spectral and statistics:
        from ...stats.spectral import spectral_stats

        st.update({f"qk.{k}": v for k, v in spectral_stats(lam, statistics).items()})
    st = {k: np.asarray(v, dtype=np.float64) for k, v in st.items() if np.ndim(v) == 1}
    qk_hist = None
    if elementwise:
        from .qk_elements import hist_scale, qk_elements

        scale = hist_scale(st["q.rms"], st["k.rms"], wq.shape[-2])
        qk_st, qk_hist = qk_elements(wq, wk, scale)
        el = {k: np.asarray(v, dtype=np.float64) for k, v in qk_st.items()}
        if entry_law:  # the keys in their former order: a jit's sorted dict, GQA's W_K after
            q, k = _factor_elements(wq, wk, group, storage)
            el = dict(sorted({**q, **el, **({} if group > 1 else k)}.items()))
            el.update(k if group > 1 else {})
        st.update(el)
    lam = np.asarray(lam, dtype=np.float64)
    d = wq.shape[-1]
    x = lam / (st["q.rms"][:, None] ** 2 * st["k.rms"][:, None] ** 2 * d**2)
    st = restore_scale(st, raw.cq, raw.ck, where=raw.where)
    return st, x, qk_hist


__all__ = ["SAFE_MAX", "RawUnits", "layer_stats", "restore_scale", "safe_factors"]
