"""How heads are decided (:class:`Decision`: null, BH level, group size, statistics kept out,
extension cap, progress) and one verdict on the draws there are
(:func:`rmtbase.decision.verdict.score_values_by_layer`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...decision.verdict import score_values_by_layer


@dataclass(frozen=True)
class Decision:
    """How the heads are decided: the null (its name and which statistics enter), BH level,
    query heads per key head, statistics kept out, the extension cap (None: the stopping
    rule), progress lines, and the growth budget (a
    :class:`~rmtbase.scoring.stopping.budget.GrowthBudget` the stopping rules draw on; None: no
    limit)."""

    null: object
    alpha: float
    group_size: int
    unreliable: tuple
    max_draws: int | None
    progress: bool
    budget: object = None


def reference_groups(refs):
    return [(None if len(refs) == 1 else g.rows, g.joint, g.spectral_null) for g in refs]


def verdict(refs, values, how: Decision):
    """The verdict on the draws there are, with ``head_p_exceedances`` (the calibration count
    behind each head p, for :func:`_joint_bounds`; dropped by :func:`grow_joint`, every
    verdict's last step)."""
    return score_values_by_layer(values, values["q.rms"], values["k.rms"],
                                 reference_groups(refs),
                                 alpha=how.alpha, null_kind=how.null,
                                 group_size=how.group_size, unreliable=how.unreliable)


__all__ = ["Decision"]
