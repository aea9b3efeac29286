"""The Gaussian null (:class:`GaussianNull`, a :class:`rmtbase.stats.null_protocol.Null`):
W_Q, W_K with i.i.d. N(0, σ²) entries at the head's own (d, d_h, σ_Q, σ_K), put through
``storage``'s round trip (:func:`rmtbase.stats.precision.round_trip`); its draws come from
tables shared by every head of one shape and storage. It tests the entry law too (W_Q/W_K
element statistics enter the decision). ``storage`` is the name; behaviour is read from
:attr:`~rmtbase.stats.null_protocol.Null.storage_record`. Registered as ``"gaussian"``."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

from ..errors import InputError
from .names import STORAGES
from .null_protocol import Null
from .storage import Storage, storage_record


@dataclass(frozen=True)
class GaussianNull(Null):
    """i.i.d. N(0, σ²) entries at the head's own (d, d_h, σ_Q, σ_K), stored at ``storage``."""

    name: ClassVar[str] = "gaussian"
    tests_entry_law: ClassVar[bool] = True
    draws_per_head: ClassVar[bool] = False
    needs_factors: ClassVar[bool] = False
    shared_table: ClassVar[bool] = True
    gaussian_spectrum_band: ClassVar[bool] = True
    gaussian_qk_overlap: ClassVar[bool] = True
    stored_like_checkpoint: ClassVar[bool] = True
    scores_components: ClassVar[bool] = True
    scores_deltas: ClassVar[bool] = True
    #: default draws of the Gaussian-factor composition null (exact law, reduced sampler),
    #: sized by its own error as the statistics' joint null (the realised size of p <= 0.05,
    #: shared by every model of a shape, has sd sqrt(0.05 * 0.95 / N), at most a quarter of a
    #: 1,000-pair binomial se from N >= 16,000; rmtbase.scoring.stopping.joint.needed_draws).
    composition_draws: ClassVar[int] = 18_000
    #: the ensemble its draws come from (:mod:`rmtbase.ensembles`): W_Q, W_K i.i.d. Gaussian
    #: factors of shape (d_h, d), so W_QK has rank d_h ("lowrank", not the full-rank d x d
    #: Ginibre matrix of ensemble "ginibre")
    ensemble: ClassVar[str] = "lowrank"
    #: what the entries are, before the storage (the start of every description)
    ENTRIES: ClassVar[str] = ("i.i.d. N(0, sigma^2) entries at each head's own "
                              "(d, d_h, sigma_Q, sigma_K)")

    storage: str = "float32"
    #: :attr:`Null.storage_record`: set from ``storage`` at construction (a record given as
    #: ``storage`` is kept, and ``storage`` becomes its name); not part of the value's
    #: equality, hash or repr, which the name already decides
    storage_record: Storage = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        record = self.storage if isinstance(self.storage, Storage) else None
        name = record.name if record is not None else self.storage
        if not isinstance(name, str) or name not in STORAGES:
            raise InputError(f"storage must be one of {', '.join(STORAGES)}, "
                             f"got {self.storage!r}")
        object.__setattr__(self, "storage", name)  # the public name, as the files spell it
        object.__setattr__(self, "storage_record", record or storage_record(name))

    @classmethod
    def named(cls, *, storage: str = "float32") -> GaussianNull:
        return cls(storage)

    def at_storage(self, storage) -> GaussianNull:
        return replace(self, storage=storage)

    def reference(self, cells, storage: Storage, *, draws, seed: int, progress: bool):
        """The tables at ``storage``, shared by the layers stored alike
        (:class:`rmtbase.scoring.heads.reference.TableReference`)."""
        return cells.table_reference(self.at_storage(storage), draws=draws, seed=seed,
                                     progress=progress)

    def composition_null(self, pairs, *, draws: int, seed: int):
        """Independent Gaussian factors at each head's shapes, stored at the pairs' float
        storage (:meth:`rmtbase.scoring.composition.pairs.Pairs.gaussian_factors`)."""
        return pairs.gaussian_factors(draws=draws, seed=seed)

    def composition_label(self, null_storage: str) -> str:
        return f"independent Gaussian factors ({null_storage})"

    def stored(self) -> str:
        """How the draws are stored, as a clause: "" for float32, "rounded to float16 like the
        checkpoint", "passed through the q4_k block quantiser like the checkpoint"."""
        record = self.storage_record  # the record says how it stores
        return "" if record.is_identity else f"{record.stored_as()} like the checkpoint"

    def stored_as(self) -> str:
        """The storage in a list of layers: "float32", "rounded to float16", "passed through
        the q4_k block quantiser"."""
        return self.stored().removesuffix(" like the checkpoint") or "float32"

    def description(self) -> str:
        """One sentence: the entries and how they are stored."""
        stored = self.stored()
        return self.ENTRIES + (f", {stored}" if stored else "")


__all__ = ["GaussianNull"]
