"""The numbers study ``circuits`` (:mod:`rmtbase.studies.circuits`) reads from its arrays:
how circuit pairs rank among all pairs (Mann–Whitney AUC, the fraction of other pairs that
outrank them), the checkpoint interval of the largest fall or rise, and how a head's profile
moves against the loss drop (lag of its largest change, its change at the drop over its
median change). Pure numpy.
"""

from __future__ import annotations

import numpy as np


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Mann–Whitney AUC of ``scores`` for ``positive`` against the rest (ties count ½);
    NaN when either group is empty."""
    s, y = np.asarray(scores, float).ravel(), np.asarray(positive, bool).ravel()
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    gt = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(gt / (pos.size * neg.size))


def outranked(scores: np.ndarray, positive: np.ndarray) -> float:
    """The largest, over positive pairs, fraction of the other pairs whose score is higher
    (the issue's "top 5 %" read so that it means the same for 16 pairs as for 10⁶: a circuit
    pair passes when at most 5 % of the non-circuit pairs outrank it); NaN without both."""
    s, y = np.asarray(scores, float).ravel(), np.asarray(positive, bool).ravel()
    if not y.any() or y.all():
        return float("nan")
    neg = s[~y]
    return float(max((neg > v).mean() for v in s[y]))


def largest_step(values: np.ndarray, *, fall: bool) -> int:
    """Index k ≥ 1 of the checkpoint ending the interval (k − 1, k] over which ``values``
    falls (``fall=True``) or rises most."""
    d = np.diff(np.asarray(values, float))
    return int(np.argmax(-d if fall else d)) + 1


def profile_lags(axes: np.ndarray, drop: int) -> np.ndarray:
    """``(axis, layer, head)``: how many checkpoints the interval of a head's largest change of
    each axis (``axes`` ``(checkpoint, axis, layer, head)``) is from the loss-drop interval
    ``drop`` (0 = the profile moves most where the repeated-token loss collapses). The first
    interval (initialisation → first checkpoint after it), where every head leaves its random
    start, is left out: the largest change is sought over intervals 2, 3, …."""
    d = np.abs(np.diff(np.asarray(axes, float), axis=0))[1:]
    return np.abs(np.argmax(d, axis=0) + 2 - int(drop))


def profile_drop_ratio(axes: np.ndarray, drop: int) -> np.ndarray:
    """``(axis, layer, head)``: a head's change of each axis over the loss-drop interval
    ``drop``, over its median change per interval (intervals 2, 3, … as in
    :func:`profile_lags`; 1 = it moves at the drop as much as usual)."""
    d = np.abs(np.diff(np.asarray(axes, float), axis=0))
    return d[int(drop) - 1] / np.median(d[1:], axis=0)
