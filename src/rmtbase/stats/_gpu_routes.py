"""Which symmetric eigen route the fast spectral null takes on an accelerator.

:func:`rmtbase.baseline.eig_route.eig_method` asks :func:`accelerator_route` once it has found a
symmetric route accurate (d_h·eps·κ ≤ EIGH_MAX_REL_ERROR) on a backend other than the CPU.
The rule is a measured switch, :data:`MEASURED_SWITCH` = (route, largest d_h): one of the
Pallas Jacobi kernels (:data:`CANDIDATES`: two-sided on the Gram,
:mod:`rmtbase.stats._jacobi`; one-sided on the core, :mod:`rmtbase.stats._hestenes`) is taken
for d_h up to that limit, cuSOLVER's batched solver (``"eigvalsh"``) otherwise.

:data:`MEASURED_SWITCH` is ``None`` (the switch is off: every accelerator keeps
``"eigvalsh"``) until ``benchmarks/gpu.py`` has timed the routes through
the null on a GPU: its JSON key ``gpu_route_switch_suggested`` is what :func:`suggested_switch`
makes of the figures. Setting it here must cite that JSON file (docs/perf/) and its figures.
The CPU never asks: its route stays ``"eigh"``, so CPU outputs do not depend on this module.
"""

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
    """The switch a GPU measurement supports. ``rates`` maps (d, d_h) to {route: draws/s}; of
    the :data:`CANDIDATES` that beat ``eigvalsh`` up to some d_h (:func:`_limit`), the one
    with the largest limit, ties going to the faster at the smallest shape; None if none did."""
    found = [(route, _limit(rates, route)) for route in CANDIDATES]
    found = [(route, lim) for route, lim in found if lim is not None]
    if not found:
        return None
    first = min(rates, key=lambda cell: cell[1])
    return max(found, key=lambda f: (f[1], rates[first].get(f[0]) or 0))
