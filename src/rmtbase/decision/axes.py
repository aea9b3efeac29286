"""The profile axes: one :class:`Axis` record per axis, in one registry.

Every list of axes (``AXES``, :data:`FACTOR_AXES`, :data:`DECISION_AXES`, figure scales,
``--sort-by``) is read from :data:`REGISTRY` (entry-point group ``rmtbase.axes``). Sources:

- ``"factors"``: ``fn(wq, wk, blocks)`` of a head's factors ``(..., d_h, d)`` in JAX, tested
  against the profile null of :mod:`rmtbase.scoring.profile.factors` (or the permutation null).
  Shipped only (the null draws each in its exact reduced law): :func:`register` refuses one.
- ``"statistic"``: a head statistic's value, effect, band and p (``statistic``, e.g.
  ``"qk.npr"``): its null is the statistic's own.
- ``"dataset"``: ``fn(ds)`` → (layer, head) values from variables ``requires`` of the scores;
  descriptive (``effect="value"``, no null).

``effect``: how the effect is read, ``"shift"`` (from the null median), ``"ratio"`` (to it) or
``"value"`` (no null); p is two-sided (:class:`rmtbase.decision.tails.TailModel`). ``decision``:
the axis enters the head decision as part of p_A (:mod:`rmtbase.decision.combined`; factor axes)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..errors import InputError
from ..registry import GROUPS, Registry, record_plugin

SOURCES = ("factors", "statistic", "dataset")
EFFECTS = ("value", "shift", "ratio")


@dataclass(frozen=True)
class Axis:
    """One profile axis (module docstring). ``needs``: the ``--stats`` choice that computes what
    it reads (None: any); ``figure``: its heatmap scale, (transform, vmin, vmax, colour map,
    colour-bar label) of :mod:`rmtbase.report.profile_figures`, or None for no panel."""

    name: str
    effect: str
    meaning: str
    source: str
    fn: Callable | None = None
    statistic: str | None = None
    requires: tuple[str, ...] = ()
    needs: str | None = None
    decision: bool = False
    figure: tuple | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise InputError(f"an axis name is an identifier, got {self.name!r}")
        if self.source not in SOURCES:
            raise InputError(f"axis {self.name}: source must be one of {', '.join(SOURCES)}, "
                             f"got {self.source!r}")
        if self.effect not in EFFECTS or (self.effect == "value") != (self.source == "dataset"):
            raise InputError(f"axis {self.name}: effect must be 'value' for a dataset axis and "
                             f"'shift' or 'ratio' otherwise, got {self.effect!r}")
        if (self.source == "statistic") != isinstance(self.statistic, str) or \
                (self.source != "statistic") != callable(self.fn):
            raise InputError(f"axis {self.name}: a statistic axis names its statistic, the "
                             "others give fn")
        if self.decision and self.source != "factors":
            raise InputError(f"axis {self.name}: only factor axes enter the head decision")
        if self.figure is not None and len(self.figure) != 5:
            raise InputError(f"axis {self.name}: figure is (transform, vmin, vmax, cmap, label)")

    def available(self, ds) -> bool:
        """Whether the scores ``ds`` hold what this axis reads (a factor axis: always)."""
        if self.source == "statistic":
            return ("stat" in ds.coords and self.statistic in ds["stat"].values
                    and "effect_size" in ds)
        return all(v in ds for v in self.requires)


#: Every profile axis by name, shipped ones first (entry-point group ``rmtbase.axes``).
def _check(name: str, axis) -> None:
    """What every axis not shipped passes, however registered (:func:`register`'s checks)."""
    if not isinstance(axis, Axis):
        raise TypeError(f"{axis!r} is not a rmtbase.decision.axes.Axis record")
    if axis.name != name:
        raise TypeError(f"axis {axis.name!r} registered under the name {name!r}")
    if axis.source == "factors":
        raise InputError(f"axis {axis.name}: a factor axis cannot be registered: the Gaussian "
                         "profile null draws each factor axis in its own reduced law and its "
                         "tables hold the shipped ones (rmtbase.scoring.profile.factors); give a "
                         "statistic or dataset axis")


REGISTRY: Registry = Registry("axis", GROUPS["axis"],
                              record_plugin(Axis, lambda a: register(a)), _check)


def register(axis: Axis) -> Axis:
    """Add a statistic or dataset ``axis`` (module docstring); InputError if its name is taken or
    it is a factor axis (those need an exact law in the profile null)."""
    if not isinstance(axis, Axis):
        raise TypeError(f"{axis!r} is not a rmtbase.decision.axes.Axis record")
    if REGISTRY.peek(axis.name) is not None:
        raise InputError(f"an axis named {axis.name!r} is already registered")
    return REGISTRY.register(axis.name, axis)


def unregister(name: str) -> None:
    """Take a registered axis out (a test's own); the shipped axes stay."""
    if name in _SHIPPED:
        raise InputError(f"the shipped axis {name!r} cannot be unregistered")
    REGISTRY.unregister(name)


class AxisField(Mapping):
    """A live view ``name -> get(axis)`` of the registered axes whose ``get`` is not None (an
    axis registered later, or by a plugin, is in it)."""

    def __init__(self, get: Callable):
        self._get = get

    def __getitem__(self, name):
        value = self._get(REGISTRY[name]) if name in REGISTRY else None
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self):
        return (n for n in REGISTRY if self._get(REGISTRY[n]) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return repr(dict(self))


def _alignment(wq, wk, blocks=False):
    from ..stats.alignment import alignment

    return alignment(wq, wk)


def _symmetry(wq, wk, blocks=False):
    from ..stats.alignment import symmetry

    return symmetry(wq, wk, blocks)


def _q_input_focus(wq, wk, blocks=False):
    from ..stats.alignment import input_focus

    return input_focus(wq)


def _k_input_focus(wq, wk, blocks=False):
    from ..stats.alignment import input_focus

    return input_focus(wk)


def _scale(ds):
    return ds["sigma_q"].values * ds["sigma_k"].values


def _outliers(ds):
    return ds["n_spikes"].values


_SHIPPED = (
    Axis("scale", "value", "rms(W_Q) rms(W_K); descriptive, the baseline of the other axes",
         "dataset", _scale, requires=("sigma_q", "sigma_k"),
         figure=("log10 value", -4.0, 0.0, "viridis", "log10 sigma_Q sigma_K")),
    Axis("concentration", "ratio", "qk.npr / null median: < 1, energy in fewer directions",
         "statistic", statistic="qk.npr", needs="spectral",
         figure=("log2 effect", -2.0, 2.0, "RdBu_r", "log2 NPR / null")),
    Axis("outliers", "value", "n_spikes: eigenvalues of W_QK above the null's largest (spectral "
                              "concentration, not a count of learned directions)",
         "dataset", _outliers, requires=("n_spikes",), needs="spectral",
         figure=("value", 0.0, 10.0, "magma_r", "n_spikes")),
    Axis("alignment", "shift", "<W_Q, W_K>/(|W_Q||W_K|) - null median: query and key read the "
                               "same residual directions",
         "factors", _alignment, decision=True,
         figure=("effect", -1.0, 1.0, "RdBu_r", "shift")),
    Axis("symmetry", "shift", "tr(W_QK^2)/|W_QK|^2 - null median: symmetric (+) or "
                              "directional (-)",
         "factors", _symmetry, decision=True, figure=("effect", -1.0, 1.0, "RdBu_r", "shift")),
    Axis("q_input_focus", "shift", "CV^2 of W_Q's column energies - null median: uneven reading "
                                   "of the residual stream",
         "factors", _q_input_focus, decision=True,
         figure=("effect", -0.5, 0.5, "RdBu_r", "shift")),
    Axis("k_input_focus", "shift", "CV^2 of W_K's column energies - null median",
         "factors", _k_input_focus, decision=True,
         figure=("effect", -0.5, 0.5, "RdBu_r", "shift")),
    Axis("entry_tails", "ratio", "beta_2 of W_K's entries / null median's (excess kurtosis + 3)",
         "statistic", statistic="k.excess_kurtosis", needs="elementwise",
         figure=("log2 effect", -2.0, 2.0, "RdBu_r", "log2 beta_2 / null")),
)
for _a in _SHIPPED:
    REGISTRY.register(_a.name, _a, shipped=True)
del _a

#: The shipped axes' names, in registry order (plugins' axes follow them in :data:`REGISTRY`).
SHIPPED_AXES = tuple(a.name for a in _SHIPPED)
#: The factor axes (shipped only: module docstring), in registry order.
FACTOR_AXES = tuple(a.name for a in _SHIPPED if a.source == "factors")
#: The axes that enter the head decision (p_A of :mod:`rmtbase.decision.combined`).
DECISION_AXES = tuple(a.name for a in _SHIPPED if a.decision)

__all__ = ["DECISION_AXES", "EFFECTS", "FACTOR_AXES", "REGISTRY", "SHIPPED_AXES", "SOURCES", "Axis",
           "AxisField", "register", "unregister"]
