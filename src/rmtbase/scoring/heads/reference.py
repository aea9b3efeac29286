"""The draws a null puts beside the heads: :class:`Cells` and the references a null returns.

:class:`Cells` carries the drawing machinery; the null chooses
(:meth:`rmtbase.stats.null_kind.Null.reference`):

- :class:`TableReference`: the Gaussian null at one storage for layers ``rows``: its table
  (:func:`rmtbase.baseline.cache.null_table`), joint draws and a spectral reference grown by
  :meth:`~TableReference.extend` (:mod:`rmtbase.scoring.stopping.rule`).
- :class:`PermutationReference`: each head's entries shuffled, grown per open head
  (:mod:`rmtbase.scoring.stopping.head_growth`).

A reference states its profile null (:meth:`Reference.profile_null`) and spectrum band."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace

import numpy as np

from ...decision.verdict import NOT_TESTED
from ..nulls.checks import undefined_under_null
from ..nulls.layer_null import baseline_attrs, is_spectral, null_arrays
from ..settings import NullStart


@dataclass(frozen=True)
class Cells:
    """The heads a reference is drawn for: (d, d_h), statistic kind and statistics tested, layer
    positions ``rows`` (None: all), factors (only if the null
    :attr:`~rmtbase.stats.null_kind.Null.needs_factors`), element draws per head,
    :class:`NullStart`, and ``heads`` (layers, heads per layer)."""

    d: int
    d_h: int
    kind: str
    tested: tuple
    rows: np.ndarray | None = None
    factors: list = field(default_factory=list)
    element_draws: int = 0
    start: NullStart = NullStart()
    heads: tuple = ()

    def at(self, rows) -> Cells:
        """These cells restricted to the layers ``rows``."""
        return replace(self, rows=np.asarray(rows, dtype=np.int64))

    def table_reference(self, null, *, draws, seed, progress) -> TableReference:
        """The tables of ``null`` (a Gaussian null with its storage set) for these cells."""
        from ...baseline.cache import TABLE_DRAWS, null_table

        kw = {"stats": self.kind, "seed": seed, "storage": null.storage_record,
              "progress": progress,
              "min_draws": max(TABLE_DRAWS if draws is None else int(draws), self.start.table)}
        table = null_table(self.d, self.d_h, **kw)
        ref = TableReference(null, self, table, null_arrays(table, self.tested, self.d, self.d_h),
                             seed=seed, progress=progress, draws=draws)
        return ref

    def permutation_reference(self, null, *, draws, seed, progress) -> PermutationReference:
        """Each head against its own entries shuffled (``null`` a per-head null)."""
        from ...baseline.cache import TABLE_DRAWS
        from ...stats.choice import chosen
        from ..nulls.permutation import permutation_draws

        n = TABLE_DRAWS if draws is None else int(draws)  # permutations per head
        n_el = self.element_draws if self.kind != "spectral" else 0
        joint = permutation_draws(self.factors, n, n_el, seed, self.kind, progress,
                                  statistics=chosen(self.tested))
        joint = {k: v for k, v in joint.items() if k in self.tested or k in NOT_TESTED}
        return PermutationReference(null, self, joint, draws=n,
                                    element_draws=int(n_el), seed=int(seed),
                                    fixed=draws is not None)


#: What :meth:`Reference.profile_null` returns to choose the Gaussian factor-axes null at each
#: layer's storage (:func:`rmtbase.scoring.profile.cache.cached_profile_null`), which then
#: enters the head decision beside the statistics (:mod:`rmtbase.decision.combined`).
GAUSSIAN_AXES = "the Gaussian factor-axes null at each layer's storage"


#: What :meth:`Reference.spectrum_band` returns to choose the Gaussian null's spectrum band
#: (:func:`rmtbase.scoring.measures.spectrum_band.null_spectrum_band`).
GAUSSIAN_BAND = "the Gaussian null's spectrum band"


class Reference(ABC):
    """Draws of a null for some layers: ``joint`` ({stat: draws} with "q.rms", "k.rms"), an
    optional larger ``spectral_null``; ``rows`` the layers (None: every layer). A subclass
    says its profile null (:meth:`profile_null`)."""

    #: whether the spectral reference is grown by the sequential rule (and the stop stated)
    sequential = False
    #: what its own profile draws are, after their count in the ``profile`` attr (when
    #: :meth:`profile_null` gives draws, not :data:`GAUSSIAN_AXES`)
    profile_draws = "draws of the null's own"

    def __init__(self, null, cells: Cells, joint: dict):
        self.null, self.cells, self.joint = null, cells, joint
        self.spectral_null = None

    @property
    def rows(self):
        return self.cells.rows

    @property
    def storage(self) -> str:
        return self.null.storage

    @property
    def spectral_ref(self) -> dict:
        return self.joint if self.spectral_null is None else self.spectral_null

    def undefined(self, names) -> dict:
        """{name: (finite, draws)} of statistics undefined under these draws (none here)."""
        return {}

    def drop(self, names) -> None:
        """Leave the statistics ``names`` out of the draws."""
        self.joint = {k: v for k, v in self.joint.items() if k not in names}

    def can_extend(self) -> bool:
        return False

    @abstractmethod
    def profile_null(self):
        """The profile's factor axes' null under this reference (module docstring): the
        :data:`GAUSSIAN_AXES` or ``{axis: (layer, head, draws)}`` of every layer scored."""

    def spectrum_band(self, n_draws: int, *, seed: int):
        """The spectrum figure's null band from ``n_draws`` draws: :data:`GAUSSIAN_BAND` for a null
        with :attr:`~rmtbase.stats.null_kind.Null.gaussian_spectrum_band`, else None; a reference
        with its own draws overrides it ((quantiles, d_h) of its self-normalised spectra)."""
        return GAUSSIAN_BAND if self.null.gaussian_spectrum_band else None

    @staticmethod
    def attrs(refs, layer_ids, max_draws) -> dict:
        """``scores.nc`` attributes describing the references ``refs`` (all of one class)."""
        return {}


class TableReference(Reference):
    """The Gaussian null at one storage for the layers stored alike (module docstring)."""

    sequential = True

    def __init__(self, null, cells, table, joint, *, seed, progress, draws):
        super().__init__(null, cells, joint)
        self.table, self.seed, self.progress = table, seed, progress
        self.min_draws = draws

    def undefined(self, names) -> dict:
        return undefined_under_null(self.joint, names)

    def spectral(self, names, n) -> dict:
        """Spectral draws of ``names`` at this storage (at least ``n``; a larger stored
        table is used whole)."""
        from ...baseline.cache import null_table

        c = self.cells
        table = null_table(c.d, c.d_h, stats="spectral", min_draws=n, seed=self.seed,
                           storage=self.null.storage_record, progress=self.progress)
        return null_arrays(table, names, c.d, c.d_h)

    def start_spectral(self, names) -> None:
        """The larger spectral reference (at least
        :data:`~rmtbase.baseline.sweep_cache.SPECTRAL_REFERENCE_DRAWS`, and the cells' start) of
        ``names``, with element statistics in the table (not for a spectral-only table, whose
        own draws serve)."""
        from ...baseline.sweep_cache import SPECTRAL_REFERENCE_DRAWS

        if names and self.cells.kind != "spectral":
            self.spectral_null = self.spectral(names, max(int(self.min_draws or 0),
                                                          SPECTRAL_REFERENCE_DRAWS,
                                                          self.cells.start.spectral))

    def can_extend(self) -> bool:
        from ...baseline.table_contents import fast_spectral

        return fast_spectral("spectral", self.null.ensemble, self.null.storage_record)

    def profile_null(self):
        """The Gaussian factor-axes null at each layer's storage (:data:`GAUSSIAN_AXES`)."""
        return GAUSSIAN_AXES

    def extend(self, names, n) -> int:
        """Grow the spectral reference of ``names`` to ``n`` draws; returns the draws got."""
        more = self.spectral(names, n)
        if self.spectral_null is None:
            self.joint = more
        else:
            self.spectral_null = more
        return int(np.asarray(more["q.rms"]).size)

    @staticmethod
    def attrs(refs, layer_ids, max_draws) -> dict:
        out = baseline_attrs(refs, layer_ids)
        spectral = [g.spectral_null for g in refs if g.spectral_null is not None]
        if spectral:
            out["spectral_null_draws"] = int(min(r["q.rms"].size for r in spectral))
        if max_draws is not None:
            out["max_draws"] = int(max_draws)
        return out


class PermutationReference(Reference):
    """Each head's own entries shuffled, every layer at once (module docstring)."""

    profile_draws = "permutations of each head's own entries"

    def __init__(self, null, cells, joint, *, draws, element_draws, seed, fixed=True):
        super().__init__(null, cells, joint)
        self.draws, self.element_draws, self.seed = draws, element_draws, seed
        #: draws given by the caller: never grown; else each head's draws are multiplied
        #: while its decision is open (:mod:`rmtbase.scoring.stopping.head_growth`), ``factor`` per head
        self.fixed, self.factor = bool(fixed), None

    def profile_null(self):
        """Each head's own entries shuffled, the spectral draws' permutations."""
        from ..profile.axes import permutation_profile_null

        per_layer = [permutation_profile_null(wq, wk, self.draws, self.seed)
                     for wq, wk in self.cells.factors]
        return {a: np.stack([x[a] for x in per_layer]) for a in per_layer[0]}

    @staticmethod
    def attrs(refs, layer_ids, max_draws) -> dict:
        r = refs[0]
        return {"permutation_draws": r.draws, "permutation_element_draws": r.element_draws,
                "permutation_seed": r.seed}


def drawn_reference(null, cells, storage, **kw):
    """``null.reference(cells, storage, **kw)``, checked: a plugin's null that raises, or returns
    other than a :class:`~rmtbase.scoring.heads.reference.Reference` whose draws hold every
    statistic tested, each ``(draws,)`` or ``(layers, heads, draws)`` of these cells, is one
    :class:`rmtbase.registry.PluginError` line naming it. A null (any) whose draws leave every
    statistic tested undefined (fewer than 2 finite draws each) is refused, naming it."""
    from ...errors import InputError
    from ...registry import plugin_call
    from ...stats.null_registry import REGISTRY

    shipped = REGISTRY.shipped(null.name) and REGISTRY.peek(null.name) is type(null)
    rows = cells.heads[0] if cells.rows is None else len(cells.rows)
    heads = cells.heads[1] if len(cells.heads) > 1 else None
    names = list(cells.tested)

    def check(ref):
        if not isinstance(ref, Reference):
            return f"a {type(ref).__name__}, not a rmtbase.extend.Reference"
        joint = getattr(ref, "joint", None)
        if not isinstance(joint, dict):
            return f"a reference whose joint is a {type(joint).__name__}, not {{statistic: draws}}"
        missing = [k for k in (*names, "q.rms", "k.rms") if k not in joint]
        if missing:
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            return f"draws without {', '.join(missing[:3])}{more}"
        for k in names:
            shape = np.shape(joint[k])
            if not (len(shape) == 1 or shape[:-1] == (rows, heads)):
                return (f"draws of {k} of shape {shape}: draws are (draws,) shared by the heads "
                        f"or (layers, heads, draws) = ({rows}, {heads}, draws)")
        return None

    ref = (null.reference(cells, storage, **kw) if shipped else
           plugin_call(REGISTRY, null.name, "reference()", null.reference, cells, storage,
                       check=check, **kw))
    if names and all(int(np.isfinite(np.asarray(ref.joint[k], dtype=float)).sum()) < 2
                     for k in names if k in ref.joint):
        raise InputError(f"the {null.name} null leaves every statistic undefined: none of the "
                         f"{len(names)} statistics tested has two finite draws at "
                         f"{getattr(storage, 'name', storage)} ({type(null).__module__}."
                         f"{type(null).__qualname__}); refused")
    return ref


def spectral_names(tested) -> list[str]:
    """The spectral statistics among ``tested``."""
    return [k for k in tested if is_spectral(k)]


__all__ = ["GAUSSIAN_AXES", "GAUSSIAN_BAND", "Cells", "NullStart", "PermutationReference",
           "Reference", "TableReference", "drawn_reference", "spectral_names"]
