"""A task's output losses, ``−log p(answer)`` (nats; the ``logprob`` metric negated), mean and
se over prompts: the full model, the circuit alone, the circuit removed, every edge removed;
what a circuit keeps of the prediction, as the head search's :mod:`..head.output_loss`."""

from __future__ import annotations

import numpy as np

from ..core.runner import Runner
from ..core.se import mean_se

#: What the losses are (the summary's ``output_losses.unit``).
LOSS_UNIT = "nats: -log p(answer), mean and se over the scored prompts"
#: The losses, in the order measured.
LOSSES = ("clean", "circuit_only", "circuit_removed", "all_removed")


def output_losses(runner: Runner, kept) -> dict:
    """``{name: {"mean", "se"}}`` for each of :data:`LOSSES` (module docstring) of circuit
    ``kept`` ``(n_edges,)`` on ``runner``'s prompts and counterfactual, as prepared for its
    own metric."""
    g, kept = runner.tm.graph, np.asarray(kept, dtype=bool)
    m, se = mean_se(-runner.metrics([g.full(), kept, ~kept, g.empty()], desc="output losses",
                                    metric="logprob"))
    return {k: {"mean": float(a), "se": float(b)} for k, a, b in zip(LOSSES, m, se,
                                                                      strict=True)}


__all__ = ["LOSSES", "LOSS_UNIT", "output_losses"]
