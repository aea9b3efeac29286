"""Which symmetric eigen route the fast spectral null takes on an accelerator (issue 57).

:func:`rmtbase.baseline.null.eig_method` asks :func:`accelerator_route` once it has found a
symmetric route accurate (d_h·eps·κ ≤ EIGH_MAX_REL_ERROR) on a backend other than the CPU.
The rule is a measured switch: the Pallas Jacobi kernel (:mod:`rmtbase.stats._jacobi_pallas`)
is taken for d_h ≤ :data:`JACOBI_MAX_D_H`, cuSOLVER's batched solver (``"eigvalsh"``) otherwise.

:data:`JACOBI_MAX_D_H` is ``None`` (the switch is off, every accelerator keeps ``"eigvalsh"``,
as before issue 57) until ``benchmarks/gpu.py`` has timed both routes through the null on a
GPU: its JSON key ``jacobi_max_d_h_suggested`` is the largest measured d_h at which
``jacobi_pallas`` gave more draws/s than ``eigvalsh`` at every measured shape up to it.
Setting it here must cite that JSON file (docs/perf/) and its figures. The CPU never asks:
its route stays ``"eigh"``, so CPU outputs do not depend on this module.
"""

from __future__ import annotations

#: d_h up to which the Pallas Jacobi route beats cuSOLVER on a GPU; None: not measured (off)
JACOBI_MAX_D_H: int | None = None


def accelerator_route(d_h: int, max_d_h: int | None = None) -> str:
    """``"jacobi_pallas"`` where d_h ≤ the measured switch (``max_d_h``, default
    :data:`JACOBI_MAX_D_H`), else ``"eigvalsh"``; always ``"eigvalsh"`` while it is None."""
    limit = JACOBI_MAX_D_H if max_d_h is None else max_d_h
    return "jacobi_pallas" if limit is not None and d_h <= limit else "eigvalsh"


def suggested_max_d_h(rates: dict) -> int | None:
    """The switch a GPU measurement supports: ``rates`` maps (d, d_h) to
    ``{"eigvalsh": draws/s, "jacobi_pallas": draws/s}``; the largest d_h such that the Jacobi
    route was faster at every measured shape with d_h at most that; None where it never was
    (or where a rate is missing: a route that failed is not faster)."""
    best = None
    for d_h in sorted({dh for _, dh in rates}):
        cells = [r for (_, dh), r in rates.items() if dh == d_h]
        if not all((r.get("jacobi_pallas") or 0) > (r.get("eigvalsh") or float("inf"))
                   for r in cells):
            break
        best = d_h
    return best
