"""Which statistics a score computes: the shipped ones (:data:`.statistic.STATISTICS`) unless
more are named, a plugin's or an optional shipped one (:func:`optional`), so that installing or
shipping a statistic never changes a default score."""

from __future__ import annotations

from .heavy_tail import HEAVY_TAIL
from .statistic import REGISTRY, STATISTICS, Statistic


def named(names) -> tuple[Statistic, ...]:
    """The plugins' and optional statistics among ``names`` (bare or ``"<matrix>.<stat>"``;
    others ignored): a default set is :data:`STATISTICS`, these join only when named."""
    if names is None or isinstance(names, str):
        names = () if names in (None, "all", "spectral", "elementwise") else (names,)
    bare = dict.fromkeys(n.split(".", 1)[-1] for n in names if isinstance(n, str))
    opt = optional()
    for n in bare:  # an optional statistic is registered (as rmtbase's own) when first named
        if n in opt and REGISTRY.peek(n) is None:
            REGISTRY.register(n, opt[n], shipped=True)
    return tuple(REGISTRY[n] for n in bare
                 if n in REGISTRY and (n in opt or not REGISTRY.shipped(n)))


def optional() -> dict[str, Statistic]:
    """Shipped statistics that join a score only when named, their names reserved in the
    registry (:data:`.statistic.OPTIONAL_NAMES`): WeightWatcher's metrics of each head's
    spectrum (:data:`.heavy_tail.HEAVY_TAIL`)."""
    return {s.name: s for s in HEAVY_TAIL}


def chosen(names) -> tuple[Statistic, ...] | None:
    """:data:`STATISTICS` and :func:`named` ``names``; None (the shipped) where none is named."""
    more = named(names)
    return STATISTICS + more if more else None


__all__ = ["chosen", "named", "optional"]
