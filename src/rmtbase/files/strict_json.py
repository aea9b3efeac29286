"""Strict JSON (RFC 8259 has no NaN or infinities): every non-finite float written as null."""

from __future__ import annotations

import json
import math


def finite(v):
    """``v`` with every non-finite float (NaN, ±inf) as None, through dicts, lists, tuples."""
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [finite(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def number(x):
    """``x`` as a JSON number: an ``int`` stays one, any other real becomes a float, and a
    non-finite value or a non-number is None."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v):
        return None
    return int(v) if isinstance(x, int) else v


def dumps(doc, **kw) -> str:
    """``json.dumps`` of :func:`finite` ``(doc)`` with ``allow_nan=False``."""
    return json.dumps(finite(doc), allow_nan=False, **kw)


__all__ = ["dumps", "finite", "number"]
