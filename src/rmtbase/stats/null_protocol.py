"""The null protocol: :class:`Null`, the abstract base of every null (a value).

- A null owns its draws: abstract :meth:`Null.reference` maps
  :class:`rmtbase.scoring.heads.reference.Cells` to a
  :class:`rmtbase.scoring.heads.reference.Reference`.
- Values are frozen and hashable; :attr:`Null.name` (``str(null)``) is the spelling of ``--null``,
  ``score_model(null=...)`` and ``null_kind``; text is parsed by :meth:`Null.parse`.
- A concrete subclass setting its own :attr:`Null.name` is registered when defined; a taken name
  raises TypeError.
- Needs and offers are class attributes, one question each; what a null lacks is refused before any
  work, in one line naming the attribute (:meth:`Null.require`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from ..errors import InputError
from .null_registry import NULLS, REGISTRY, is_abstract
from .storage import Storage, storage_record


class _StorageRecord:
    """:attr:`Null.storage_record` from the ``storage`` name, looked up when read (a non-data
    descriptor: an instance's own value wins)."""

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
    #: whether each head is compared with draws of its own (made for that head alone), not
    #: with draws shared by the heads of one shape and storage; its references are asked once
    #: for every layer scored, and its draws may grow per head
    draws_per_head: ClassVar[bool] = False
    #: whether :meth:`reference` is handed the heads' factors (``cells.factors``: per layer
    #: ``(wq, wk)``, each ``(heads, d_h, d)``); else the factors are not kept for it
    needs_factors: ClassVar[bool] = False
    #: whether its draws form one table per shape and storage shared by the heads, which a
    #: collection may grow in common (an entry behind another of its shape is re-scored from
    #: the larger sizes, :class:`rmtbase.scoring.heads.reference.NullStart`)
    shared_table: ClassVar[bool] = True
    #: whether the spectrum figure's band of the Gaussian null
    #: (:func:`rmtbase.scoring.measures.spectrum_band.null_spectrum_band`) is this null's band; else
    #: its reference draws its own (:meth:`rmtbase.scoring.heads.reference.Reference.spectrum_band`)
    #: or the scores have none
    gaussian_spectrum_band: ClassVar[bool] = False
    #: whether composition's within-layer QK-overlap test against independent Gaussian factors
    #: (:mod:`rmtbase.scoring.composition.overlap`) is the test under this null; composition
    #: is refused up front for a null without it
    gaussian_qk_overlap: ClassVar[bool] = False
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
    #: shape and storage, :mod:`rmtbase.scoring.matrices.components`) is this null's
    scores_components: ClassVar[bool] = False
    #: whether ``--base`` (a fine-tune's dW_Q, dW_K against i.i.d. Gaussian deltas,
    #: :mod:`rmtbase.scoring.matrices.delta`) is scored under this null
    scores_deltas: ClassVar[bool] = False
    #: default draws of its head-pair composition null (:meth:`composition_null`); 0: it has
    #: none, and composition is refused up front
    composition_draws: ClassVar[int] = 0

    def __init_subclass__(cls, **kw):
        """Register a concrete subclass setting its own :attr:`name`; a ``per_head`` subclass
        answers the three questions from it where it does not itself."""
        super().__init_subclass__(**kw)
        if "per_head" in cls.__dict__:
            one = bool(cls.__dict__["per_head"])
            for attr, value in (("draws_per_head", one), ("needs_factors", one),
                                ("shared_table", not one)):
                if attr not in cls.__dict__:
                    setattr(cls, attr, value)
            delattr(cls, "per_head")  # the property derives it again
        name = cls.__dict__.get("name")
        if not name or is_abstract(cls):
            return
        if not isinstance(name, str):
            raise TypeError(f"{cls.__qualname__}.name must be a str, got {name!r}")
        old = REGISTRY.peek(name)  # not a lookup: no plugin is loaded while classes are defined
        if old is not None:
            raise TypeError(f"a null named {name!r} is already registered "
                            f"({old.__module__}.{old.__qualname__})")
        REGISTRY.register(name, cls, shipped=cls.__module__.startswith("rmtbase."))

    @property
    def per_head(self) -> bool:
        """:attr:`draws_per_head` (compatibility name; see :meth:`__init_subclass__`)."""
        return self.draws_per_head

    @staticmethod
    def parse(text, *, storage: str = "float32") -> Null:
        """The null spelled ``text`` (:data:`NULLS`), or a :class:`Null` as it is; ``storage`` as in
        :meth:`named`. InputError (one line) otherwise."""
        if isinstance(text, Null):
            return text
        cls = REGISTRY.get(text) if isinstance(text, str) else None
        if cls is None:
            raise InputError(REGISTRY.unknown(text, f"null must be one of {', '.join(NULLS)}, "
                                                    f"got {text!r}"))
        return cls.named(storage=storage)

    @classmethod
    def named(cls, *, storage: str = "float32") -> Null:
        """The null of this class spelled by its name alone (:meth:`parse`): ``cls()``; a null
        stored like the checkpoint is given ``storage``."""
        return cls()

    def at_storage(self, storage) -> Null:
        """This null with its draws put through ``storage`` (name or record); itself unless
        :attr:`stored_like_checkpoint`."""
        return self

    def draws_storage(self, storage: Storage) -> Storage:
        """The storage this null's draws are at for a layer whose null storage is ``storage``
        (a record), as the null declares it: ``storage`` for a null
        :attr:`stored_like_checkpoint`, else its own :attr:`storage_record`. The files label
        the draws with it (``null_storage``), never with the checkpoint's alone."""
        return storage if self.stored_like_checkpoint else self.storage_record

    def require(self, capability: str, what: str) -> None:
        """InputError (one line), before any work, if this null lacks ``capability`` (the name
        of a boolean or count attribute, e.g. ``"scores_components"``) that ``what`` needs."""
        if not getattr(self, capability):
            raise InputError(f"{what} needs a null with {capability}; the {self.name} null has "
                             f"none ({type(self).__name__}.{capability} = "
                             f"{getattr(self, capability)!r})")

    def composition_null(self, pairs, *, draws: int, seed: int):
        """The :class:`rmtbase.scoring.composition.pairs.PairNull` of ``pairs``
        (:class:`rmtbase.scoring.composition.pairs.Pairs`); implemented when
        :attr:`composition_draws` > 0."""
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
    def reference(self, cells, storage: Storage, *, draws, seed: int, progress: bool):
        """The draws for ``cells`` (:class:`rmtbase.scoring.heads.reference.Cells`), a
        :class:`rmtbase.scoring.heads.reference.Reference`; ``draws``: at least this many (None: default).
        """

    @abstractmethod
    def description(self) -> str:
        """One sentence saying what the null assumes."""

    def __str__(self) -> str:
        return self.name


__all__ = ["ENTRY_LAW", "Null"]
