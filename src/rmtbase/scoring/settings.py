"""Settings records of the scoring entry points (``settings=``), each checked once, when built.

A record refuses a bad value with one :class:`~rmtbase.errors.InputError` line and holds each
value in the form the work reads, so a record that exists is valid; each default is written
once. Its fields are also keywords of the entry point (:func:`rmtbase.errors.with_keywords`):
``score_model(m, draws=2000)`` is ``score_model(m, settings=ScoreSettings(draws=2000))``."""

from __future__ import annotations

from dataclasses import dataclass

from ..checks import (
    COMPOSITION_DRAWS_WHY,
    MAX_DRAWS,
    MIN_NULL_DRAWS,
    check_int,
    check_probability,
    check_seed,
)
from ..errors import InputError, check_draws
from ..stats.names import FLOAT_STORAGES
from ..stats.null_protocol import Null
from ..stats.storage import Storage, storage_record


@dataclass(frozen=True)
class NullStart:
    """The least sizes a score's Gaussian nulls start from: joint ``table``, ``spectral`` reference
    and ``profile`` per null storage (``((storage, n), ...)``); 0 or absent: the rules' own start.
    Set by a collection re-scoring an entry behind another of its shape; the rules may grow
    further."""

    table: int = 0
    spectral: int = 0
    profile: tuple = ()

    @classmethod
    def of(cls, value) -> NullStart:
        """A :class:`NullStart` from None, one, or a dict of its fields (``profile`` a dict
        {storage: n} or pairs; a ``joint`` size counts as the table's: the joint table is the
        table grown)."""
        if value is None or isinstance(value, NullStart):
            return value or cls()
        v = dict(value)
        prof = dict(v.get("profile") or ())
        return cls(max(int(v.get("table") or 0), int(v.get("joint") or 0)),
                   int(v.get("spectral") or 0),
                   tuple(sorted((str(k), int(n)) for k, n in prof.items())))


FAMILIES = ("all", "spectral", "elementwise")


def _plugin_axis(name) -> bool:
    from ..decision.axes import REGISTRY

    return isinstance(name, str) and name.isidentifier() and not REGISTRY.shipped(name) \
        and name in REGISTRY


def stat_kind(stats) -> tuple[str, tuple[str, ...] | None]:
    """('all'|'spectral'|'elementwise', explicit names or None) from a ``stats`` value: a
    family, names, or a family then plugins' statistics and axes it adds (plugin axes named
    are not statistics: left out of the names)."""
    from ..stats.choice import named

    if isinstance(stats, str):
        if stats in FAMILIES:
            return stats, None
        stats = [stats]
    names = tuple(stats)
    if not names:
        raise InputError("stats must name at least one statistic")
    if names[0] in FAMILIES:
        bad = [n for n in names[1:] if not (named((n,)) or _plugin_axis(n))]
        if bad:  # a plugin of that name that failed to load: its own line
            from ..decision.axes import REGISTRY as AXES
            from ..stats.statistic import REGISTRY as STATS

            what = f"stats: after the family {names[0]!r} come plugins' statistics or axes, " \
                   f"got {bad[0]!r}"
            name = str(bad[0]).split(".", 1)[-1]
            raise InputError(STATS.unknown(name, AXES.unknown(name, what)))
        if names[0] == "elementwise" and named(names[1:]):
            raise InputError("stats: a plugin's statistic is spectral: not with 'elementwise'")
        return names[0], None
    return "all", tuple(n for n in names if not _plugin_axis(n))


def check_null_storage(null: Null, where: str = "null") -> None:
    """InputError up front if ``null`` carries its own storage: a null stored like the checkpoint is
    set per layer, so e.g. ``GaussianNull("q8_0")`` is refused rather than silently ignored."""
    if null.storage != "float32":
        raise InputError(f"{where} {null!r} carries storage {null.storage!r}, which is not "
                         "honoured: the null is stored as each layer of the checkpoint is; pass "
                         f"{type(null).__name__}() (quantized_null forces a block format on "
                         "quantised layers)")


def check_quantized_null(value) -> str:
    """``value`` if it is ``"auto"``, ``"none"`` or a registered quantised format (read from
    the registry now: one registered later is accepted), else InputError — a failed storage
    plugin's own line where one of that name failed to load
    (:func:`rmtbase.stats.names.check_quantized_null`)."""
    from ..stats.names import check_quantized_null as check

    check(value)
    return value


def composition_storage(value) -> str | Storage:
    """The ``null_storage`` of a composition where it enters: ``"auto"`` as it is, else the
    record of a float storage (a name in any case, or a record); InputError (one line) for
    anything else, before any weight is read."""
    if isinstance(value, str) and value == "auto":
        return value
    try:
        record = storage_record(value) if isinstance(value, str | Storage) else None
    except InputError:
        record = None
    if record is None or not record.is_float:
        raise InputError(f"null_storage must be 'auto' or one of {', '.join(FLOAT_STORAGES)}, "
                         f"got {value!r}")
    return record


def _put(record, name: str, value) -> None:
    """Set a field of a frozen record from its ``__post_init__`` (the checked form)."""
    object.__setattr__(record, name, value)


#: A growth budget's bounds (:mod:`rmtbase.scoring.stopping.budget`), CPU seconds (0: no growth at all, up to a CPU-week).
MIN_SECONDS, MAX_SECONDS = 0.0, 7 * 24 * 3600.0


def check_budget(budget):
    """``budget`` as given (``"auto"``, None for no budget, or CPU seconds in
    [:data:`MIN_SECONDS`, :data:`MAX_SECONDS`]), else a one-line InputError."""
    if budget is None or budget == "auto":
        return budget
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise InputError(f"growth_budget must be 'auto', None or CPU seconds, got {budget!r}")
    if not MIN_SECONDS <= float(budget) <= MAX_SECONDS:
        raise InputError(f"growth_budget must be between {MIN_SECONDS:g} and {MAX_SECONDS:g} "
                         f"CPU seconds, got {budget:g}")
    return float(budget)


@dataclass(frozen=True)
class ScoreSettings:
    """What a score tests, at which level, against which null and how far the null grows.

    stats: ``"all"``, ``"spectral"``, ``"elementwise"``, ``"<matrix>.<stat>"`` names, or a
    family then the plugins' statistics and axes it adds (:func:`stat_kind`). draws:
    least null draws per table (permutation null: per head), at least
    :data:`~rmtbase.checks.MIN_NULL_DRAWS` (the omnibus calibration reads the 10 largest null
    statistics); None: :data:`rmtbase.baseline.cache.TABLE_DRAWS`, grown for heads whose
    decision is open; a number: fixed. alpha: BH level. seed: table / permutation seed.
    spectrum_draws: the spectrum band's draws (0: none). null: ``"gaussian"``,
    ``"permutation"`` or a :class:`~rmtbase.stats.null_protocol.Null` (held parsed).
    quantized_null: ``"auto"``, ``"none"`` or a format of
    :data:`rmtbase.stats.precision.QUANT_FORMATS`. max_draws: None extends the spectral null
    while a decision could change; a number, up to it for heads near a flag. element_draws:
    permutations for W_QK's element statistics. null_start: least null sizes
    (:class:`NullStart`, held as one). growth_budget: CPU seconds the null tables' growth may
    cost (estimated), ``"auto"`` (twice the heads' own measuring, at least 300) or None (no
    limit); heads still open where it stops growth are reported undecided
    (:mod:`rmtbase.scoring.stopping.budget`)."""

    stats: object = "all"
    draws: int | None = None
    alpha: float = 0.05
    seed: int = 0
    spectrum_draws: int = 200
    null: object = "gaussian"
    quantized_null: str = "auto"
    max_draws: int | None = None
    element_draws: int = 200
    null_start: object = None
    growth_budget: object = "auto"

    def __post_init__(self):
        _put(self, "alpha", check_probability("alpha", self.alpha))
        if self.draws is not None:
            check_int("draws", self.draws, minimum=MIN_NULL_DRAWS, maximum=MAX_DRAWS,
                      why="the omnibus calibration of each head's p reads the 10 largest null "
                          "statistics")
        if self.max_draws is not None:
            check_int("max_draws", self.max_draws, minimum=2, maximum=MAX_DRAWS)
        check_int("element_draws", self.element_draws, minimum=0, maximum=MAX_DRAWS)
        check_int("spectrum_draws", self.spectrum_draws, minimum=0, maximum=MAX_DRAWS)
        check_seed(self.seed)
        null = Null.parse(self.null)  # the text enters here; the value from here on
        check_null_storage(null)
        _put(self, "null", null)
        check_quantized_null(self.quantized_null)
        stat_kind(self.stats)
        _put(self, "null_start", NullStart.of(self.null_start))
        _put(self, "growth_budget", check_budget(self.growth_budget))

    @property
    def kind(self) -> str:
        """``"all"``, ``"spectral"`` or ``"elementwise"``: the statistics' family."""
        return stat_kind(self.stats)[0]

    @property
    def names(self) -> tuple[str, ...] | None:
        """The statistics named one by one, or None for a family."""
        return stat_kind(self.stats)[1]

    @property
    def plugins(self) -> tuple:
        """The plugins' statistic records named (a default score has none)."""
        from ..stats.choice import named

        return named(() if isinstance(self.stats, str) else self.stats)

    @property
    def axes(self) -> frozenset:
        """The plugins' axes named, and ``qk.<name>`` of each plugin statistic named: a plugin
        axis joins the profile when named or when the plugin statistic it reads is."""
        names = () if isinstance(self.stats, str) else tuple(self.stats)
        return frozenset([n for n in names if _plugin_axis(n)]
                         + [f"qk.{r.name}" for r in self.plugins])


@dataclass(frozen=True)
class CompositionSettings:
    """The null of a composition and its level.

    null: ``"gaussian"`` or ``"permutation"`` (or a :class:`~rmtbase.stats.null_protocol.Null`
    with a composition null; held parsed). draws: null draws, at least 2 (a tail p needs two);
    None: the null's own :attr:`~rmtbase.stats.null_protocol.Null.composition_draws` (18,000
    for the Gaussian null, the most its stopping rule draws; 1,000 permutations per head for
    the permutation null). seed: the null's seed. alpha: BH level. null_storage: ``"auto"``
    (the checkpoint's float storage; quantised → float32), ``"float32"``, ``"bfloat16"`` or
    ``"float16"`` (held as its record)."""

    null: object = "gaussian"
    draws: int | None = None
    seed: int = 0
    alpha: float = 0.05
    null_storage: str = "auto"

    def __post_init__(self):
        check_seed(self.seed)
        _put(self, "alpha", check_probability("alpha", self.alpha))
        if self.draws is not None:
            check_int("draws", self.draws, minimum=MIN_NULL_DRAWS, maximum=MAX_DRAWS,
                      why=COMPOSITION_DRAWS_WHY)
        null = Null.parse(self.null)
        check_null_storage(null, "null")  # its storage is null_storage's, set per checkpoint
        _put(self, "null", null)
        _put(self, "null_storage", composition_storage(self.null_storage))

    @property
    def null_draws(self) -> int:
        """The draws asked for: :attr:`draws`, else the null's default."""
        return int(self.null.composition_draws if self.draws is None else self.draws)


@dataclass(frozen=True)
class ComponentSettings:
    """The null of a whole-matrix score: draws per shape (None:
    :data:`rmtbase.baseline.matrix_null.DEFAULT_DRAWS`; at least
    :data:`~rmtbase.checks.MIN_NULL_DRAWS`, the omnibus calibration of each matrix's p), BH
    level, seed, quantized_null (``"auto"``, ``"none"`` or a block format), threads (null draws
    computed at once; None: chosen from the cores)."""

    draws: int | None = None
    alpha: float = 0.05
    seed: int = 0
    quantized_null: str = "auto"
    threads: int | None = None

    def __post_init__(self):
        _put(self, "alpha", check_probability("alpha", self.alpha))
        if self.draws is not None:
            check_draws(self.draws, MIN_NULL_DRAWS)  # the omnibus calibration of each p
        check_seed(self.seed)
        check_quantized_null(self.quantized_null)


__all__ = ["MAX_SECONDS", "MIN_SECONDS", "ComponentSettings", "CompositionSettings", "NullStart",
           "ScoreSettings", "check_budget", "check_null_storage", "check_quantized_null",
           "composition_storage", "stat_kind"]
