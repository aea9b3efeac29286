"""What a null table's draws cost on the CPU, said before they are drawn.

A per-draw cost model, CPU seconds (XLA's threads summed), fitted to measurements:

- a table with element statistics (``"all"``, ``"elementwise"``): :data:`ELEMENT_NS` ns × d²
  (the d × d W_QK and the passes over its entries) + :data:`TABLE_MS` ms a draw (the factors'
  statistics and the rest), and for ``"all"`` also :data:`ALL_SPECTRAL_NS` ns × d_h³ (its
  spectrum, from the formed product);
- a spectral table: :data:`SPECTRAL_NS` ns × d_h³ + :data:`SPECTRAL_MS` ms (the bidiagonal
  route, :mod:`rmtbase.ensembles.wishart`: no d × d matrix is formed, so d does not enter).

Fitted to ``benchmarks/big_shapes.py --calibrate`` (process CPU per draw after compilation,
2-core CPU; the fit and its residuals are in ``docs/performance.md``). Element-only tables and
block-quantised storages are taken at these costs. An estimate, good to about 2× on another
machine, so the line says "≈"."""

from __future__ import annotations

#: CPU ns per entry of W_QK for a draw with element statistics.
ELEMENT_NS = 13.1
#: CPU ms a draw of a table with element statistics, besides its d² and d_h³ terms.
TABLE_MS = 3.4
#: CPU ns per d_h³ for the spectrum of an all-statistics draw.
ALL_SPECTRAL_NS = 1.38
#: CPU ns per d_h³ and ms a draw for a spectral table.
SPECTRAL_NS, SPECTRAL_MS = 0.22, 0.15


def seconds_per_draw(d: int, d_h: int, stats: str) -> float:
    """Estimated CPU seconds of one draw of a ``stats`` table at (d, d_h) (module docstring)."""
    d, d_h = int(d), int(d_h)
    if stats == "spectral":
        return SPECTRAL_NS * 1e-9 * d_h ** 3 + SPECTRAL_MS * 1e-3
    spectrum = ALL_SPECTRAL_NS * 1e-9 * d_h ** 3 if stats == "all" else 0.0
    return ELEMENT_NS * 1e-9 * d * d + TABLE_MS * 1e-3 + spectrum


def growth_seconds(d: int, d_h: int, stats: str, have: int, want: int) -> float:
    """Estimated CPU seconds of drawing ``have`` .. ``want`` (0 where ``want`` ≤ ``have``)."""
    return max(int(want) - int(have), 0) * seconds_per_draw(d, d_h, stats)


def cpu_time(seconds: float) -> str:
    """``seconds`` of CPU as a reader takes it in: "≈ 40 CPU-s", "≈ 12 CPU-min", "≈ 2.5 CPU-h"."""
    if seconds < 90:
        return f"≈ {max(seconds, 1):.0f} CPU-s"
    if seconds < 90 * 60:
        return f"≈ {seconds / 60:.0f} CPU-min"
    return f"≈ {seconds / 3600:.1f} CPU-h"


def growth_line(d: int, d_h: int, stats: str, storage: str, have: int, upto: int) -> str:
    """The line said before a table grows: from ``have`` draws to at most ``upto``, and what the
    whole of it would cost (the stopping rule may stop sooner)."""
    kind = {"all": "all-statistics", "elementwise": "element-statistics",
            "spectral": "spectral"}[stats]
    est = cpu_time(growth_seconds(d, d_h, stats, have, upto))
    return (f"rmtbase: growing the ({d},{d_h}) {storage} {kind} null table from {have:,} to "
            f"≤ {upto:,} draws: {est} at most (estimated; it stops once every decision is "
            "settled)")


__all__ = ["ALL_SPECTRAL_NS", "ELEMENT_NS", "SPECTRAL_MS", "SPECTRAL_NS", "TABLE_MS", "cpu_time", "growth_line", "growth_seconds",
           "seconds_per_draw"]
