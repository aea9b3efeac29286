"""The stopping rule in words: what keeps decisions open (:func:`tail_counts`,
:func:`open_reasons`), the draws used (:func:`stopping_note`) and what the stated error does
not cover (:func:`not_covered`)."""

from __future__ import annotations

import numpy as np

from ..stopping.rule import STOP_ERROR


def tail_counts(groups, values, names) -> tuple[dict, np.ndarray]:
    """({stat: (layer, head) k}, (layer, head) N): of each head's N spectral reference draws
    (its group's, as in :func:`unsettled`), the k at or beyond its value of each statistic in
    ``names`` on its nearer side (what :func:`p_interval` counts). NaN values give k = N."""
    from ...decision.scale import normalise

    rq = np.asarray(values["q.rms"], dtype=np.float64)
    rk = np.asarray(values["k.rms"], dtype=np.float64)
    shape = rq.shape
    counts = {n: np.zeros(shape, dtype=np.int64) for n in names}
    total = np.zeros(shape, dtype=np.int64)
    for rows, joint, spec in groups:
        rows = np.arange(shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
        ref = joint if spec is None else spec
        for n in names:
            x = np.sort(normalise(n, ref[n], ref["q.rms"], ref["k.rms"]))
            x = x[np.isfinite(x)]
            v = normalise(n, np.asarray(values[n])[rows], rq[rows], rk[rows])
            k = np.minimum(np.searchsorted(x, v, side="right"),
                           x.size - np.searchsorted(x, v, side="left"))
            counts[n][rows] = np.where(np.isnan(v), x.size, k)
            total[rows] = x.size
    return counts, total


def open_reasons(open_heads, counts, total, limit: int = 4) -> str:
    """For each open head (at most ``limit``): "layer L head H: STAT with k of N draws beyond", the
    statistic with fewest draws beyond (k = 0 settles only by more draws); positions among scored
    heads."""
    heads = [tuple(int(i) for i in h) for h in np.argwhere(np.asarray(open_heads))]
    parts = []
    for h in heads[:limit]:
        stat = min(counts, key=lambda n: counts[n][h])
        k, n = int(counts[stat][h]), int(total[h])
        beyond = f"beyond all {n} draws" if k == 0 else f"{k} of {n} draws at or beyond"
        parts.append(f"layer {h[0]} head {h[1]}: {stat} {beyond}")
    if len(heads) > limit:
        parts.append(f"{len(heads) - limit} more")
    return "; ".join(parts)


def not_covered() -> str:
    """What the stopping error does not cover: the fixed-size draws that also
    enter a decision, each with its own Monte Carlo error."""
    from ..profile.stopping import SCHEDULE
    from ..stopping.joint import JOINT_DRAWS

    sd = np.sqrt(0.05 * 0.95 / SCHEDULE[-1])
    sizes = ", ".join(map(str, SCHEDULE[:-1]))
    return ("the stopping error covers the spectral null draws only, not the other draws "
            "that also enter a decision: the element-statistic table and the omnibus "
            f"calibration on it (grown towards {JOINT_DRAWS} draws while a head's decision on "
            "its statistics p could change, with its own stated error: "
            "rmtbase.scoring.stopping.joint; head_calibration_draws says how many each head "
            f"used), and the profile null of the factor axes ({sizes} or {SCHEDULE[-1]} "
            f"draws a shape, more only while a decision could differ from its value on all "
            f"{SCHEDULE[-1]}, with its own stated error: rmtbase.scoring.profile.stopping; "
            f"profile_null_draws says how many; the {SCHEDULE[-1]} themselves have Monte "
            f"Carlo sd {sd:.4f} of a p <= 0.05 rate, under a quarter of the binomial se of "
            "1,000 heads)")


def stopping_note(draws: int, settled: bool, cap: int, error: float = STOP_ERROR,
                  budget: bool = False) -> str:
    """One sentence for ``summary.txt``: how many spectral null draws the decisions used, and
    which draws the stated error does not cover (:func:`not_covered`); ``budget``: the growth
    budget stopped the spectral null."""
    if budget and not settled:
        return (f"the growth budget stopped the spectral null at {draws} draws while some "
                "head's decision was open: each such head is undecided (head_undecided, its p "
                f"in [head_p_lo, head_p_hi] with probability >= 1 - {error:g}), the flags are "
                "Benjamini-Hochberg over the upper ends (rmtbase.decision.undecided); "
                f"--growth-budget none draws until settled; {not_covered()}")
    if settled:
        return (f"every head's decision was settled with {draws} spectral null draws "
                f"(Clopper-Pearson intervals of each p on the side of its Benjamini-Hochberg "
                f"threshold; error <= {error:g}); the null was not extended to refine p-values "
                f"of settled heads: deeper p (for ranking) needs --max-draws N; {not_covered()}")
    return (f"some head's decision was still open after {draws} spectral null draws (the cap "
            f"is {cap}; a block-quantised storage's spectral null is not extended; stopping "
            f"error {error:g}): its flag rests on the draws there are; {not_covered()}")


__all__ = ["not_covered", "open_reasons", "stopping_note", "tail_counts"]
