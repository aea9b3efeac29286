"""Exceptions that the CLI turns into one-line messages (exit status 2).

Every user error raises a subclass of :class:`RmtbaseError` whose message names the offending
value; the CLI prints ``rmtbase: error: <message>``."""

from __future__ import annotations

import numbers


class RmtbaseError(Exception):
    """Base class for errors that are the caller's to fix."""


class InputError(RmtbaseError, ValueError):
    """Impossible dimensions, σ or options."""


class TableError(RmtbaseError):
    """A file that is not a readable rmtbase table."""


class ModelError(RmtbaseError):
    """A model that cannot be loaded or is not supported."""


class PrecisionError(RmtbaseError):
    """A high-precision value could not be confirmed to the digits asked for."""


def check_dims(d: int, d_h: int) -> tuple[int, int]:
    """Validate (d, d_h) for a low-rank head: integers with 1 ≤ d_h ≤ d."""
    try:
        d_i, dh_i = int(d), int(d_h)
    except (TypeError, ValueError) as exc:
        raise InputError(f"dimensions must be integers, got d={d!r}, d_h={d_h!r}") from exc
    if d_i != d or dh_i != d_h:
        raise InputError(f"dimensions must be integers, got d={d!r}, d_h={d_h!r}")
    if dh_i < 1:
        raise InputError(f"d_h must be at least 1, got d_h={dh_i}")
    if dh_i > d_i:
        raise InputError(f"d_h must not exceed d, got d={d_i}, d_h={dh_i}")
    return d_i, dh_i


def check_positive_int(value, name: str) -> int:
    """Validate a count (d_h, depth, moment order): an integer ≥ 1 (2.0 passes, 2.5 does not)."""
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a positive integer, got {value!r}") from None
    if v != value or v < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    return v


def check_draws(draws, minimum: int = 2) -> int:
    """Validate a number of Monte Carlo draws: an integer (not a bool) ≥ ``minimum``."""
    if isinstance(draws, bool) or not isinstance(draws, numbers.Integral) or draws < minimum:
        raise InputError(f"draws must be an integer >= {minimum}, got {draws!r}")
    return int(draws)


def check_seed(seed) -> int:
    """Validate a PRNG seed: an integer (not a bool) in [0, 2**32)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2**32:
        raise InputError(f"seed must be an integer in [0, 2**32), got {seed!r}")
    return int(seed)


def check_positive(value, name: str) -> float:
    """A finite number > 0 as a float, else InputError naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must be a number, got {value!r}") from exc
    if not (v > 0) or v == float("inf"):
        raise InputError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def check_sigma(sigma: float, name: str = "sigma") -> float:
    """Validate an entry standard deviation: a finite number > 0."""
    return check_positive(sigma, name)


def check_keywords(keywords, allowed, caller: str) -> None:
    """TypeError, as Python's own for ``caller``, for a name in ``keywords`` not in ``allowed``."""
    for key in keywords:
        if key not in allowed:
            raise TypeError(f"{caller}() got an unexpected keyword argument {key!r}")


def with_keywords(cls, record, keywords: dict, caller: str):
    """``record`` (a frozen dataclass ``cls``; None: ``cls()``) with the fields ``keywords`` names
    replaced, so a function taking a settings record keeps its keyword calls; TypeError for a
    keyword that is no field, InputError for a record of another type."""
    import dataclasses

    check_keywords(keywords, {f.name for f in dataclasses.fields(cls)}, caller)
    if record is None:
        return cls(**keywords)
    if not isinstance(record, cls):
        raise InputError(f"{caller}: settings must be a {cls.__name__}, got {record!r}")
    return dataclasses.replace(record, **keywords) if keywords else record
