"""A product-network table request: its options, and what is refused before any draw.

:class:`NetworkSpec` (:func:`make_network_spec`) fixes a network table's numbers but widths and
gains (:func:`network_grid`); :func:`check_network_cells` refuses, in one line, a draw's memory
beyond what is available and a (gain, depth) whose λ or λ² leave float64's range."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..analytic._network_kind import check_kind
from ..errors import InputError, check_draws, check_positive_int, check_seed
from ..files.memory import available_memory
from ..files.memory import fmt_bytes as _fmt
from .sigma_range import RANGE_MARGIN, float_range
from .table_contents import STAT_SETS


@dataclasses.dataclass(frozen=True)
class NetworkSpec:
    """Everything but the widths and gains that fixes a network table's numbers."""

    kind: str = "residual"
    depths: tuple = (1,)
    stats: str = "all"
    draws: int = 200
    seed: int = 0
    chunk_size: int | None = None
    trim: float = 0.8

    def n_blocks(self) -> int:
        from .tables import DRAW_BLOCK

        return -(-self.draws // DRAW_BLOCK)


def _ints(values, name) -> tuple:
    vals = [values] if np.ndim(values) == 0 else list(values)
    if not vals:
        raise InputError(f"need at least one {name}")
    return tuple(sorted({check_positive_int(v, name) for v in vals}))


def _gains(values) -> tuple:
    from ..analytic._network_kind import check_gain

    vals = [values] if np.ndim(values) == 0 else list(values)
    if not vals:
        raise InputError("need at least one gain")
    return tuple(sorted({float(check_gain(v)) for v in vals}))


#: :func:`make_network_spec`'s keywords besides ``depth``: a network table's options.
NETWORK_KEYWORDS = ("kind", "draws", "seed", "stats", "chunk_size")


def make_network_spec(*, kind="residual", depth=1, draws=200, seed=0, stats="all",
                      chunk_size=None) -> NetworkSpec:
    """Validate options into a :class:`NetworkSpec` (one-line :class:`InputError` on bad input)."""
    kind = check_kind(kind)
    if stats not in STAT_SETS:
        raise InputError(f"stats must be one of {', '.join(STAT_SETS)}, got {stats!r}")
    check_draws(draws)
    check_seed(seed)
    if chunk_size is not None:
        chunk_size = check_positive_int(chunk_size, "chunk_size")
    return NetworkSpec(kind=kind, depths=_ints(depth, "depth"), stats=stats, draws=int(draws),
                       seed=int(seed), chunk_size=chunk_size)


def network_grid(d, gain) -> tuple[tuple, tuple]:
    """Validated widths (ints >= 2) and gains (floats > 0) of a table, sorted and distinct."""
    ds = _ints(d, "d")
    if ds[0] < 2:
        raise InputError("d must be at least 2 (off-diagonal element statistics)")
    return ds, _gains(gain)


def network_draw_memory(d: int, n_depths: int) -> int:
    """Estimated working memory in bytes of one product-network draw of width d (float64): about
    12 d×d arrays plus Q and T kept at each of ``n_depths`` depths."""
    return 8 * d * d * (12 + 2 * int(n_depths)) + 2**20


def check_network_cells(kind: str, widths, depths, gains) -> None:
    """Refuse before any draw or cluster: one draw's memory at each width, and the float64 range of
    λ at each (gain, depth): λ scales as G^L (Ginibre) or (1 + G)^L (residual), Σλ² and the
    element kurtosis as its square times up to (d (L + 1))²."""
    avail, source = available_memory()
    for d in widths:
        need = network_draw_memory(d, len(depths))
        if avail is not None and need > avail:
            raise InputError(f"one {kind} network draw at d={d} ({len(depths)} depths) needs "
                             f"about {_fmt(need)} of working memory, more than the "
                             f"{_fmt(avail)} available ({source}"
                             + ("" if source == "RMTBASE_MEMORY_LIMIT" else
                                "; set RMTBASE_MEMORY_LIMIT to change the limit") + ")")
    tiny, big = float_range("float64")
    lo, hi = math.log10(tiny * RANGE_MARGIN), math.log10(big / RANGE_MARGIN)
    for g in gains:
        per = math.log10(g) if kind == "ginibre" else math.log10(1.0 + g)
        for d in widths:
            for L in depths:
                spread = 2 * math.log10(d * (L + 1))
                if not lo + spread <= 2 * L * per <= hi - spread:
                    raise InputError(
                        f"at gain {g:g}, depth {L} the {kind} product's lambda (proportional "
                        f"to {'G' if kind == 'ginibre' else '(1 + G)'}^L) is about "
                        f"1e{L * per:.0f} and its squares 1e{2 * L * per:.0f}, outside the "
                        f"float64 range [{tiny:.3g}, {big:.3g}] of a network table; use a "
                        "gain nearer 1 or fewer layers")
