"""Settings records of the scoring entry points (``settings=``), checked by the entry point.

The record's fields are also keywords of the entry point, replacing the record's
(:func:`rmtbase.errors.with_keywords`): ``score_model(m, draws=2000)`` is
``score_model(m, settings=ScoreSettings(draws=2000))``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScoreSettings:
    """What a score tests, at which level, against which null and how far the null grows.

    stats: ``"all"``, ``"spectral"``, ``"elementwise"`` or ``"<matrix>.<stat>"`` names. draws:
    least null draws per table (permutation null: per head; None: 1000, grown for open heads).
    alpha: BH level. seed: table / permutation seed. spectrum_draws: the spectrum band's draws
    (0: none). null: ``"gaussian"``, ``"permutation"`` or a
    :class:`~rmtbase.stats.null_protocol.Null`. quantized_null: ``"auto"``, ``"none"`` or a
    format of :data:`rmtbase.stats.precision.QUANT_FORMATS`. max_draws: None extends the spectral
    null while a decision could change; a number, up to it for heads near a flag. element_draws:
    permutations for W_QK's element statistics. null_start: least null sizes
    (:class:`~rmtbase.scoring.heads.reference.NullStart`). growth_budget: CPU seconds the null
    tables' growth may cost (estimated), ``"auto"`` (twice the heads' own measuring, at least
    300) or None (no limit); heads still open where it stops growth are reported undecided
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


@dataclass(frozen=True)
class CompositionSettings:
    """The null of a composition and its level.

    null: ``"gaussian"`` or ``"permutation"`` (or a :class:`~rmtbase.stats.null_protocol.Null`
    with a composition null). draws: null draws (None: 2,000 Gaussian, 1,000 permutation). seed:
    the null's seed. alpha: BH level. null_storage: ``"auto"`` (the checkpoint's float storage;
    quantised → float32), ``"float32"``, ``"bfloat16"`` or ``"float16"``."""

    null: object = "gaussian"
    draws: int | None = None
    seed: int = 0
    alpha: float = 0.05
    null_storage: str = "auto"


@dataclass(frozen=True)
class ComponentSettings:
    """The null of a whole-matrix score: draws per shape (None: the default), BH level, seed,
    quantized_null (``"auto"``, ``"none"`` or a block format), threads (null draws computed at
    once; None: chosen from the cores)."""

    draws: int | None = None
    alpha: float = 0.05
    seed: int = 0
    quantized_null: str = "auto"
    threads: int | None = None
