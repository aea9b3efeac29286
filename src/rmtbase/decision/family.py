"""Which statistics are tested, what each tests, and which enter a head's decision once.

Groups (``docs/statistics.md``): ``entry law`` (``q.*``, ``k.*``, ``w.*`` element statistics),
``product law`` (W_QK's), ``spectrum``. Duplicates (:data:`DUPLICATES`) enter the BH family and
the omnibus once, through their representative; under GQA only a group's first query head
carries the shared ``k.*`` tests (:func:`stat_family_mask`)."""

from __future__ import annotations

import numpy as np

from ..stats.gaussian_null import GaussianNull
from ..stats.null_protocol import Null
from ..stats.null_registry import NULLS as NULLS  # the nulls by name (re-exported)
from ..stats.statistic import duplicates, histogram

NOT_TESTED = ("q.rms", "k.rms")
#: duplicate -> (representative, why), derived from the records (:mod:`rmtbase.stats.statistic`)
DUPLICATES = duplicates()
#: Histogram statistics: these see a storage lattice or quantisation grid (from the records).
HISTOGRAM = histogram()
GROUPS = ("entry law", "product law", "spectrum")


def group_of(name: str) -> str:
    """The group (:data:`GROUPS`) of statistic ``<matrix>.<stat>``."""
    from ..stats import SPECTRAL_STATS

    matrix, stat = name.split(".", 1)
    if matrix in ("q", "k", "w"):
        return "entry law"
    return "spectrum" if stat in SPECTRAL_STATS else "product law"


#: The null of :func:`in_family` when none is given (a frozen value).
_GAUSSIAN = GaussianNull()


def in_family(names, *, null: Null = _GAUSSIAN, unreliable=()) -> list[str]:
    """The statistics of ``names`` that enter a head's decision: tested, no duplicate, not in
    ``unreliable``, of a group ``null`` tests (:meth:`rmtbase.stats.null_kind.Null.enters`).
    ``null``: a :class:`~rmtbase.stats.null_kind.Null` or its text."""
    out = []
    for n in names:
        if n in NOT_TESTED or n in DUPLICATES or n in unreliable:
            continue
        if not null.enters(group_of(n)):
            continue
        out.append(n)
    return out


def stat_family_mask(names, family, n_heads: int, group_size: int) -> np.ndarray:
    """``(n_heads, len(names))`` bool: which (head, stat) tests enter the per-statistic BH
    family — family statistics, with ``k.*`` counted on the first query head of each GQA
    group only."""
    fam = set(family)
    mask = np.zeros((n_heads, len(names)), dtype=bool)
    first = (np.arange(n_heads) % max(1, group_size)) == 0
    for j, n in enumerate(names):
        if n in fam:
            mask[:, j] = first if (n.startswith("k.") and group_size > 1) else True
    return mask
