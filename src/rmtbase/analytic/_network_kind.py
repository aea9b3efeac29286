"""Which product network: the kind (Gaussian or residual), the gain G and the layer widths.

The parameter checks every product-network module shares (:mod:`.product_network`,
:mod:`._lyapunov`, :mod:`.network_finite`, the ensembles and the tables): one-line
:class:`~rmtbase.errors.InputError` on bad input. Re-exported from :mod:`.product_network`.
"""

from __future__ import annotations

from ..errors import InputError, check_positive, check_positive_int

KINDS = ("gaussian", "residual")


def check_kind(kind) -> str:
    if kind not in KINDS:
        raise InputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return kind


def check_gain(gain):
    """A finite gain G > 0 (int, float, Fraction, str or mpf); returned unchanged."""
    check_positive(gain, "gain")
    return gain


def check_widths(kind, depth, widths):
    """``widths`` as a tuple of depth + 1 positive ints, or None (square layers)."""
    depth = check_positive_int(depth, "depth")
    if widths is None:
        return None
    if kind == "residual":
        raise InputError("widths apply only to the Gaussian product network")
    w = tuple(check_positive_int(x, "width") for x in widths)
    if len(w) != depth + 1:
        raise InputError(f"widths must list depth + 1 = {depth + 1} widths d_0..d_L, got {len(w)}")
    return None if len(set(w)) == 1 else w


def _check(kind, depth, gain, widths):
    kind = check_kind(kind)
    depth = check_positive_int(depth, "depth")
    return kind, depth, check_gain(gain), check_widths(kind, depth, widths)
