"""The body of :mod:`rmtbase.stats`, loaded (with JAX) on first use of a name; exports listed in
the package's ``__all__`` (``name as name`` imports here are those re-exports)."""


from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import jax
import jax.numpy as jnp

from ..errors import InputError
from .elementwise import ELEMENT_STATS as ELEMENT_STATS
from .elementwise import _element_stats_flat, qk_element_stats, trim_fraction
from .elementwise import element_stats as element_stats
from .precision import check_storage
from .spectral import SPECTRAL_STATS as SPECTRAL_STATS
from .spectral import eigvals_from_factors
from .spectral import spectral_stats as spectral_stats
from .statistic import STATISTICS as STATISTICS
from .statistic import StatInfo
from .statistic import Statistic as Statistic
from .statistic import statistic as statistic

#: ``{name: {long_name, units, definition, sigma_power, scaling}}``, derived from the records
#: of :mod:`.statistic` (the one definition of each statistic).
STAT_INFO: Mapping[str, dict] = StatInfo()

_MATRICES = ("q", "k", "qk")
#: Prefix of a whole weight matrix's statistics in scoring (``w.weibull_k``; rms: its own).
WHOLE_MATRIX = "w"


def table_name(name: str) -> str:
    """Table variable name of a ``head_stats`` key: ``"qk.npr" -> "npr"``, ``"q.std" -> "q_std"``.
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

    out = jax.lax.map(lambda pair: qk_element_stats(*pair, trim), (fq, fk))
    return {s: v.reshape(batch) for s, v in out.items()}


def head_stats(wq, wk, *, which=("q", "k", "qk"), spectral=True, elementwise=True,
               trim=0.8, storage="float32", statistics=None) -> dict:
    """All statistics of one head (or a batch of heads) from its factors.

    wq, wk: ``(..., d_h, d)`` raw weights, any float dtype, leading axes batch axes. which:
    subset of ``("q", "k", "qk")`` for element statistics; spectral: add
    ``qk.<SPECTRAL_STATS>`` (needs ``"qk"``); elementwise: add element statistics; trim: Weibull
    trim; storage: how W_Q, W_K were stored; statistics: the spectral records (None: shipped). Returns
    ``{"<matrix>.<stat>": array of shape wq.shape[:-2]}``, always with ``q.rms`` and ``k.rms``."""
    wq = jnp.asarray(wq)
    wk = jnp.asarray(wk)
    if wq.ndim < 2 or wq.shape != wk.shape:
        raise InputError(f"wq and wk must have the same shape (..., d_h, d); got {wq.shape}, {wk.shape}")
    bad = [m for m in which if m not in _MATRICES]
    if bad:
        raise InputError(f"which must be a subset of {_MATRICES}, got {tuple(which)!r}")
    trim_fraction(trim)
    # None: the shipped statistics, whatever plugins are registered (a program per set)
    stats = None if statistics is None else tuple(statistics)
    return _head_stats(wq, wk, tuple(which), bool(spectral), bool(elementwise), float(trim),
                       check_storage(storage), stats)


@partial(jax.jit, static_argnums=(2, 3, 4, 5, 6, 7))
def _head_stats(wq, wk, which, spectral, elementwise, trim, storage="float32", statistics=None):
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
        out.update({f"qk.{s}": v for s, v in spectral_stats(lam, statistics).items()})
    return out
