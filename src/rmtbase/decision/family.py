"""Which statistics are tested, what each tests, and which enter a head's decision once.

Groups (what a departure from the null means; ``docs/statistics.md`` is the glossary):

- ``entry law`` — element statistics of W_Q and W_K (``q.*``, ``k.*``), and of whole weight
  matrices (``w.*``, :mod:`rmtbase.scoring.components`): the marginal law of the entries. Under the Gaussian null a flag here says the entries are not i.i.d. Gaussian at
  the head's σ: trained structure, but equally a non-Gaussian initialisation (torch's default
  Kaiming-uniform, truncated normal) or a storage artefact. They carry no information about
  structure across entries; the permutation null leaves them out.
- ``product law`` — element statistics of W_QK (``qk.mean`` … ``qk.max_over_q99``): the law of
  the entries of the d×d product, which depends on both factors' entry laws *and* on their
  alignment (a low-rank or aligned head has heavy-tailed W_QK entries).
- ``spectrum`` — spectral statistics of W_QK (``qk.lambda_max`` … ``qk.stable_rank``): the
  singular values, i.e. how the d_h query and key directions are arranged. Mostly structure;
  at finite d they also move with the tails of the entry law (i.i.d. Student-t(6) entries shift
  NPR), which the permutation null absorbs.

Duplicates (:data:`DUPLICATES`) are reported but enter the per-statistic BH family and the head's
omnibus once, through their representative: ``qk.pr`` ≡ d_h·``qk.npr``; ``qk.std`` and
``qk.sum_lambda`` (= d²(std² + mean²) of W_QK) carry the same information; after
self-normalisation by the matrix's rms, ``q.std``/``k.std`` are √(1 − (mean/rms)²), a function
of the normalised mean, and ``delta_entropy`` differs from the normalised entropy by a function
of the same ratio. Under grouped-query attention the ``k.*`` statistics of the query heads
that share a key head are one test: only the first query head of each group carries them in the
per-statistic BH family (:func:`stat_family_mask`).
"""

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
    ``unreliable``, of a group the null tests (:meth:`rmtbase.stats.null_kind.Null.enters`:
    under the permutation null no entry-law statistic). ``null``: a
    :class:`~rmtbase.stats.null_kind.Null` (its text is parsed where it enters:
    :meth:`~rmtbase.stats.null_kind.Null.parse`)."""
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
