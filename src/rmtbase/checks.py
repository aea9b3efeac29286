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


def check_int(name: str, value, minimum: int | None = None, maximum: int | None = None,
              why: str | None = None) -> int:
    """``value`` as an ``int`` (not a bool or float) with ``minimum`` ≤ value ≤ ``maximum`` (None:
    unbounded), else InputError naming ``name``; ``why`` is appended to a bound's message."""
    if not _is_int(value):
        raise InputError(f"{name} must be an integer, got {value!r}")
    v = int(value)
    tail = f" ({why})" if why else ""
    if minimum is not None and v < minimum:
        raise InputError(f"{name} must be at least {minimum}{tail}, got {v}")
    if maximum is not None and v > maximum:
        raise InputError(f"{name} must be at most {maximum}{tail}, got {v}")
    return v


def check_seed(value, name: str = "seed") -> int:
    """A PRNG seed: an integer (not a bool) in ``[0, 2**32)``, else InputError naming ``name``."""
    if not _is_int(value) or not 0 <= value < SEED_LIMIT:
        raise InputError(f"{name} must be an integer in [0, 2**32), got {value!r}")
    return int(value)


def check_probability(name: str, value) -> float:
    """A real number (int or float, not a bool or a string) strictly between 0 and 1, as a
    ``float``, else InputError naming ``name``."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(float(value)) or not 0.0 < float(value) < 1.0):
        raise InputError(f"{name} must be a number in (0, 1), got {value!r}")
    return float(value)


__all__ = ["COMPOSITION_DRAWS_WHY", "MIN_NULL_DRAWS", "SEED_LIMIT", "check_int", "check_probability", "check_seed"]
