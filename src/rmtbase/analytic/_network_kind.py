"""Which product network: the kind (Ginibre or residual), the gain G and the layer widths.

Shared parameter checks (one-line :class:`~rmtbase.errors.InputError`). "ginibre" is the real
Ginibre ensemble (Ginibre 1965, J. Math. Phys. 6, 440); the spelling "gaussian" is accepted on
input, once, by :func:`ginibre_alias`."""

from __future__ import annotations

import os
import sys
import warnings

from ..errors import InputError, check_positive, check_positive_int

KINDS = ("ginibre", "residual")
#: The deprecated spelling of "ginibre" (ensemble and product-network kind).
OLD_GINIBRE = "gaussian"


def ginibre_alias(name, what: str = "ensemble", warn=None):
    """``name`` with the deprecated spelling "gaussian" replaced by "ginibre" (a DeprecationWarning,
    or ``warn(message)``); ``what`` names the argument."""
    if not isinstance(name, str) or name != OLD_GINIBRE:
        return name
    msg = (f'{what} "gaussian" is deprecated: use "ginibre" (the real Ginibre ensemble, '
           'i.i.d. N(0, sigma^2) entries); "gaussian" names only the Gaussian null')
    if warn is None:
        warnings.warn(msg, DeprecationWarning, stacklevel=_caller_level())
    else:
        warn(msg)
    return "ginibre"


def _caller_level() -> int:
    """``stacklevel`` of the first frame outside rmtbase (the user's call, which Python's default
    filters then show), counted from :func:`ginibre_alias`."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def check_kind(kind) -> str:
    """The product-network kind, "ginibre" or "residual" ("gaussian": :func:`ginibre_alias`)."""
    kind = ginibre_alias(kind, "kind")
    if kind not in KINDS:
        raise InputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return kind


def check_gain(gain):
    """A finite gain G > 0 within :data:`rmtbase.limits.GAIN_RANGE` (int, float, Fraction, str
    or mpf); returned unchanged."""
    from ..limits import GAIN_RANGE

    g = check_positive(gain, "gain")
    if not GAIN_RANGE[0] <= g <= GAIN_RANGE[1]:
        raise InputError(f"gain must be in [{GAIN_RANGE[0]:g}, {GAIN_RANGE[1]:g}], got {gain!r}")
    return gain


def check_widths(kind, depth, widths):
    """``widths`` as a tuple of depth + 1 positive ints, or None (square layers)."""
    depth = check_positive_int(depth, "depth")
    if widths is None:
        return None
    if kind == "residual":
        raise InputError("widths apply only to the Ginibre product network")
    w = tuple(check_positive_int(x, "width") for x in widths)
    if len(w) != depth + 1:
        raise InputError(f"widths must list depth + 1 = {depth + 1} widths d_0..d_L, got {len(w)}")
    return None if len(set(w)) == 1 else w


def _check(kind, depth, gain, widths):
    kind = check_kind(kind)
    depth = check_positive_int(depth, "depth")
    return kind, depth, check_gain(gain), check_widths(kind, depth, widths)
