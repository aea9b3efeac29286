"""What the null draws can resolve against what one head needs to be flagged.

With N draws and no GPD tail (N < 8 · MIN_TAIL) no p goes below 2/(N + 1). Where that exceeds
alpha / n_heads, attrs ``resolution_note`` says the decision is limited by the draws."""

from __future__ import annotations

import numpy as np

from .tails import MIN_TAIL


def resolution_note(n_draws, n_heads: int, alpha: float, null=None) -> str:
    """'' or one sentence: the smallest p the draws give exceeds alpha / n_heads. ``n_draws``: draws
    per statistic, a sequence or {statistic: draws}; with names, the sentence names the option to
    raise (``--element-draws`` where :meth:`~rmtbase.stats.null_kind.Null.needs_element_draws`,
    else ``--draws``)."""
    if not n_draws:
        return ""
    named = dict(n_draws) if isinstance(n_draws, dict) else {}
    n = int(min(named.values() if named else n_draws))
    if n // 8 >= MIN_TAIL:
        return ""
    floor = min(1.0, 2.0 / (n + 1))
    need = alpha / max(1, n_heads)
    if floor <= need:
        return ""
    option = "--draws"
    if null is not None and null.needs_element_draws("all") and named:
        from ..stats import SPECTRAL_STATS

        spectral = {f"qk.{s}" for s in SPECTRAL_STATS} | set(SPECTRAL_STATS)
        limiting = [k for k, v in named.items() if int(v) == n]
        if any(k.startswith("qk.") and k not in spectral for k in limiting):
            option = "--element-draws"
    return (f"with {n} null draws per statistic no p-value goes below {floor:.3g} (a GPD tail "
            f"needs >= {8 * MIN_TAIL} draws), while one head alone needs p <= alpha/heads = "
            f"{need:.2g} to be flagged: the decision is limited by the draws (use more, e.g. "
            f"{option} {int(np.ceil(2 / need))}); read the profile's effects, in each axis's "
            "own units, for how the heads differ")
