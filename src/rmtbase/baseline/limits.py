"""Limits checked before any Monte Carlo: memory per draw, array size, and float range at σ.

- :func:`check_draw_memory`: one draw's working memory (an estimate calibrated with XLA's own
  ``memory_analysis`` of the compiled draw, float32 on CPU: element statistics of W_QK take
  6.5–9 d² floats per draw for d ≥ 512, a Ginibre d×d SVD adds about 6 d²) against the memory
  available (``$RMTBASE_MEMORY_LIMIT`` if set, e.g. ``8G``; else an accelerator's memory limit,
  else ``MemAvailable`` of ``/proc/meminfo``, else ``os.sysconf``). Too much: one-line
  :class:`~rmtbase.errors.InputError` naming the need and the limit, before any work.
- :func:`check_dense`: statistics that form the d×d W_QK need d² < 2³¹ entries.
- :func:`check_sigma_range` and :func:`scale_draws`: tables are sampled at σ = 1 and moved to
  (σ_Q, σ_K) by the exact rule of each statistic (``sigma_power``/``scaling`` of
  :data:`rmtbase.stats.STAT_INFO`) in float64, then stored in the table's dtype. A σ at which a
  statistic leaves that dtype's normal range (λ ∝ (σ_Qσ_K)², Σλ² ∝ (σ_Qσ_K)⁴) is refused with one
  line naming the range — up front from the analytic magnitudes, and again on the draws
  themselves — rather than written as zeros, subnormals or infinities. We refuse rather than
  silently store float64: a table's dtype is one of its keys, and a σ = 1 table rescales exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..analytic._network_kind import ginibre_alias
from ..errors import InputError
from ..files.memory import available_memory, parse_bytes  # noqa: F401 - re-exported
from ..files.memory import fmt_bytes as _fmt

#: The statistic sets a table can hold (``stats=``).
STAT_SETS = ("all", "spectral", "elementwise")
#: The null ensembles a table is drawn from (:mod:`rmtbase.baseline.null`): the one
#: definition, read by the tables, the draws and the command line. "ginibre" was "gaussian"
#: before issue 50 step 1; that spelling is still accepted (:func:`check_ensemble`).
ENSEMBLES = ("lowrank", "ginibre", "residual")

#: Largest d with d² < 2³¹ (XLA/JAX index and shape arithmetic of the element statistics).
MAX_DENSE_D = 46340
#: Margin kept from the ends of the float range by the up-front σ check (the draws spread
#: around the analytic magnitudes used there).
RANGE_MARGIN = 1e3


def check_ensemble(ensemble) -> str:
    """The null ensemble, one of :data:`ENSEMBLES`; the deprecated "gaussian" becomes "ginibre"
    with a DeprecationWarning (:func:`~rmtbase.analytic._network_kind.ginibre_alias`), anything
    else is a one-line InputError. Every entry point that takes an ensemble calls this."""
    ensemble = ginibre_alias(ensemble, "ensemble")
    if ensemble not in ENSEMBLES:
        raise InputError(f"ensemble must be one of {', '.join(ENSEMBLES)}, got {ensemble!r}")
    return ensemble


def dense(stats: str, ensemble: str, fast: bool) -> bool:
    """Whether a draw forms d×d arrays (W_QK element statistics, a Ginibre d×d matrix or the
    residual product), i.e. everything but the factor-only spectral paths."""
    return not fast and (stats != "spectral" or ensemble != "lowrank")


def draw_memory(d: int, d_h: int, stats: str, ensemble: str, itemsize: int, fast: bool) -> int:
    """Estimated working memory of one draw in bytes (module docstring; conservative)."""
    if fast:
        return 16 * d_h * d_h * itemsize + 4096
    dd = 8 if stats != "spectral" else 0
    if ensemble == "ginibre" and stats != "elementwise":
        dd += 8
    if ensemble == "residual":
        dd += 4
    return itemsize * (dd * d * d + 16 * d * d_h) + 2**20


def check_dense(d: int, stats: str, ensemble: str, fast: bool) -> None:
    """InputError unless d² < 2³¹ where a draw forms d×d arrays."""
    if dense(stats, ensemble, fast) and d > MAX_DENSE_D:
        what = "element statistics" if stats != "spectral" else f"the {ensemble} ensemble"
        raise InputError(f"{what} form d x d matrices, which need d <= {MAX_DENSE_D} "
                         f"(d^2 < 2^31 entries); got d={d} (--stats spectral of the lowrank "
                         "ensemble has no such limit)")


def check_draw_memory(d: int, d_h: int, stats: str, ensemble: str, itemsize: int, fast: bool,
                      n_parallel: int = 1) -> int:
    """InputError if ``n_parallel`` draws at once (a batch) need more memory than is
    available; returns the estimate in bytes."""
    check_dense(d, stats, ensemble, fast)
    need = draw_memory(d, d_h, stats, ensemble, itemsize, fast) * max(1, int(n_parallel))
    avail, source = available_memory()
    if avail is not None and need > avail:
        what = f"{stats} statistics, {ensemble} ensemble"
        raise InputError(f"one draw at d={d}, d_h={d_h} ({what}) needs about {_fmt(need)} of "
                         f"working memory, more than the {_fmt(avail)} available ({source}"
                         + ("" if source == "RMTBASE_MEMORY_LIMIT" else
                            "; set RMTBASE_MEMORY_LIMIT to change the limit") + ")")
    return need


def _ratio(matrix: str, sigma_q: float, sigma_k: float) -> float:
    return {"qk": sigma_q * sigma_k, "q": sigma_q, "k": sigma_k}[matrix]


def _log10(x: float) -> float:
    return math.log10(x) if 0 < x < math.inf else (-math.inf if x <= 0 else math.inf)


def _limits(dtype) -> tuple[float, float]:
    info = np.finfo(np.dtype(dtype))
    return float(info.tiny), float(info.max)


def check_sigma_range(cells, names, sigma_q: float, sigma_k: float, dtype: str) -> None:
    """Up-front check that statistics ``names`` (``"qk.npr"``, …) of every cell stay inside
    ``dtype``'s normal range at (σ_Q, σ_K), within :data:`RANGE_MARGIN`; the σ = 1
    magnitudes are the analytic references where one exists, else 1."""
    from ..stats import STAT_INFO, table_name
    from .references import reference_values

    if sigma_q == 1.0 and sigma_k == 1.0:
        return
    tiny, big = _limits(dtype)
    for d, d_h in cells:
        refs = reference_values(d, d_h)
        for name in names:
            matrix, stat = name.split(".", 1)
            info = STAT_INFO[stat]
            if info["scaling"] != "power" or not info["sigma_power"]:
                continue
            base = abs(refs.get(table_name(name), 1.0)) or 1.0
            p = int(info["sigma_power"])
            log_m = math.log10(base) + p * _log10(_ratio(matrix, sigma_q, sigma_k))
            lo, hi = math.log10(tiny * RANGE_MARGIN), math.log10(big / RANGE_MARGIN)
            if not lo <= log_m <= hi:
                _refuse(table_name(name), _OF[matrix], p, f"about 1e{log_m:.0f}", sigma_q,
                        sigma_k, dtype)


_OF = {"qk": "(sigma_q*sigma_k)", "q": "sigma_q", "k": "sigma_k"}


def _refuse(var, of, p, value, sigma_q, sigma_k, dtype):
    tiny, big = _limits(dtype)
    alt = "dtype float64 (--dtype float64), or " if np.dtype(dtype) == np.float32 else ""
    raise InputError(f"at sigma_q={sigma_q:g}, sigma_k={sigma_k:g} the statistic {var} "
                     f"(proportional to {of}^{p}) is {value}, outside the {np.dtype(dtype).name} "
                     f"range [{tiny:.3g}, {big:.3g}]; use {alt}a sigma = 1 table and "
                     "rmtbase.baseline.rescale")


@dataclass(frozen=True)
class Rule:
    """How one statistic moves with σ (``sigma_power`` ``p`` and ``scaling``, "power" or "log",
    of :data:`rmtbase.stats.STAT_INFO`) and how a refusal names it: the variable ``label`` and
    what it is proportional to, ``of`` (e.g. ``"(sigma_q*sigma_k)"``)."""

    p: int
    scaling: str
    label: str
    of: str


def scale_values(x, rule: Rule, r: float, dtype, sigma_q: float, sigma_k: float) -> np.ndarray:
    """Values ``x`` of a statistic at σ-ratio ``r``: ``x·r^p`` (``rule.scaling="power"``) or
    ``x + p ln r`` (``"log"``), computed in float64 and returned as ``dtype``; InputError naming
    ``rule.label`` if a finite nonzero value would become infinite, zero or subnormal."""
    p, scaling = rule.p, rule.scaling
    x = np.asarray(x)
    if p == 0:  # shape statistics do not move with σ
        return x.astype(np.dtype(dtype), copy=False)
    tiny, big = _limits(dtype)
    x = x.astype(np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if scaling == "log":
            new = x + p * np.log(np.float64(r))
        else:
            new = x * (np.float64(r) ** p)
        a = np.abs(new[np.isfinite(x) & (x != 0)])
    if scaling == "log":  # an additive shift can only overflow
        a = a[a >= tiny]
    if a.size and (not np.all(np.isfinite(a)) or a.max() > big or a.min() < tiny):
        worst = a.max() if not np.all(np.isfinite(a)) or a.max() > big else a.min()
        _refuse(rule.label, rule.of, p, f"{worst:.3g}", sigma_q, sigma_k, dtype)
    return new.astype(np.dtype(dtype))


def scale_draws(draws: dict, sigma_q: float, sigma_k: float, dtype: str) -> dict:
    """σ = 1 draws ``{"qk.npr": array, …}`` at (σ_Q, σ_K) by :func:`scale_values` (the rule
    of :data:`rmtbase.stats.STAT_INFO`). At σ_Q = σ_K = 1 the arrays are returned unchanged."""
    from ..stats import STAT_INFO, table_name

    if sigma_q == 1.0 and sigma_k == 1.0:
        return draws
    out = {}
    for name, v in draws.items():
        matrix, stat = name.split(".", 1)
        if name == LAMBDA_KEY:  # the stored spectrum: lambda ∝ (sigma_q sigma_k)^2
            rule = Rule(LAMBDA_ATTRS["sigma_power"], "power", LAMBDA_VAR, _OF[matrix])
            out[name] = scale_values(v, rule, _ratio(matrix, sigma_q, sigma_k), dtype, sigma_q,
                                     sigma_k)
            continue
        if stat not in STAT_INFO:  # not a table variable
            out[name] = v
            continue
        info = STAT_INFO[stat]
        rule = Rule(int(info["sigma_power"]), info["scaling"], table_name(name), _OF[matrix])
        out[name] = scale_values(v, rule, _ratio(matrix, sigma_q, sigma_k), dtype, sigma_q,
                                 sigma_k)
    return out


#: Table variable of the stored spectrum (:mod:`rmtbase.baseline.spectra`), the ``null_draws``
#: key it comes from, and its extra dim.
LAMBDA_VAR = "lambda"
LAMBDA_KEY = "qk.lambda"
EIG_DIM = "eig"

LAMBDA_ATTRS = {
    "long_name": "eigenvalues of W_QK W_QK^T (squared singular values of W_QK), per draw",
    "units": "sigma^2",
    "definition": ("lambda_k = s_k(W_QK)^2, the nonzero ones (d_h; d for the ginibre "
                   "ensemble) sorted descending, NaN-padded along eig where a cell has fewer; "
                   "normalised x = lambda / (sigma_q^2 sigma_k^2 d^2)"),
    "sigma_power": 2, "scaling": "power", "matrix": "qk", "sigma_of": "sigma_q*sigma_k",
    "statistic": "lambda",
}


def stores_spectrum(stats: str) -> bool:
    """Whether a table of statistic set ``stats`` stores ``lambda``."""
    return stats in ("all", "spectral")


def n_eigenvalues(d: int, d_h: int, ensemble: str) -> int:
    """Number of eigenvalues a draw of cell (d, d_h) stores."""
    return d if ensemble == "ginibre" else d_h


def fast_spectral(stats: str, ensemble: str, storage: str) -> bool:
    """Whether :func:`rmtbase.baseline.null.null_draws` takes the exact fast spectral path (no factors drawn).

    Only for spectral statistics of the lowrank ensemble stored as a float type. Rounding the
    factors to float16/bfloat16 adds entrywise noise of relative size ≤ 2⁻⁹, which leaves the
    law of the spectral statistics unchanged far below their Monte Carlo resolution
    (``tests/test_precision_null.py`` measures the paired change: < 10⁻² null standard
    deviations), so those storages share the float32 spectral null. Block formats change the
    entries by ~0.08σ and go through the factor path with the round trip.
    """
    from ..stats.storage import storage_record

    return stats == "spectral" and ensemble == "lowrank" and storage_record(storage).is_float


def check_cells(spec, cells, *, memory: bool = True) -> None:
    """Everything about a run that can be refused before any draw: the memory of one batch of
    draws (``memory``), d² for d×d statistics and the float range at (σ_Q, σ_K)."""
    fast = fast_spectral(spec.stats, spec.ensemble, spec.storage)
    itemsize = np.dtype(spec.dtype).itemsize
    check_table_values(spec, cells)  # the whole table is assembled here, wherever it is drawn
    for d, d_h in cells:
        check_dense(d, spec.stats, spec.ensemble, fast)
        if memory:
            check_draw_memory(d, d_h, spec.stats, spec.ensemble, itemsize, fast)
    check_sigma_range(cells, stat_names(spec), spec.sigma_q, spec.sigma_k, spec.dtype)


def stat_names(spec) -> list[str]:
    """Keys ``"qk.npr"``, … of the statistics a table of ``spec`` holds."""
    from ..stats import ELEMENT_STATS, SPECTRAL_STATS

    names = ["q.rms", "k.rms"]
    if spec.stats in ("all", "spectral"):
        names += [f"qk.{s}" for s in SPECTRAL_STATS]
    if spec.stats in ("all", "elementwise"):
        names += [f"{m}.{s}" for m in ("q", "k", "qk") for s in ELEMENT_STATS]
    return names


#: Copies of a table held at once while it is assembled, converted and written (the draws, the
#: stacked Dataset, a float64 view for scoring or the netCDF buffers).
TABLE_COPIES = 3


def check_stored_values(n_values: int, itemsize: int, what: str) -> int:
    """InputError if a table of ``n_values`` numbers of ``itemsize`` bytes (``what``, e.g.
    "a table of 44 statistics x 10^12 draws") cannot be held in memory while it is built
    (:data:`TABLE_COPIES` copies); before any draw. Returns the bytes needed."""
    need = TABLE_COPIES * int(n_values) * int(itemsize)
    avail, source = available_memory()
    if avail is not None and need > avail:
        raise InputError(f"{what} needs about {_fmt(need)} of memory to build, more than the "
                         f"{_fmt(avail)} available ({source}"
                         + ("" if source == "RMTBASE_MEMORY_LIMIT" else
                            "; set RMTBASE_MEMORY_LIMIT to change the limit")
                         + "); ask for fewer draws")
    return need


def check_table_values(spec, cells) -> int:
    """:func:`check_stored_values` for a head table of ``spec`` over ``cells``."""
    n_stats = len(stat_names(spec))
    n_eig = max(n_eigenvalues(d, d_h, spec.ensemble) for d, d_h in cells) \
        if stores_spectrum(spec.stats) else 0
    return check_stored_values(len(cells) * (n_stats + n_eig) * int(spec.draws),
                               np.dtype(spec.dtype).itemsize,
                               f"a table of {len(cells)} cell(s) x {n_stats} statistics x "
                               f"{int(spec.draws)} draws")
