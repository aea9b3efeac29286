"""A CPU-time budget on the growth of the null tables, and what is said when it bites.

The stopping rules (:mod:`.rule`, :mod:`.joint`) grow a table while a head's decision is open.
:class:`GrowthBudget` caps what that growth may cost, in the CPU seconds
:mod:`rmtbase.baseline.draw_cost` estimates for the draws of each step, counted from the table's
size before the step whether or not a cache already holds the draws: a budgeted score decides the
same cold and warm. A step that would take the total past the budget is not taken; the heads still
open are then reported undecided with a p bracket (:mod:`rmtbase.decision.undecided`), never flagged
or left unflagged.

Default (``"auto"``, :func:`budget_seconds`): :data:`FACTOR` times the estimated cost of
measuring the heads themselves (one draw of the table's kind per head: a draw is the same
computation as a head's statistics), at least :data:`FLOOR`. Growth then costs at most about
twice the score's own work; the floor keeps every model up to ~1B at its unbudgeted decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...baseline.draw_cost import growth_seconds, seconds_per_draw
from ..settings import MAX_SECONDS, MIN_SECONDS, check_budget  # noqa: F401 - re-exported

#: The automatic budget: this many times the estimated cost of measuring the heads...
FACTOR = 2.0
#: ...and at least this many CPU seconds.
FLOOR = 300.0


def budget_seconds(budget, d: int, d_h: int, kind: str, heads: int) -> float | None:
    """CPU seconds of growth allowed: ``budget`` itself, None (no budget), or for ``"auto"``
    max(:data:`FLOOR`, :data:`FACTOR` × heads × one draw's cost) (module docstring)."""
    if budget != "auto":
        return None if budget is None else float(budget)
    return max(FLOOR, FACTOR * int(heads) * seconds_per_draw(d, d_h, kind))


@dataclass
class GrowthBudget:
    """The growth a score may still pay for: ``seconds`` (None: no limit), ``spent`` so far
    (estimated), each step refused, (table kind, draws held, draws wanted), and where a joint
    step was refused the joint rule's (p_lo, p_hi) of each head
    (:mod:`rmtbase.scoring.stopping.joint_growth`)."""

    seconds: float | None
    spent: float = 0.0
    refused: list = field(default_factory=list)
    joint_bounds: tuple | None = None

    def afford(self, d: int, d_h: int, stats: str, have: int, want: int) -> bool:
        """Whether growing a ``stats`` table at (d, d_h) from ``have`` to ``want`` draws fits
        what is left; if so it is counted as spent, if not it is recorded as refused."""
        cost = growth_seconds(d, d_h, stats, have, want)
        if self.seconds is not None and self.spent + cost > self.seconds:
            self.refused.append((stats, int(have), int(want)))
            return False
        self.spent += cost
        return True

    @property
    def bitten(self) -> bool:
        """Whether some step was refused."""
        return bool(self.refused)

    def line(self) -> str | None:
        """What a plan line is followed by: the budget all the score's growth shares (None
        without a budget)."""
        if self.seconds is None:
            return None
        from ...baseline.draw_cost import cpu_time

        return (f"rmtbase: growth budget {cpu_time(self.seconds)} for all the null tables' "
                "growth (estimated): heads still open past it are reported undecided "
                "(--growth-budget)")

    def attrs(self) -> dict:
        """``growth_budget`` (CPU seconds, or "none") and ``growth_budget_spent`` for scores.nc."""
        return {"growth_budget": "none" if self.seconds is None else round(self.seconds, 3),
                "growth_budget_spent": round(self.spent, 3)}


__all__ = ["FACTOR", "FLOOR", "GrowthBudget", "MAX_SECONDS", "MIN_SECONDS", "budget_seconds",
           "check_budget"]
