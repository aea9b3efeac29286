"""Exceptions that the CLI turns into one-line messages (exit status 2).

Every user error raises a subclass of :class:`RmtbaseError` whose message names the offending
value; the CLI prints ``rmtbase: error: <message>``."""

from __future__ import annotations

import numbers

from .limits import INT_CEILING, MAX_DIM, MAX_DRAWS, SIGMA_RANGE


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
    """Validate (d, d_h) for a low-rank head: integers (not bools) with 1 ≤ d_h ≤ d ≤
    :data:`rmtbase.limits.MAX_DIM`."""
    try:
        d_i, dh_i = int(d), int(d_h)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"dimensions must be integers, got d={d!r}, d_h={d_h!r}") from exc
    if d_i != d or dh_i != d_h or isinstance(d, bool) or isinstance(d_h, bool):
        raise InputError(f"dimensions must be integers, got d={d!r}, d_h={d_h!r}")
    if dh_i < 1:
        raise InputError(f"d_h must be at least 1, got d_h={dh_i}")
    if dh_i > d_i:
        raise InputError(f"d_h must not exceed d, got d={d_i}, d_h={dh_i}")
    if d_i > MAX_DIM:
        raise InputError(f"d must be at most {MAX_DIM}, got d={d_i}")
    return d_i, dh_i


def check_positive_int(value, name: str, maximum: int | None = None) -> int:
    """Validate a count (d_h, depth, moment order): an integer ≥ 1 (2.0 passes, 2.5 does not)
    and ≤ ``maximum`` (None: :data:`rmtbase.limits.INT_CEILING`)."""
    try:
        v = int(value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{name} must be a positive integer, got {value!r}") from None
    if v != value or v < 1 or isinstance(value, bool):
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    top = INT_CEILING if maximum is None else maximum
    if v > top:
        raise InputError(f"{name} must be at most {top}, got {value!r}")
    return v


def check_draws(draws, minimum: int = 2) -> int:
    """Validate a number of Monte Carlo draws: an integer (not a bool) ≥ ``minimum`` and ≤
    :data:`rmtbase.limits.MAX_DRAWS`."""
    if isinstance(draws, bool) or not isinstance(draws, numbers.Integral) or draws < minimum:
        raise InputError(f"draws must be an integer >= {minimum}, got {draws!r}")
    if draws > MAX_DRAWS:
        raise InputError(f"draws must be at most {MAX_DRAWS}, got {draws!r}")
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
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"{name} must be a number, got {value!r}") from exc
    if not (v > 0) or v == float("inf"):
        raise InputError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def check_sigma(sigma: float, name: str = "sigma") -> float:
    """Validate an entry standard deviation: a finite number > 0 within
    :data:`rmtbase.limits.SIGMA_RANGE` (its fourth power times d² stays a finite float); a number, not a bool or a
    string (the σ enters the formulas as given)."""
    if isinstance(sigma, (bool, str, bytes)):
        raise InputError(f"{name} must be a number, got {sigma!r}")
    v = check_positive(sigma, name)
    if not SIGMA_RANGE[0] <= v <= SIGMA_RANGE[1]:
        raise InputError(f"{name} must be in [{SIGMA_RANGE[0]:g}, {SIGMA_RANGE[1]:g}], got "
                         f"{sigma!r}")
    return v


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
