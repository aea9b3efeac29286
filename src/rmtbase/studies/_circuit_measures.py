"""Pure-numpy measures of study ``circuits``: how circuit pairs rank among all pairs
(Mann–Whitney AUC, fraction outranking), the interval of the largest fall or rise, and how a
head's profile moves against the loss drop."""

from __future__ import annotations

import numpy as np


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Mann–Whitney AUC of ``positive`` against the rest (ties ½); NaN if a group is empty."""
    s, y = np.asarray(scores, float).ravel(), np.asarray(positive, bool).ravel()
    pos, neg = s[y], s[~y]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    gt = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(gt / (pos.size * neg.size))


def outranked(scores: np.ndarray, positive: np.ndarray) -> float:
    """The largest, over positive pairs, fraction of other pairs scoring higher (a circuit pair is
    "top 5 %" when ≤ 5 % outrank it); NaN without both."""
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
    """``(axis, layer, head)``: intervals between a head's largest change of each axis (``axes``
    ``(checkpoint, axis, layer, head)``) and the loss-drop interval ``drop``; the first
    interval (leaving the random start) is excluded."""
    d = np.abs(np.diff(np.asarray(axes, float), axis=0))[1:]
    return np.abs(np.argmax(d, axis=0) + 2 - int(drop))


def profile_drop_ratio(axes: np.ndarray, drop: int) -> np.ndarray:
    """``(axis, layer, head)``: change over interval ``drop`` / median change per interval."""
    d = np.abs(np.diff(np.asarray(axes, float), axis=0))
    return d[int(drop) - 1] / np.median(d[1:], axis=0)
