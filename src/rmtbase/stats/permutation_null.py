"""The permutation null (:class:`PermutationNull`, a :class:`rmtbase.stats.null_protocol.Null`):
each head against its own entries shuffled (:mod:`rmtbase.scoring.nulls.permutation`), W_QK element
statistics from ``element_draws`` permutations. It tests structure beyond the entry law (W_Q/W_K
element statistics left out). Registered as ``"permutation"``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .null_protocol import Null
from .storage import Storage


@dataclass(frozen=True)
class PermutationNull(Null):
    """Each head's own entries shuffled (:mod:`rmtbase.scoring.nulls.permutation`)."""

    name: ClassVar[str] = "permutation"
    tests_entry_law: ClassVar[bool] = False
    draws_per_head: ClassVar[bool] = True
    needs_factors: ClassVar[bool] = True
    shared_table: ClassVar[bool] = False
    #: the spectrum figure's band and the QK-overlap test are the Gaussian null's: the
    #: self-normalised spectrum of a product of factors with i.i.d. entries of finite variance
    #: has the Gaussian product's limit law (universality of MP⊠MP, Burda et al. 2010), and
    #: the overlap's permutation null would cost the run's GEMMs per draw
    gaussian_spectrum_band: ClassVar[bool] = True
    gaussian_qk_overlap: ClassVar[bool] = True
    #: Fewest permutations with W_QK element statistics the permutation null can decide on:
    #: the per-head calibration (rmtbase.decision.omnibus) uses only draws where every
    #: statistic is defined, and needs 20 of them.
    min_element_draws: ClassVar[int] = 20
    #: default draws of the composition permutation null (each costs the run's GEMMs again)
    composition_draws: ClassVar[int] = 1000

    def reference(self, cells, storage: Storage, *, draws, seed: int, progress: bool):
        """Each head's own entries shuffled, ``draws`` spectral permutations per head
        (:class:`rmtbase.scoring.heads.reference.PermutationReference`); storage plays no part."""
        return cells.permutation_reference(self, draws=draws, seed=seed, progress=progress)

    def draws_storage(self, storage: Storage) -> Storage:
        """The layer's own: a permutation of a head's stored entries is stored as they are."""
        return storage

    def composition_null(self, pairs, *, draws: int, seed: int):
        """Each factor's own entries shuffled
        (:meth:`rmtbase.scoring.composition.pairs.Pairs.permuted_entries`)."""
        return pairs.permuted_entries(draws=draws, seed=seed)

    def composition_label(self, null_storage: str) -> str:
        return "permutation (each factor's entries shuffled)"

    def description(self) -> str:
        return ("each head's own entries, shuffled: W_Q and W_K each permuted uniformly at "
                "random and independently (tests structure beyond the entry law; element "
                "statistics of W_Q and W_K left out)")


__all__ = ["PermutationNull"]
