"""The confirmation rule of both searches (:mod:`..head.find`, :mod:`..task.confirm`): an
effect over ``N ≥`` :data:`MIN_SEQUENCES` sequences or pairs passes when ``|δ| ≥ CONFIRM_SE ·
se`` and the size floor (:func:`floor_of`), and stands when the other counterfactual keeps it
(:func:`keeps`). A null effect passes with :func:`false_rate` (two-sided t: 0.0089 at ``N =
16``, 0.0027 as ``N → ∞``), an upper bound on null confirmations."""

from __future__ import annotations

import numpy as np

from .counterfactual import KEEP_FRACTION

CONFIRM_SE = 3.0
CONFIRM_FRACTION = 0.10
#: Two-sided P(|Z| >= CONFIRM_SE): :func:`false_rate` as the sequences grow.
FALSE_RATE = 0.0027
#: Fewest sequences a confirmation rests on (an se from fewer means little).
MIN_SEQUENCES = 8


def passes(effect: float, se: float, base: float, metric_is_score: bool) -> bool:
    """The confirmation rule of the module docstring for one signed effect."""
    floor = floor_of(base, metric_is_score)
    return bool(np.isfinite(effect) and np.isfinite(se) and abs(effect) >= CONFIRM_SE * se
                and abs(effect) >= floor and effect != 0)


def false_rate(n: int) -> float:
    """Two-sided ``P(|T| ≥ CONFIRM_SE)``, ``T`` Student's t on ``n − 1`` degrees of freedom: how
    often a null row's se part passes on ``n`` sequences (:data:`FALSE_RATE` as ``n → ∞``)."""
    from scipy.stats import t

    return float(2.0 * t.sf(CONFIRM_SE, max(int(n) - 1, 1)))


def floor_of(base: float, metric_is_score: bool) -> float:
    """The rule's size floor: :data:`CONFIRM_FRACTION` of ``|base|`` (itself for change
    metrics)."""
    return CONFIRM_FRACTION * abs(base) if metric_is_score else CONFIRM_FRACTION


def keeps(effect: float, check: float, floor: float = 0.0) -> bool:
    """Whether ``check`` keeps :data:`KEEP_FRACTION` of ``effect`` with its sign, and ``floor``."""
    return bool(np.isfinite(check) and np.isfinite(effect) and check * effect > 0
                and abs(check) >= max(KEEP_FRACTION * abs(effect), floor))


__all__ = ["CONFIRM_FRACTION", "CONFIRM_SE", "FALSE_RATE", "MIN_SEQUENCES", "false_rate",
           "floor_of", "keeps", "passes"]
