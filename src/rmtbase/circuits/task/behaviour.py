"""Whether the model does the task, measured before any search (docs/tasks.md, "The model
does the task"). On the fit pairs: the full model's metric ``m_i(M)`` and the empty graph's
``m_i(∅)``, their means and se over pairs, the behaviour ``m(M) − m(∅)`` with the se of the
paired differences, and the pairs whose clean answer logit beats the wrong token's. The task
is refused (one line, before the search) unless the behaviour lies on the metric's better side
(above for ``logit_diff`` and ``logprob``, below for ``kl``) by at least :data:`MIN_SE` se and
the answer wins on more than half of the pairs; ``force`` searches anyway."""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ..core.se import mean_se

#: Standard errors by which the full model must beat the empty graph.
MIN_SE = 3.0


def measure(runner) -> dict:
    """The behaviour of ``runner``'s task (module docstring) as summary.json's ``behaviour``:
    ``pairs``, ``metric``, ``full``, ``full_se``, ``empty``, ``empty_se``, ``behaviour``,
    ``behaviour_se``, ``wins`` (answer logit above wrong's)."""
    g = runner.tm.graph
    per = runner.metrics([g.full(), g.empty()], desc="full and empty graphs")
    ld = per[0] if runner.metric == "logit_diff" else \
        runner.metrics([g.full()], desc="full model", metric="logit_diff")[0]
    m, se = mean_se(per)
    d, d_se = mean_se(per[0] - per[1])
    return {"pairs": int(per.shape[1]), "metric": runner.metric, "full": float(m[0]),
            "full_se": float(se[0]), "empty": float(m[1]), "empty_se": float(se[1]),
            "behaviour": float(d), "behaviour_se": float(d_se),
            "wins": int((ld > 0).sum())}


def failure(b: dict) -> str | None:
    """Why :func:`measure`'s ``b`` is refused, or None; short, so that the error line stays
    within 200 characters (the full and empty metrics are on the screen's line before it)."""
    better = -1.0 if b["metric"] == "kl" else 1.0
    why = []
    if not better * b["behaviour"] >= MIN_SE * b["behaviour_se"] or b["behaviour"] == 0:
        side = "below" if better < 0 else "above"
        why.append(f"{b['metric']} full − empty {b['behaviour']:+.3g} ± "
                   f"{b['behaviour_se']:.2g}, not {MIN_SE:g} se {side} 0")
    if not 2 * b["wins"] > b["pairs"]:
        why.append(f"answer beats wrong on {b['wins']} of {b['pairs']}")
    return "; ".join(why) or None


def check(b: dict, force: bool = False) -> None:
    """InputError in one line where :func:`failure` names a reason and not ``force``."""
    why = failure(b)
    if why is not None and not force:
        raise InputError(f"the model does not do this task on {b['pairs']} fit pairs: {why}; "
                         f"--force searches anyway")


def line(b: dict) -> str:
    """The behaviour in one line (the screen's and summary.txt's)."""
    z = b["behaviour"] / b["behaviour_se"] if b["behaviour_se"] > 0 else np.inf * np.sign(
        b["behaviour"])
    forced = "" if failure(b) is None else " (searched with --force)"
    return (f"on the {b['pairs']} fit pairs: full model {b['full']:.4g} ± {b['full_se']:.2g}, "
            f"empty graph {b['empty']:.4g} ± {b['empty_se']:.2g}, difference "
            f"{b['behaviour']:+.4g} ({z:+.1f} se); answer beats wrong on {b['wins']} of "
            f"{b['pairs']}{forced}")


__all__ = ["MIN_SE", "check", "failure", "line", "measure"]
