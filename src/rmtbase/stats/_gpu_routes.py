"""Which symmetric eigen route the fast spectral null takes on an accelerator.

:func:`rmtbase.baseline.eig_route.eig_method` asks :func:`accelerator_route` once a symmetric
route is accurate on a non-CPU backend. :data:`MEASURED_SWITCH` = (route, largest d_h) picks
a Pallas Jacobi kernel (:data:`CANDIDATES`) up to that d_h, ``"eigvalsh"`` beyond; ``None``
(always ``"eigvalsh"``) until ``benchmarks/gpu.py`` has timed the routes on a GPU."""

from __future__ import annotations

#: the Pallas routes that may replace "eigvalsh" on an accelerator
CANDIDATES = ("jacobi_pallas", "hestenes_pallas")
#: (route, d_h limit) taken on accelerators instead of "eigvalsh"; None: not measured (off)
MEASURED_SWITCH: tuple[str, int] | None = None


def accelerator_route(d_h: int, switch: tuple[str, int] | None = None) -> str:
    """The switch's route where d_h ≤ its limit (``switch``, default
    :data:`MEASURED_SWITCH`), else ``"eigvalsh"``; always ``"eigvalsh"`` while it is None."""
    rule = MEASURED_SWITCH if switch is None else switch
    if rule is not None and d_h <= rule[1]:
        return rule[0]
    return "eigvalsh"


def _limit(rates: dict, route: str) -> int | None:
    """The largest d_h such that ``route`` beat ``eigvalsh`` at every measured shape with d_h
    at most that (a missing rate, e.g. a route that failed, is not faster)."""
    best = None
    for d_h in sorted({dh for _, dh in rates}):
        cells = [r for (_, dh), r in rates.items() if dh == d_h]
        if not all((r.get(route) or 0) > (r.get("eigvalsh") or float("inf")) for r in cells):
            break
        best = d_h
    return best


def suggested_switch(rates: dict) -> tuple[str, int] | None:
    """The switch a GPU measurement supports: ``rates`` maps (d, d_h) to {route: draws/s}; of the
    :data:`CANDIDATES` beating ``eigvalsh`` up to some d_h, the largest limit (None if none)."""
    found = [(route, _limit(rates, route)) for route in CANDIDATES]
    found = [(route, lim) for route, lim in found if lim is not None]
    if not found:
        return None
    first = min(rates, key=lambda cell: cell[1])
    return max(found, key=lambda f: (f[1], rates[first].get(f[0]) or 0))
