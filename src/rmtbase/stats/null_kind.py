"""The null a head is scored against, as one value: :class:`GaussianNull` or
:class:`PermutationNull` (``shared/design.md``: a null is a value — how its draws are made, what
it tests, how it is described).

- ``GaussianNull(storage="float32")``: W_Q, W_K with i.i.d. N(0, σ²) entries at the head's own
  (d, d_h, σ_Q, σ_K), put through ``storage``'s round trip
  (:func:`rmtbase.stats.precision.round_trip`); its draws come from tables shared by every head
  of one shape and storage (:func:`rmtbase.baseline.cache.null_table`). It tests the entry law
  too: the W_Q/W_K element statistics enter the decision. ``storage`` stays the name (its
  repr, equality and files); :attr:`Null.storage_record`, the record looked up once when the
  null is made (or the record it was given), is what callers read the storage's behaviour from.
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
``score_model(null=...)`` and ``composition(null=...)``, a file's ``null_kind`` attr), and the
value is passed on: the functions below (``in_family``, the null checks, the null's
description, composition) take the :class:`Null`.

One registry, filled by the classes themselves (issue 58; gguf-py's quantisation classes
register through ``__init_subclass__`` the same way): a concrete subclass that sets its own
:attr:`Null.name` is registered under it when it is defined, in a user's script as in this
module, and :meth:`Null.parse`, :data:`NULLS` (the CLI's ``--null`` choices, a live view) and
the re-read of a file's ``null_kind`` all look it up there. An abstract subclass, or one that
keeps its parent's name (a variant such as a test's), is not registered; a second class with a
registered name is refused (TypeError); :func:`unregister` takes a name out (for tests).

A null carries its behaviour, as numpyro's ``Distribution`` does: its draws
(:meth:`Null.reference`, whose :class:`~rmtbase.scoring.reference.Reference` says its own
profile null: no Gaussian default), what it tests (:attr:`Null.tests_entry_law`,
:meth:`Null.enters`) and its capabilities as attributes, read instead of asking which class it
is: :attr:`Null.per_head`, :attr:`Null.min_element_draws`, :attr:`Null.stored_like_checkpoint`
(its draws put through each layer's storage, :meth:`Null.at_storage`),
:attr:`Null.scores_components` (``--components``), :attr:`Null.scores_deltas` (``--base``) and
:attr:`Null.composition_draws` (a head-pair composition null,
:meth:`Null.composition_null`; 0: none). What a null lacks is refused up front, before any
work, with the capability named (:meth:`Null.require`).

The value sits in ``stats`` (beside :mod:`rmtbase.stats.precision`, whose storage names a
Gaussian null carries), the lowest part that every user may import: the decision
(:func:`rmtbase.decision.family.in_family`, :mod:`rmtbase.decision.verdict`), the baseline
tables, the scoring and the CLI.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import ClassVar

from ..errors import InputError
from .names import STORAGES
from .null_registry import REGISTRY, Names, is_abstract
from .storage import Storage, storage_record


class _StorageRecord:
    """:attr:`Null.storage_record` of a null that does not set its own: the record of its
    ``storage`` name, looked up when read (a non-data descriptor, so an instance's own value,
    set once at construction as :class:`GaussianNull` does, wins)."""

    def __get__(self, obj, owner=None) -> Storage:
        return storage_record((owner if obj is None else obj).storage)


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
    #: the storage its draws are put through (float32: none; a null stored like the
    #: checkpoint has it as a field and is set to each layer's, :meth:`at_storage`)
    storage: ClassVar[str] = "float32"
    #: the record of :attr:`storage` (:class:`rmtbase.stats.storage.Storage`): callers read
    #: the storage's behaviour from it, not from the name. :class:`GaussianNull` looks it up
    #: once, when made; a null that does not set it has its storage's looked up when read
    storage_record = _StorageRecord()
    #: whether its draws are put through each layer's own storage (its description then
    #: names the storage per layer, :mod:`rmtbase.scoring.description`, from its ``ENTRIES``
    #: and :meth:`at_storage`'s ``stored_as()``, as :class:`GaussianNull` has them)
    stored_like_checkpoint: ClassVar[bool] = False
    #: whether ``--components``' whole-matrix null (i.i.d. Gaussian matrices of each matrix's
    #: shape and storage, :mod:`rmtbase.scoring.components`) is this null's
    scores_components: ClassVar[bool] = False
    #: whether ``--base`` (a fine-tune's dW_Q, dW_K against i.i.d. Gaussian deltas,
    #: :mod:`rmtbase.scoring.delta`) is scored under this null
    scores_deltas: ClassVar[bool] = False
    #: default draws of its head-pair composition null (:meth:`composition_null`); 0: it has
    #: none, and composition is refused up front
    composition_draws: ClassVar[int] = 0

    def __init_subclass__(cls, **kw):
        """Register a concrete subclass that sets its own :attr:`name` (module docstring)."""
        super().__init_subclass__(**kw)
        name = cls.__dict__.get("name")
        if not name or is_abstract(cls):
            return
        if not isinstance(name, str):
            raise TypeError(f"{cls.__qualname__}.name must be a str, got {name!r}")
        if name in REGISTRY:
            raise TypeError(f"a null named {name!r} is already registered "
                            f"({REGISTRY[name].__module__}.{REGISTRY[name].__qualname__})")
        REGISTRY[name] = cls

    @staticmethod
    def parse(text, *, storage: str = "float32") -> Null:
        """The null spelled ``text`` (a registered name, :data:`NULLS`); a :class:`Null` is
        returned as it is. ``storage``: that of a null stored like the checkpoint
        (:meth:`named`). InputError (one line) otherwise."""
        if isinstance(text, Null):
            return text
        cls = REGISTRY.get(text) if isinstance(text, str) else None
        if cls is None:
            raise InputError(f"null must be one of {', '.join(NULLS)}, got {text!r}")
        return cls.named(storage=storage)

    @classmethod
    def named(cls, *, storage: str = "float32") -> Null:
        """The null of this class spelled by its name alone (:meth:`parse`): ``cls()``; a null
        stored like the checkpoint is given ``storage``."""
        return cls()

    def at_storage(self, storage) -> Null:
        """This null with its draws put through ``storage`` (a layer's: a name or a record of
        :mod:`rmtbase.stats.storage`); itself when the storage plays no part (not
        :attr:`stored_like_checkpoint`)."""
        return self

    def require(self, capability: str, what: str) -> None:
        """InputError (one line), before any work, if this null lacks ``capability`` (the name
        of a boolean or count attribute, e.g. ``"scores_components"``) that ``what`` needs."""
        if not getattr(self, capability):
            raise InputError(f"{what} needs a null with {capability}; the {self.name} null has "
                             f"none ({type(self).__name__}.{capability} = "
                             f"{getattr(self, capability)!r})")

    def composition_null(self, pairs, *, draws: int, seed: int):
        """The head-pair composition null of ``pairs``
        (:class:`rmtbase.scoring.composition_pairs.Pairs`, which carries the drawing machinery
        as :class:`~rmtbase.scoring.reference.Cells` does for :meth:`reference`): a
        :class:`rmtbase.scoring.composition_pairs.PairNull`. A null with
        :attr:`composition_draws` > 0 implements it."""
        self.require("composition_draws", "composition")
        raise NotImplementedError(f"{type(self).__name__} sets composition_draws but has no "
                                  "composition_null")

    def composition_label(self, null_storage: str) -> str:
        """How a composition report names this null (``null_storage``: that of the file)."""
        return self.description()

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
    stored_like_checkpoint: ClassVar[bool] = True
    scores_components: ClassVar[bool] = True
    scores_deltas: ClassVar[bool] = True
    #: default draws of the Gaussian-factor composition null (exact law, reduced sampler),
    #: sized by its own error as the statistics' joint null (issue 56: the realised size of
    #: p <= 0.05, shared by every model of a shape, has sd sqrt(0.05 * 0.95 / N), at most a
    #: quarter of a 1,000-pair binomial se from N >= 16,000; rmtbase.scoring.joint_stopping.
    #: needed_draws; tests/test_pvalue_composition_size.py). 2,000 before.
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

    def reference(self, cells, storage: str, *, draws, seed: int, progress: bool):
        """The tables at ``storage`` (this null with its storage set), shared by the layers
        stored alike; the spectral reference grows sequentially
        (:class:`rmtbase.scoring.reference.TableReference`)."""
        return cells.table_reference(self.at_storage(storage), draws=draws, seed=seed,
                                     progress=progress)

    def composition_null(self, pairs, *, draws: int, seed: int):
        """Independent Gaussian factors at each head's shapes, stored at the pairs' float
        storage (:meth:`rmtbase.scoring.composition_pairs.Pairs.gaussian_factors`)."""
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
    #: default draws of the composition permutation null (each costs the run's GEMMs again)
    composition_draws: ClassVar[int] = 1000

    def reference(self, cells, storage: str, *, draws, seed: int, progress: bool):
        """Each head's own entries shuffled, ``draws`` (default 1000) spectral permutations
        per head (:class:`rmtbase.scoring.reference.PermutationReference`); the storage
        plays no part."""
        return cells.permutation_reference(self, draws=draws, seed=seed, progress=progress)

    def composition_null(self, pairs, *, draws: int, seed: int):
        """Each factor's own entries shuffled
        (:meth:`rmtbase.scoring.composition_pairs.Pairs.permuted_entries`)."""
        return pairs.permuted_entries(draws=draws, seed=seed)

    def composition_label(self, null_storage: str) -> str:
        return "permutation (each factor's entries shuffled)"

    def description(self) -> str:
        return ("each head's own entries, shuffled: W_Q and W_K each permuted uniformly at "
                "random and independently (tests structure beyond the entry law; element "
                "statistics of W_Q and W_K left out)")


#: The nulls by name, in the order the CLI lists them (the registry's, module docstring).
NULLS = Names()


def unregister(name: str) -> None:
    """Take the null named ``name`` out of the registry (a test's own null, after the test);
    the shipped nulls stay. KeyError if none is registered under it."""
    if name in (GaussianNull.name, PermutationNull.name):
        raise InputError(f"the shipped null {name!r} cannot be unregistered")
    del REGISTRY[name]


__all__ = ["NULLS", "GaussianNull", "Null", "PermutationNull", "unregister"]
