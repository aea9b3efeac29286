"""Argument checks shared by the Python API and the CLI: one place, one wording.

Each check returns the value as the plain Python type it must be, or raises
:class:`rmtbase.errors.InputError` with one line naming the argument, the rule and the value.
Types are checked, not coerced: ``2.7`` is not an integer, ``"0.05"`` is not a probability, a
``bool`` is not an integer; NumPy scalars are accepted. ``name`` is the caller's spelling
(``"--draws"`` from the CLI, ``"draws"`` from the API).
"""

from __future__ import annotations

import math
import numbers

from .errors import InputError
from .limits import (
    GAIN_RANGE,
    INT_CEILING,
    MAX_COUNT,
    MAX_DEPTH,
    MAX_DIM,
    MAX_DRAWS,
    MAX_WORKERS,
    SIGMA_RANGE,
)

#: Seeds are integers in [0, SEED_LIMIT).
SEED_LIMIT = 2**32
#: The fewest null draws a head's (or a matrix's) decision can be made from: the omnibus
#: calibration reads the empirical tail from its MIN_EXCEEDANCES = 10 largest null statistics
#: and needs twice that (:func:`rmtbase.decision.omnibus.calibrated`; kept equal to
#: ``2 * rmtbase.decision.tails.MIN_EXCEEDANCES`` by tests/test_refusals.py). Here, numpy-free,
#: so that the CLI refuses ``--draws 5`` at start-up speed.
MIN_NULL_DRAWS = 20
#: Why a composition's draws (``rmtbase circuits --draws``, ``composition(draws=...)``) have the
#: same floor: fewer leave every head pair open, and a summary of them could claim nothing.
COMPOSITION_DRAWS_WHY = "as rmtbase score --composition: fewer leave every head pair undecided"


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name: str, value, minimum: int | None = None, maximum: int | None = INT_CEILING,
              why: str | None = None) -> int:
    """``value`` as an ``int`` (not a bool or float) with ``minimum`` ≤ value ≤ ``maximum``
    (minimum None: no lower bound; maximum :data:`~rmtbase.limits.INT_CEILING` unless given),
    else InputError naming ``name``; ``why`` (the reason for the minimum) is appended to the
    lower bound's message."""
    if maximum is None:
        maximum = INT_CEILING
    if not _is_int(value):
        raise InputError(f"{name} must be an integer, got {value!r}")
    v = int(value)
    tail = f" ({why})" if why else ""
    if minimum is not None and v < minimum:
        raise InputError(f"{name} must be at least {minimum}{tail}, got {v}")
    if maximum is not None and v > maximum:
        raise InputError(f"{name} must be at most {maximum}, got {v}")
    return v


def check_seed(value, name: str = "seed") -> int:
    """A PRNG seed: an integer (not a bool) in ``[0, 2**32)``, else InputError naming ``name``."""
    if not _is_int(value) or not 0 <= value < SEED_LIMIT:
        raise InputError(f"{name} must be an integer in [0, 2**32), got {value!r}")
    return int(value)


def check_real(name: str, value, minimum: float, maximum: float, *, open_min: bool = False,
               open_max: bool = False) -> float:
    """``value`` as a ``float``: a real number (not a bool or a string), finite, in the interval
    from ``minimum`` to ``maximum`` (each end excluded when ``open_min``/``open_max``), else
    InputError naming ``name`` and the interval."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"{name} must be a number, got {value!r}")
    try:
        v = float(value)
    except OverflowError:  # an integer beyond any float
        v = math.inf
    below = v <= minimum if open_min else v < minimum
    above = v >= maximum if open_max else v > maximum
    if not math.isfinite(v) or below or above:
        span = f"{'(' if open_min else '['}{minimum:g}, {maximum:g}{')' if open_max else ']'}"
        raise InputError(f"{name} must be in {span}, got {value!r}")
    return v


def check_probability(name: str, value) -> float:
    """A real number (int or float, not a bool or a string) strictly between 0 and 1, as a
    ``float``, else InputError naming ``name``."""
    try:
        v = None if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            else float(value)
    except OverflowError:  # an integer beyond any float
        v = None
    if v is None or not math.isfinite(v) or not 0.0 < v < 1.0:
        raise InputError(f"{name} must be a number in (0, 1), got {value!r}")
    return v


__all__ = ["COMPOSITION_DRAWS_WHY", "GAIN_RANGE", "INT_CEILING", "MAX_COUNT", "MAX_DEPTH",
           "MAX_DIM", "MAX_DRAWS", "MAX_WORKERS", "MIN_NULL_DRAWS", "SEED_LIMIT", "SIGMA_RANGE",
           "check_int", "check_probability", "check_real", "check_seed"]
