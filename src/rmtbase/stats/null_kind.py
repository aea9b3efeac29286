"""The null a head is scored against, as one value: :class:`GaussianNull` or
:class:`PermutationNull` (``shared/design.md``: a null is a value — how its draws are made, what
it tests, how it is described).

- ``GaussianNull(storage="float32")``: W_Q, W_K with i.i.d. N(0, σ²) entries at the head's own
  (d, d_h, σ_Q, σ_K), put through ``storage``'s round trip
  (:func:`rmtbase.stats.precision.round_trip`); its draws come from tables shared by every head
  of one shape and storage (:func:`rmtbase.baseline.cache.null_table`). It tests the entry law
  too: the W_Q/W_K element statistics enter the decision.
- ``PermutationNull()``: each head against its own entries shuffled
  (:mod:`rmtbase.scoring.permutation`); draws are made per head, the W_QK element statistics
  from ``element_draws`` permutations (at least :attr:`PermutationNull.min_element_draws`). It
  tests structure beyond the entry law: W_Q/W_K element statistics are left out.

A null owns its reference: :meth:`Null.reference` returns the draws the heads are compared
with, and :class:`Null` is abstract (a null class without ``reference`` cannot be constructed).
The drawing machinery (tables, permutations) sits above ``stats``, so ``reference`` is handed
the cells to score (:class:`rmtbase.scoring.reference.Cells`) and picks from what they can draw;
a null with draws of its own returns any :class:`rmtbase.scoring.reference.Reference`.

The values are frozen and hashable; ``str(null)`` and :attr:`Null.name` are the spelling of
the CLI (``--null``), of ``score_model(null=...)`` and of the files (``null_kind`` attr).
The text is parsed once, where it enters (:meth:`Null.parse`: the CLI's ``--null``, the public
``score_model(null=...)``, a file's ``null_kind`` attr), and the value is passed on: the functions
below (``in_family``, the null checks, the null's description) take the :class:`Null`.

The value sits in ``stats`` (beside :mod:`rmtbase.stats.precision`, whose storage names a
Gaussian null carries), the lowest part that every user may import: the decision
(:func:`rmtbase.decision.family.in_family`, :mod:`rmtbase.decision.verdict`), the baseline
tables, the scoring and the CLI.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from ..errors import InputError
from .names import STORAGES

#: How the text names the entry-law group of statistics (:data:`rmtbase.decision.family.GROUPS`).
ENTRY_LAW = "entry law"


@dataclass(frozen=True)
class Null(ABC):
    """A null (module docstring). Subclasses set the class attributes and implement
    :meth:`reference` and :meth:`description`."""

    #: the spelling of the CLI, of ``score_model(null=...)`` and of the files
    name: ClassVar[str] = ""
    #: whether the entry law is tested (the ``entry law`` statistics enter the decision)
    tests_entry_law: ClassVar[bool] = True
    #: whether the draws are made from each head's own entries (no shared table)
    per_head: ClassVar[bool] = False
    #: fewest element draws per head with element statistics (0: none are drawn per head)
    min_element_draws: ClassVar[int] = 0

    @staticmethod
    def parse(text, *, storage: str = "float32") -> Null:
        """The null spelled ``text`` (:data:`NULLS`); a :class:`Null` is returned as it is.
        ``storage``: that of a Gaussian null. InputError (one line) otherwise."""
        if isinstance(text, Null):
            return text
        if text == GaussianNull.name:
            return GaussianNull(storage)
        if text == PermutationNull.name:
            return PermutationNull()
        raise InputError(f"null must be one of {', '.join(NULLS)}, got {text!r}")

    def enters(self, group: str) -> bool:
        """Whether the statistics of ``group`` (``"entry law"``, ``"product law"``,
        ``"spectrum"``) enter a head's decision under this null."""
        return self.tests_entry_law or group != ENTRY_LAW

    def needs_element_draws(self, kind: str) -> bool:
        """Whether scoring statistics of ``kind`` (``"all"``, ``"spectral"``,
        ``"elementwise"``) needs element draws per head (:attr:`min_element_draws` of them)."""
        return self.min_element_draws > 0 and kind != "spectral"

    @abstractmethod
    def reference(self, cells, storage: str, *, draws, seed: int, progress: bool):
        """The draws of this null for ``cells`` (:class:`rmtbase.scoring.reference.Cells`: the
        layers stored alike at ``storage``), a :class:`rmtbase.scoring.reference.Reference`;
        ``draws``: at least this many (None: the null's default), ``seed``: its seed."""

    @abstractmethod
    def description(self) -> str:
        """One sentence saying what the null assumes."""

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class GaussianNull(Null):
    """i.i.d. N(0, σ²) entries at the head's own (d, d_h, σ_Q, σ_K), stored at ``storage``."""

    name: ClassVar[str] = "gaussian"
    tests_entry_law: ClassVar[bool] = True
    per_head: ClassVar[bool] = False
    #: the ensemble its draws come from (:mod:`rmtbase.ensembles`): W_Q, W_K i.i.d. Gaussian
    #: factors of shape (d_h, d), so W_QK has rank d_h ("lowrank", not the full-rank d x d
    #: Ginibre matrix of ensemble "ginibre")
    ensemble: ClassVar[str] = "lowrank"
    #: what the entries are, before the storage (the start of every description)
    ENTRIES: ClassVar[str] = ("i.i.d. N(0, sigma^2) entries at each head's own "
                              "(d, d_h, sigma_Q, sigma_K)")

    storage: str = "float32"

    def __post_init__(self):
        if not isinstance(self.storage, str) or self.storage not in STORAGES:
            raise InputError(f"storage must be one of {', '.join(STORAGES)}, "
                             f"got {self.storage!r}")

    def reference(self, cells, storage: str, *, draws, seed: int, progress: bool):
        """The tables at ``storage`` (this null with its storage set), shared by the layers
        stored alike; the spectral reference grows sequentially
        (:class:`rmtbase.scoring.reference.TableReference`)."""
        return cells.table_reference(GaussianNull(storage), draws=draws, seed=seed,
                                     progress=progress)

    def stored(self) -> str:
        """How the draws are stored, as a clause: "" for float32, "rounded to float16 like the
        checkpoint", "passed through the q4_k block quantiser like the checkpoint"."""
        return {"float32": "", "float16": "rounded to float16 like the checkpoint",
                "bfloat16": "rounded to bfloat16 like the checkpoint"}.get(
            self.storage, f"passed through the {self.storage} block quantiser like the "
                          "checkpoint")

    def stored_as(self) -> str:
        """The storage in a list of layers: "float32", "rounded to float16", "passed through
        the q4_k block quantiser"."""
        return self.stored().removesuffix(" like the checkpoint") or "float32"

    def description(self) -> str:
        """One sentence: the entries and how they are stored."""
        stored = self.stored()
        return self.ENTRIES + (f", {stored}" if stored else "")


@dataclass(frozen=True)
class PermutationNull(Null):
    """Each head's own entries shuffled (:mod:`rmtbase.scoring.permutation`)."""

    name: ClassVar[str] = "permutation"
    tests_entry_law: ClassVar[bool] = False
    per_head: ClassVar[bool] = True
    #: Fewest permutations with W_QK element statistics the permutation null can decide on:
    #: the per-head calibration (rmtbase.decision.omnibus) uses only draws where every
    #: statistic is defined, and needs 20 of them.
    min_element_draws: ClassVar[int] = 20

    def reference(self, cells, storage: str, *, draws, seed: int, progress: bool):
        """Each head's own entries shuffled, ``draws`` (default 1000) spectral permutations
        per head (:class:`rmtbase.scoring.reference.PermutationReference`); the storage
        plays no part."""
        return cells.permutation_reference(self, draws=draws, seed=seed, progress=progress)

    def description(self) -> str:
        return ("each head's own entries, shuffled: W_Q and W_K each permuted uniformly at "
                "random and independently (tests structure beyond the entry law; element "
                "statistics of W_Q and W_K left out)")


#: The nulls by name, in the order the CLI lists them.
NULLS = (GaussianNull.name, PermutationNull.name)

__all__ = ["NULLS", "GaussianNull", "Null", "PermutationNull"]
