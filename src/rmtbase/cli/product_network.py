"""``rmtbase product-network --kind ginibre|residual --depth L --gain G [--d D] [--json]``.

Analytic references (:mod:`rmtbase.analytic.product_network`,
:mod:`rmtbase.analytic.network_finite`) for Ginibre M_L = W_L⋯W_1, W_l entries N(0, G/d_{l−1})
(square, or ``--widths d_0 … d_L``), or residual M_L = (I + W_L)⋯(I + W_1), W_l entries
N(0, G/d); λ the eigenvalues of M_LᵀM_L, unnormalised:

- ``moments`` [m_1 … m_6], ``edges`` [x₋, x₊] of the continuous part, ``atom`` (mass at 0,
  rectangular Ginibre with a bottleneck) of the d → ∞ limit law of λ;
- ``lyapunov``: {max, mean, min} of ln s/L (d → ∞, then L → ∞; null for −∞);
- at width ``--d`` (else null): exact ``expected_trace`` E tr(MᵀM), ``expected_trace_sq``
  E tr((MᵀM)²), ``element_kurtosis`` (excess kurtosis of an off-diagonal entry).

mpmath at 30 digits, printed as float64 (null beyond its range)."""

from __future__ import annotations

import argparse
import math

from ..analytic._network_kind import KINDS, check_gain, check_kind, check_widths
from ._common import JSON_OBJECT_HELP, emit, ginibre_choice, number, positive_int
from ._output import add_json

#: Working digits of the mpmath edges behind the printed floats.
DPS = 30
#: Number of moments printed.
N_MOMENTS = 6


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "product-network", help="analytic references for deep products (Ginibre or residual)",
        description="Limit-law moments, edges and Lyapunov exponents of M_L^T M_L for Ginibre "
                    "products W_L...W_1 or residual products (I+W_L)...(I+W_1), and exact "
                    "finite-d traces.")
    p.add_argument("--kind", choices=KINDS, required=True, type=ginibre_choice("--kind"),
                   help="ginibre: W_L...W_1, W_l ~ N(0, G/d_{l-1}); residual: (I+W_L)...(I+W_1), "
                        "W_l ~ N(0, G/d)")
    p.add_argument("--depth", type=positive_int, required=True, help="number of layers L")
    p.add_argument("--gain", type=number, default=1.0, help="per-layer gain G > 0 (default 1)")
    p.add_argument("--d", type=positive_int, default=None,
                   help="finite width d for the exact E tr(M^T M), E tr((M^T M)^2)")
    p.add_argument("--widths", type=positive_int, nargs="+", default=None, metavar="D_l",
                   help="ginibre only: widths d_0 ... d_L of a rectangular network")
    add_json(p, JSON_OBJECT_HELP)
    return p


def _finite(x) -> float | None:
    """float(x), or None where it is ±∞ or beyond float64's range."""
    x = float(x)
    return x if math.isfinite(x) else None


def product_network_summary(kind: str, depth: int, gain: float = 1.0, d: int | None = None,
                            widths=None) -> dict:
    """The ``rmtbase product-network`` numbers as a dict (floats; None for −∞ or not given)."""
    import mpmath as mp

    from ..errors import InputError, check_positive_int

    kind = check_kind(kind)
    depth = check_positive_int(depth, "--depth")
    check_gain(gain)
    if widths is not None:
        widths = tuple(widths)
        check_widths(kind, depth, widths)
        if d is not None and d != widths[0]:
            raise InputError(f"--d {d} disagrees with the first of --widths ({widths[0]})")
        d = widths[0]
    elif d is not None:
        d = check_positive_int(d, "--d")
    wid = check_widths(kind, depth, widths)
    try:
        return _summary(kind, depth, gain, d, widths, wid)
    except (ArithmeticError, ValueError, mp.libmp.NoConvergence) as exc:
        if isinstance(exc, InputError):
            raise
        # the 30-digit path breaks down at gains such as 1e-300 or 1e300 (residual: the edge
        # equation degenerates or its root finder does not converge)
        raise InputError(f"the {kind} product at gain {float(gain):g}, depth {depth} is beyond "
                         f"the {DPS}-digit analytic path ({type(exc).__name__}); use a gain "
                         "nearer 1 (1e-30 to 1e30 work at small depth)") from None


def _summary(kind, depth, gain, d, widths, wid) -> dict:
    import mpmath as mp

    from ..analytic import network_finite as nf
    from ..analytic import product_network as pn

    with mp.workdps(DPS):
        g = mp.mpf(gain)
        lo, hi = pn.edges_mp(kind, depth, g, wid, dps=DPS)
        lyap = pn.lyapunov_limits_mp(kind, g, dps=DPS) if wid is None else None
        out = {
            "kind": kind, "depth": depth, "gain": float(gain), "d": d,
            "widths": list(widths) if widths is not None else None,
            "moments": [_finite(m) for m in pn.moments_mp(kind, depth, g, N_MOMENTS, wid, dps=DPS)],
            "edges": [_finite(lo), _finite(hi)],
            "atom": pn.atom(kind, wid),
            "lyapunov": None if lyap is None else {k: _finite(v) for k, v in lyap.items()},
            "expected_trace": None, "expected_trace_sq": None, "element_kurtosis": None,
        }
        if d is not None:
            e1, e2, _ = nf.trace_moments(kind, d, depth, g, wid)
            out["expected_trace"], out["expected_trace_sq"] = _finite(e1), _finite(e2)
            if kind == "ginibre" or d >= 2:   # the residual's entries off the diagonal
                out["element_kurtosis"] = _finite(nf.element_kurtosis(kind, d, depth, g, wid))
    return out


def run(args: argparse.Namespace) -> int:
    out = product_network_summary(args.kind, args.depth, args.gain, args.d, args.widths)
    shape = (f"widths={args.widths}" if args.widths else
             f"d={args.d}" if args.d else "d -> infinity")
    emit(out, args.json, command="product-network", title=f"{args.kind} product network, L={args.depth}, G={args.gain:g}, "
                               f"{shape} (eigenvalues of M_L^T M_L, no normalisation)")
    return 0
