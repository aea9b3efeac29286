"""The head pairs a composition null is drawn for, and what the null returns for them.

:class:`Pairs` carries the layers and drawing machinery; a null picks
(:meth:`Pairs.gaussian_factors`, :meth:`Pairs.permuted_entries`) or returns any :class:`PairNull`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...baseline.composition_bidiagonal import composition_bidiagonal
from ...baseline.composition_null import Part, null_squares, null_squares_full
from ...stats.storage import FLOAT32, Storage, storage_record
from ..settings import composition_storage  # noqa: F401 - re-exported


def null_scores(key, d: int, d_h1: int, d_h2: int, draws: int, storage="float32"):
    """``draws`` sorted float64 null scores s at (d, d_h1, d_h2): an exact sampler of d_h-sized
    variates for float32 (bidiagonal where
    :func:`~rmtbase.baseline.composition_bidiagonal.composition_bidiagonal`, else reduced), whole factors
    through the round trip for 16-bit storage. ``storage``: name or record."""
    return np.sort(score_draws(key, d, d_h1, d_h2, 0, draws, storage))


def score_draws(key, d: int, d_h1: int, d_h2: int, start: int, n: int, storage="float32",
                bar=None) -> np.ndarray:
    """Null scores s of draws ``start`` … n−1 (float64, in draw order) by the sampler
    :func:`null_scores` picks; ``bar`` is advanced per compiled call."""
    storage = storage_record(storage)
    kw = {"part": Part(int(start), bar)}
    if storage.is_narrow_float:
        sq = null_squares_full(key, d, d_h1, d_h2, n, storage=storage, **kw)
    elif composition_bidiagonal(d, d_h1, d_h2, storage):
        from ...baseline.composition_bidiagonal import null_squares_bidiagonal

        sq = null_squares_bidiagonal(key, d, d_h1, d_h2, n, **kw)
    elif d_h2 <= d - d_h1:
        sq = null_squares(key, d, d_h1, d_h2, n, **kw)
    else:
        sq = null_squares_full(key, d, d_h1, d_h2, n, **kw)
    return np.sqrt(np.asarray(sq, np.float64))


def settled_scores(comp, d: int, d_h: int, draws: int, seed: int, storage: Storage, *,
                   alpha: float, progress: bool = False) -> tuple[np.ndarray, int]:
    """(sorted null scores, n) at (d, d_h, d_h), seed ``seed``, drawn until no ``composition_flag``
    could differ at ``draws`` (:func:`rmtbase.scoring.composition.stopping.settle`), cached."""
    import jax

    from ...progress import message, progress_bar
    from .cache import cached_null
    from .stopping import continued, settle

    key = jax.random.key(int(seed))

    def draw(_, n, previous):
        start = 0 if previous is None else previous.size

        def fresh():
            with progress_bar(n - start, desc="rmtbase composition null", unit="draw",
                              enabled=progress) as bar:
                return continued(previous, score_draws(key, d, d_h, d_h, start, n, storage,
                                                       bar))
        return cached_null("composition", d, d_h, n, seed, storage.name, fresh)

    def said(_, n):
        if progress:
            message(f"rmtbase: some composition flags are not settled; drawing the "
                    f"composition null to {n:,}")

    nulls, size = settle({"composition": comp}, draw, draws, alpha=alpha, on_grow=said)
    return nulls["composition"], size["composition"]


def _null_storage(storage_rows, null) -> Storage:
    """The record the Gaussian factors are stored at: ``null`` (a record, from
    :func:`composition_storage`), or under ``"auto"`` the coarsest float storage of the
    layers' tensors (the readers' names, looked up here)."""
    if null != "auto":
        return null
    from ...models._reader import coarsest_storage

    return storage_record(coarsest_storage(s for row in storage_rows for s in (row[0], row[2])))


@dataclass
class PairNull:
    """What a composition null gives: the model's ``comp`` (3, L, H, L, H), ``overlap`` (L, H, H)
    and ``norms``; either ``null_sorted`` (shared sorted null scores) or each pair's ``p`` and
    ``median``; ``null_storage`` (file attr), the optional ``null`` sentence, the ``storage`` record
    the draws went through (None: float32) and ``drawn`` (where stopping stopped)."""

    comp: np.ndarray
    overlap: np.ndarray
    norms: dict
    null_storage: str
    null_sorted: np.ndarray | None = None
    p: np.ndarray | None = None
    median: np.ndarray | None = None
    description: str | None = None
    storage: Storage | None = None
    drawn: int | None = None

    @property
    def overlap_storage(self) -> Storage:
        """The storage the QK overlap's null is drawn at: this null's where a narrow float
        (float16, bfloat16), else float32."""
        narrow = self.storage is not None and self.storage.is_narrow_float
        return self.storage if narrow else FLOAT32


@dataclass
class Pairs:
    """The model's layers (iterable of ``(wq, wk, wo_t, wv)``, read once), its
    :class:`~rmtbase.models.ModelInfo`, storage rows (filled as read), the scores' function, the
    norm gains folded in (or None) and the ``null_storage`` option (:func:`composition_storage`)."""

    info: object
    layers: object
    storage_rows: list
    from_factors: object
    gains: object = None
    null_storage: str | Storage = "auto"
    progress: bool = False
    alpha: float = 0.05

    def scores(self, layers=None):
        """(comp, overlap, norms) of ``layers`` (default: this model's, read now)."""
        return self.from_factors(self.layers if layers is None else layers,
                                 self.info.n_kv_heads, ln_gains=self.gains)

    def gaussian_factors(self, *, draws: int, seed: int) -> PairNull:
        """Independent Gaussian factors at the heads' shapes and float storage, shared by every
        pair, drawn as far as the flags need and cached
        (:mod:`rmtbase.scoring.composition.cache`)."""
        comp, overlap, norms = self.scores()
        record = _null_storage(self.storage_rows, self.null_storage)
        nulls, size = settled_scores(comp, self.info.d, self.info.d_h, int(draws), int(seed),
                                     record, alpha=self.alpha, progress=self.progress)
        return PairNull(comp, overlap, norms, record.name, null_sorted=nulls, storage=record,
                        drawn=size)

    def permuted_entries(self, *, draws: int, seed: int) -> PairNull:
        """Each factor's own entries shuffled (:mod:`rmtbase.scoring.composition.permutation`):
        a p and a null median per pair."""
        from . import permutation as P

        layers = list(self.layers)
        comp, overlap, norms = self.scores(layers)
        counts = P.permutation_counts(layers, self.info.n_kv_heads, comp, draws=int(draws),
                                      seed=int(seed), ln_gains=self.gains)
        return PairNull(comp, overlap, norms, "entries permuted",
                        p=P.permutation_p(comp, counts), median=counts["median"])


__all__ = ["PairNull", "Pairs", "composition_storage", "null_scores", "score_draws",
           "settled_scores"]
