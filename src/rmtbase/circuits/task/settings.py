"""How the task search runs: one record, checked once (:class:`SearchSettings`)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ...checks import check_int, check_real
from ...errors import InputError
from ...limits import MAX_COUNT
from ..core.counterfactual import DEFAULT_TASK, check_kind
from ..core.metric import check_metric
from . import prune

#: The most points of an input integral (``steps``, ``prune_steps``) and of the curve's grid.
MAX_STEPS = 1000
MAX_POINTS = 1000

#: Fraction of the prompt pairs held out by default, and its largest value.
HOLDOUT = 0.5
MAX_HOLDOUT = 0.9


@dataclass(frozen=True)
class SearchSettings:
    """``metric`` and ``counterfactual``: the task's logit metric and corrupted input;
    ``holdout``: the share of pairs held out to score the circuit (0: in-sample); the ranking is
    pruning in context where its plan fits ``prune_budget`` edge-set × prompt passes, else
    pruning on integrated gradients (``prune_steps`` points) with its ``top`` edges patched
    exactly; ``steps``: the attribution's points (None: the metric's default); ``points``: the
    curve's grid; ``batch``: prompts per forward (None: by memory); ``force``: search a task
    the model does not do."""

    metric: str = "logit_diff"
    counterfactual: str = DEFAULT_TASK
    top: int = 20
    points: int = 24
    steps: int | None = None
    prune_steps: int = prune.STEPS
    batch: int | None = None
    holdout: float = HOLDOUT
    prune_budget: int = prune.BUDGET
    force: bool = False

    def __post_init__(self):
        def put(name, value):
            object.__setattr__(self, name, value)

        check_metric(self.metric)  # both before the model is read
        check_kind(self.counterfactual, task=True)
        put("top", check_int("top", self.top, 1, MAX_COUNT))
        put("points", check_int("points", self.points, 1, MAX_POINTS))
        if self.steps is not None:
            put("steps", check_int("steps", self.steps, 0, MAX_STEPS))
        put("prune_steps", check_int("prune_steps", self.prune_steps, 1, MAX_STEPS))
        if self.batch is not None:
            put("batch", check_int("batch", self.batch, 1, MAX_COUNT))
        put("holdout", check_real("holdout", self.holdout, 0.0, MAX_HOLDOUT))
        put("prune_budget", check_int("prune_budget", self.prune_budget, 0, MAX_COUNT))
        if not isinstance(self.force, bool):
            raise InputError(f"force is True or False, got {self.force!r}")

    @classmethod
    def of(cls, settings: SearchSettings | None = None, **changes) -> SearchSettings:
        """``settings`` (default: the defaults) with ``changes``; an unknown name is refused
        in one line naming the settings there are."""
        names = [f.name for f in fields(cls)]
        if unknown := sorted(set(changes) - set(names)):
            raise InputError(f"the task search takes no {', '.join(unknown)}; its settings: "
                             f"{', '.join(names)}")
        if settings is not None and not isinstance(settings, cls):
            raise InputError(f"settings is a SearchSettings, got {type(settings).__name__}")
        return replace(settings or cls(), **changes)


__all__ = ["HOLDOUT", "MAX_HOLDOUT", "MAX_POINTS", "MAX_STEPS", "SearchSettings"]
