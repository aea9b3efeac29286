"""The statistic as one record: every fact about a statistic in one place, every table derived.

A :class:`Statistic` holds: its name; its kind (``"spectral"``: a function of W_QK's nonzero
λ; ``"element"``: of a matrix's entries; ``"scale"``: the rms); long name, units, definition;
σ scaling (value(σ) = σ^p value(1) for ``"power"``, value(1) + p ln σ for ``"log"``, σ = σ_Q,
σ_K or σ_Q σ_K for q.*, k.*, qk.*); effect (``"ratio"`` of value + ``offset``, or ``"shift"``);
``histogram``; why it can be undefined; its analytic reference and duplicates per matrix.
:data:`STATISTICS` (shipped) and :data:`REGISTRY` (with plugins, :func:`register`) hold them;
the tables derive from them. An element statistic needs an ``estimator`` and a table rebuild."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import InputError
from ..registry import GROUPS, Registry, record_plugin
from ._lambda import (
    _condition_number,
    _lambda_max,
    _lambda_min,
    _npr,
    _pr,
    _spectral_entropy,
    _stable_rank,
    _sum_lambda,
    _sum_lambda2,
)
from .estimator import Estimator
from .fused import FUSED

__all__ = ["MATRICES", "OPTIONAL_NAMES", "REGISTRY", "STATISTICS", "Statistic", "doc_table", "element_names",
           "StatInfo", "records", "register", "spectral", "stat_info", "statistic", "unregister"]

#: The matrices a head's statistics are of (``w``: a whole weight matrix, components).
MATRICES = ("q", "k", "qk", "w")


@dataclass(frozen=True)
class Statistic:
    """One statistic (module docstring). Frozen and hashable: records pass into jitted code
    as static arguments."""

    name: str
    kind: str
    long_name: str
    units: str
    definition: str
    sigma_power: float = 0
    scaling: str = "power"
    effect: str = "shift"
    offset: float = 0.0
    fn: Callable | None = None
    histogram: bool = False
    undefined_reason: str | None = None
    #: ((matrix, analytic reference note), ...)
    references: tuple = ()
    #: ((matrix, representative "<matrix>.<stat>", why), ...)
    duplicates: tuple = ()
    #: whether a head's null tables hold it (False: a whole matrix's only, the extra Weibull
    #: trims of :mod:`.matrix`); :data:`rmtbase.stats.elementwise.ELEMENT_STATS` derives from it
    head: bool = True
    #: an element statistic's estimator: its per-tile accumulators, their merge and its finish
    #: (:mod:`.estimator`); the fused estimator of the tables' statistics (:data:`.fused.FUSED`)
    #: unless given
    estimator: Estimator | None = None

    def __post_init__(self):
        if self.kind not in ("spectral", "element", "scale"):
            raise InputError(f"statistic kind must be spectral, element or scale, got "
                             f"{self.kind!r}")
        if self.effect not in ("ratio", "shift"):
            raise InputError(f"statistic effect must be ratio or shift, got {self.effect!r}")
        if (self.kind == "spectral") != (self.fn is not None):
            raise InputError(f"statistic {self.name!r}: a spectral statistic needs fn (of λ), "
                             "others have none")
        if self.kind != "element":
            if self.estimator is not None:
                raise InputError(f"statistic {self.name!r}: only element statistics have an "
                                 "estimator")
            return
        if self.estimator is None:
            object.__setattr__(self, "estimator", FUSED)
        if self.name not in self.estimator.statistics:
            raise InputError(f"element statistic {self.name!r}: its estimator "
                             f"{self.estimator.name!r} does not compute it (give the record "
                             "its own estimator)")

    @property
    def transform(self) -> str:
        """The variance-stabilising transform of ``distance``: "log" (ratio), "log3" (ratio
        with offset 3: log(x + 3)), "identity" (shift)."""
        if self.effect == "shift":
            return "identity"
        return "log" if self.offset == 0 else "log3"

    def duplicate(self, matrix: str) -> tuple[str, str] | None:
        """(representative, why) if ``<matrix>.<name>`` duplicates another statistic."""
        for m, rep, why in self.duplicates:
            if m == matrix:
                return rep, why
        return None

    def reference(self, matrix: str) -> str:
        """The analytic reference note of ``<matrix>.<name>`` ("" where none)."""
        return dict(self.references).get(matrix, "")


STATISTICS: tuple[Statistic, ...] = (
    Statistic('lambda_max', 'spectral', 'largest eigenvalue of W_QK W_QK^T', 'sigma^2',
              'max_k lambda_k, lambda_k = s_k(W_QK)^2',
              sigma_power=2, effect='ratio', fn=_lambda_max, references=(('qk', 'upper edge of MP_c ⊠ MP_c times s² d² (Burda et al. 2010)'),)),
    Statistic('lambda_min', 'spectral', 'smallest nonzero eigenvalue of W_QK W_QK^T', 'sigma^2',
              'min over the d_h nonzero lambda_k',
              sigma_power=2, effect='ratio', fn=_lambda_min, references=(('qk', 'lower edge of MP_c ⊠ MP_c times s² d²'),)),
    Statistic('sum_lambda', 'spectral', 'sum of eigenvalues', 'sigma^2',
              'sum_k lambda_k = ||W_QK||_F^2',
              sigma_power=2, effect='ratio', fn=_sum_lambda, references=(('qk', 'exact E Σλ = E‖W_QK‖_F² at finite (d, d_h)'),)),
    Statistic('sum_lambda2', 'spectral', 'sum of squared eigenvalues', 'sigma^4',
              'sum_k lambda_k^2 = ||W_QK W_QK^T||_F^2',
              sigma_power=4, effect='ratio', fn=_sum_lambda2, references=(('qk', 'exact E Σλ² at finite (d, d_h)'),)),
    Statistic('pr', 'spectral', 'participation ratio', '1',
              '(sum lambda)^2 / sum lambda^2',
              sigma_power=0, effect='ratio', fn=_pr, references=(('qk', 'limit d_h/(1+2c)'),), duplicates=(('qk', 'qk.npr', 'pr = d_h * npr'),)),
    Statistic('npr', 'spectral', 'normalised participation ratio', '1',
              '(sum lambda)^2 / sum lambda^2 / d_h',
              sigma_power=0, effect='ratio', fn=_npr, references=(('qk', 'limit 1/(1+2c): inverse second moment of MP_c ⊠ MP_c (Voiculescu-Dykema-Nica 1992)'),)),
    Statistic('spectral_entropy', 'spectral', 'spectral entropy', 'nat',
              '-sum_k p_k ln p_k, p_k = lambda_k / sum lambda',
              sigma_power=0, effect='shift', fn=_spectral_entropy, references=(('qk', 'large-d limit, rmtbase.analytic.product.spectral_entropy_limit(d, d_h)'),)),
    Statistic('condition_number', 'spectral', 'condition number', '1',
              'lambda_max / lambda_min (of lambda = s^2)',
              sigma_power=0, effect='ratio', fn=_condition_number, references=(('qk', 'ratio of the MP_c ⊠ MP_c edges'),)),
    Statistic('stable_rank', 'spectral', 'stable rank', '1',
              'sum lambda / lambda_max',
              sigma_power=0, effect='ratio', fn=_stable_rank, references=(('qk', 'limit d_h / upper edge'),)),
    Statistic('mean', 'element', 'mean of the entries', 'sigma',
              'sum w / N over all N entries',
              sigma_power=1, effect='shift', references=(('qk', '0 (symmetric law)'), ('q', '0'), ('k', '0'))),
    Statistic('std', 'element', 'standard deviation of the entries', 'sigma',
              'sqrt(mean((w - mean)^2)), ddof 0',
              sigma_power=1, effect='ratio', references=(('qk', 'population std of a W_QK entry, sqrt(d_h) s (exact)'), ('q', 'sigma_q (population)'), ('k', 'sigma_k (population)')), duplicates=(('q', 'q.mean', 'std/rms = sqrt(1 - (mean/rms)^2) after self-normalisation'), ('k', 'k.mean', 'std/rms = sqrt(1 - (mean/rms)^2) after self-normalisation'), ('qk', 'qk.sum_lambda', 'sum_lambda = d^2 (std^2 + mean^2) of W_QK'), ('w', 'w.mean', 'std/rms = sqrt(1 - (mean/rms)^2) after self-normalisation'))),
    Statistic('skewness', 'element', 'skewness of the entries', '1',
              'm3 / m2^(3/2), central moments, ddof 0',
              sigma_power=0, effect='shift', undefined_reason='zero variance', references=(('qk', '0 (symmetric law)'), ('q', '0'), ('k', '0'))),
    Statistic('excess_kurtosis', 'element', 'excess kurtosis of the entries', '1',
              'm4 / m2^2 - 3, central moments, ddof 0',
              sigma_power=0, effect='ratio', offset=3.0, undefined_reason='zero variance', references=(('qk', 'exact 6/d_h of a sum of d_h products of independent normals (Gaunt 2014)'), ('q', '0 (Gaussian)'), ('k', '0 (Gaussian)'))),
    Statistic('entropy', 'element', 'differential entropy of the entries', 'nat',
              'histogram plug-in with Miller-Madow correction: -sum_j p_j ln(p_j/D) + (m-1)/(2N) on B = ceil(2 N^(1/3)) equal bins spanning [min w, max w] (Rice rule; every entry counted), D = (max-min)/B, p_j = n_j/N, m = number of non-empty bins; for float16/bfloat16 storage each value spreads its unit mass uniformly over its rounding cell (lattice-robust, see rmtbase.stats.elementwise)',
              sigma_power=1, scaling='log', effect='shift', histogram=True, references=(('qk', 'differential entropy of the variance-gamma entry law (Gaunt 2014), population'), ('q', '0.5 ln(2 pi e sigma_q^2) (Gaussian)'), ('k', '0.5 ln(2 pi e sigma_k^2)'))),
    Statistic('delta_entropy', 'element', 'entropy residual against the Gaussian of equal variance', 'nat',
              'S - 0.5 ln(2 pi e s^2), S the entropy estimator, s the ddof-0 std',
              sigma_power=0, effect='shift', histogram=True, undefined_reason='zero variance', references=(('qk', 'population S_VG - 0.5 ln(2 pi e d_h s^2) = -KL(VG || Gaussian) <= 0'), ('q', '0 (Gaussian, population; the estimator is biased)'), ('k', '0 (Gaussian, population; the estimator is biased)')), duplicates=(('q', 'q.entropy', 'entropy - 0.5 ln(2 pi e std^2): a function of entropy/rms and mean/rms'), ('k', 'k.entropy', 'as q.delta_entropy'), ('qk', 'qk.entropy', 'as q.delta_entropy'), ('w', 'w.entropy', 'as q.delta_entropy'))),
    Statistic('kl_gaussian', 'element', 'KL divergence to the moment-matched Gaussian', 'nat',
              "binned plug-in sum_j p_j ln(p_j/q_j) - (m-1)/(2N) on the entropy histogram's bins, q_j the N(mean, std^2) mass of bin j, Miller-Madow corrected (may be slightly negative; not clipped)",
              sigma_power=0, effect='shift', histogram=True, undefined_reason='zero variance', references=(('qk', 'population KL(VG || N(0, d_h s^2)); the binned estimator is biased'), ('q', '0 (Gaussian); the binned estimator is biased'), ('k', '0 (Gaussian); the binned estimator is biased'))),
    Statistic('sigma_fit', 'element', 'Gaussian core width', 'sigma',
              'weighted LS (weights n_j) of ln n_j = a + b u + e u^2 over non-empty entropy-histogram bins with |c_j - mean| <= 2 std, u = (c - mean)/std; sigma_fit^2 = std^2/(-2e) - D^2/12 (Sheppard); +inf if e >= 0 (no Gaussian core: flat-topped), 0 if the core is narrower than the bins, NaN if fewer than 3 bins qualify',
              sigma_power=1, effect='ratio', histogram=True, undefined_reason='fewer than 3 histogram bins within 2 std of the mean'),
    Statistic('weibull_k', 'element', 'Weibull shape of |w|', '1',
              'Weibull paper protocol (arXiv:2605.18898 App. A): Hazen plotting position F_i = (i-0.5)/N of the i-th smallest |w|; keep (1-trim)/2 <= F <= (1+trim)/2 (default trim 0.8); LS of ln(-ln(1-F)) on ln|w|; k = slope (sort-free binned sums, relative error < 1e-6)',
              sigma_power=0, effect='ratio', undefined_reason='exact zeros among the fitted ranks (ln 0)', references=(('q', 'half-normal Weibull anchor k0 (continuum limit of the 10-90% protocol)'), ('k', 'half-normal Weibull anchor k0'))),
    Statistic('weibull_lambda', 'element', 'Weibull scale of |w|', 'sigma',
              'exp(-intercept/k) of the same fit as weibull_k',
              sigma_power=1, effect='ratio', undefined_reason='exact zeros among the fitted ranks (ln 0)', references=(('q', 'half-normal Weibull anchor lambda0 * sigma_q'), ('k', 'half-normal Weibull anchor lambda0 * sigma_k'))),
    Statistic('weibull_k_trim90', 'element', 'Weibull shape of |w|, middle 90 %', '1',
              'as weibull_k with trim 0.9: 0.05 <= F <= 0.95',
              sigma_power=0, effect='ratio', head=False),
    Statistic('weibull_lambda_trim90', 'element', 'Weibull scale of |w|, middle 90 %', 'sigma',
              'exp(-intercept/k) of the weibull_k_trim90 fit',
              sigma_power=1, effect='ratio', head=False),
    Statistic('weibull_k_trim100', 'element', 'Weibull shape of |w|, all ranks', '1',
              'as weibull_k with trim 1: every rank (Hazen F never 0 or 1)',
              sigma_power=0, effect='ratio', head=False),
    Statistic('weibull_lambda_trim100', 'element', 'Weibull scale of |w|, all ranks', 'sigma',
              'exp(-intercept/k) of the weibull_k_trim100 fit',
              sigma_power=1, effect='ratio', head=False),
    Statistic('max_over_q99', 'element', 'max |w| over the 99th percentile of |w|', '1',
              'max|w| / |w|_(ceil(0.99 N)) (inverted-CDF order statistic, located in the |w| histogram of 2^11 bins per octave and interpolated across its bin)',
              sigma_power=0, effect='ratio'),
    Statistic('rms', 'scale', 'root mean square of the entries', 'sigma',
              'sqrt(tr(W W^T) / (d_h d)) = ||W||_F / sqrt(d_h d)',
              sigma_power=1, effect='shift', references=(('q', 'sigma_q (population)'), ('k', 'sigma_k (population)'))),
)


def _check_fn(record: Statistic) -> None:
    """A plugin's statistic, checked once on a small λ before it is registered (by its entry
    point or :func:`register` alike): its ``fn`` maps λ ``(2, 8)`` to ``(2,)`` under JAX tracing
    (:func:`jax.eval_shape`), else a one-line TypeError (the plugin is not loaded)."""
    if isinstance(record, Statistic) and record.kind == "spectral":
        import jax
        import jax.numpy as jnp

        try:
            got = jax.eval_shape(record.fn, jax.ShapeDtypeStruct((2, 8), jnp.float32))
        except Exception as e:  # noqa: BLE001 - the plugin's own error, named in one line
            text = (str(e).strip().splitlines() or [""])[0]
            raise TypeError(f"its fn raised {type(e).__name__}: {text} on λ of shape (2, 8)") \
                from e
        shape = getattr(got, "shape", None)
        if shape != (2,):
            raise TypeError(f"its fn returned {_shape_text(got)} for λ of shape (2, 8); a "
                            "statistic maps λ (..., d_h) to (...)")


def _shape_text(got) -> str:
    shape = getattr(got, "shape", None)
    return f"shape {tuple(shape)}" if shape is not None else f"a {type(got).__name__}"


def _check(name: str, record) -> None:
    """What every statistic not shipped passes, however registered: a spectral record named
    ``name`` whose ``fn`` passes :func:`_check_fn` (TypeError, one line)."""
    if not isinstance(record, Statistic) or record.kind != "spectral":
        raise TypeError("a statistic is registered as a spectral record (kind='spectral', fn "
                        f"of λ); got {record!r}")
    if record.name != name:
        raise TypeError(f"statistic {record.name!r} registered under the name {name!r}")
    _check_fn(record)


#: Every statistic by name: :data:`STATISTICS` and those registered after (a
#: :class:`rmtbase.registry.Registry`, entry-point group ``rmtbase.statistics``)
REGISTRY: Registry = Registry("statistic", GROUPS["statistic"],
                              record_plugin(Statistic, lambda r: register(r)), _check)


def register(record: Statistic) -> Statistic:
    """Add a spectral ``record`` to the registry (TypeError for another kind or a failing ``fn``,
    :func:`_check`; InputError if its name is taken)."""
    if not isinstance(record, Statistic) or record.kind != "spectral":
        raise TypeError("a statistic is registered as a spectral record (kind='spectral', fn "
                        f"of λ); got {record!r}")
    if REGISTRY.peek(record.name) is not None:
        raise InputError(f"a statistic named {record.name!r} is already registered")
    return REGISTRY.register(record.name, record)


def unregister(name: str) -> None:
    """Take a registered statistic out (a test's own); those of :data:`STATISTICS` stay."""
    if any(s.name == name for s in STATISTICS):
        raise InputError(f"the shipped statistic {name!r} cannot be unregistered")
    REGISTRY.unregister(name)


def records() -> tuple[Statistic, ...]:
    """Every registered statistic, :data:`STATISTICS` first then the others in the order
    registered (plugins loaded)."""
    return tuple(REGISTRY.values())


for _s in STATISTICS:
    REGISTRY.register(_s.name, _s, shipped=True)
del _s

#: The shipped statistics that join a score only when named (:data:`.heavy_tail.HEAVY_TAIL`):
#: reserved, so that no plugin takes their names in any process state.
OPTIONAL_NAMES = ("ww_alpha", "ww_alpha_weighted", "ww_log_norm", "ww_log_spectral_norm",
                  "ww_log_alpha_norm")
REGISTRY.reserve(OPTIONAL_NAMES, "rmtbase.stats.heavy_tail")


def _bare(name: str) -> str:
    return name.split(".", 1)[1] if "." in name else name


def statistic(name: str, statistics=None) -> Statistic:
    """The record of ``"npr"`` or ``"<matrix>.npr"`` among ``statistics`` (default every
    registered one, :func:`records`); InputError if there is none."""
    bare = _bare(name) if isinstance(name, str) else name
    for s in records() if statistics is None else statistics:
        if s.name == bare:
            return s
    raise InputError(REGISTRY.unknown(bare, f"unknown statistic {name!r}"))


def spectral(statistics=STATISTICS) -> tuple[Statistic, ...]:
    """The spectral records, in registry order."""
    return tuple(s for s in statistics if s.kind == "spectral")


def element_names(statistics=STATISTICS) -> tuple[str, ...]:
    """Names of the element statistics a head's null tables hold, in registry order
    (``ELEMENT_STATS``)."""
    return tuple(s.name for s in statistics if s.kind == "element" and s.head)


def stat_info(statistics=STATISTICS) -> dict[str, dict]:
    """``{name: {long_name, units, definition, sigma_power, scaling}}`` (``STAT_INFO``)."""
    return {s.name: {"long_name": s.long_name, "units": s.units, "definition": s.definition,
                     "sigma_power": s.sigma_power, "scaling": s.scaling} for s in statistics}


class StatInfo(Mapping):
    """:func:`stat_info` of every registered statistic (:func:`records`), read when used: a
    statistic registered later, or by a plugin, is in it (``rmtbase.stats.STAT_INFO``)."""

    def __getitem__(self, name) -> dict:
        record = REGISTRY.get(name) if isinstance(name, str) else None
        if record is None:
            raise KeyError(name)
        return stat_info((record,))[name]

    def __iter__(self):
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)


def transforms(statistics=STATISTICS) -> dict[str, str]:
    """``{name: "log" | "log3"}`` for ratio statistics (``TRANSFORM``; others: identity)."""
    return {s.name: s.transform for s in statistics if s.transform != "identity"}


def duplicates(statistics=STATISTICS) -> dict[str, tuple[str, str]]:
    """``{"<matrix>.<name>": (representative, why)}`` (``DUPLICATES``), by matrix then name."""
    out = {}
    for s in statistics:
        for m, rep, why in s.duplicates:
            out[f"{m}.{s.name}"] = (rep, why)
    return out


def histogram(statistics=STATISTICS) -> tuple[str, ...]:
    """Names of the statistics that see a storage lattice (``HISTOGRAM``)."""
    return tuple(s.name for s in statistics if s.histogram)


def nan_reasons(statistics=STATISTICS) -> dict[str, str]:
    """``{name: why it can be undefined}`` (``NAN_REASONS``)."""
    return {s.name: s.undefined_reason for s in statistics if s.undefined_reason}


def reference_notes(statistics=STATISTICS) -> dict[str, str]:
    """``{table variable: analytic reference note}`` (``REFERENCE_NOTES``): spectral
    statistics by their bare name, others as ``<matrix>_<name>``."""
    out = {}
    for s in statistics:
        for m, note in s.references:
            out[s.name if s.kind == "spectral" else f"{m}_{s.name}"] = note
    return out


def doc_table(statistics=STATISTICS) -> str:
    """The Markdown table of every statistic (``docs/statistics.md``, between its markers)."""
    rows = ["| statistic | kind | units | σ power | effect | definition |",
            "|---|---|---|---|---|---|"]
    for s in statistics:
        eff = s.effect if not s.offset else f"{s.effect} of value + {s.offset:g}"
        scal = f"{s.sigma_power:g}" + (" (log)" if s.scaling == "log" else "")
        name, text = (t.replace("|", "\\|") for t in (s.long_name, s.definition))
        rows.append(f"| `{s.name}` | {s.kind} | {s.units} | {scal} | {eff} | {name}: {text} |")
    return "\n".join(rows) + "\n"

