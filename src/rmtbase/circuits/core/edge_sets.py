"""``K`` edge sets in one graph forward (:meth:`.forward.TaskModel.run_sets`): the prompts
stacked ``K`` times, copy ``k`` reading set ``k``'s inputs; ``c_s`` held once, broadcast."""

from __future__ import annotations

import numpy as np

from ...errors import InputError


class EdgeSets:
    """``kept`` ``(K, n_edges)`` bool, ``K`` edge sets for one forward; ``k`` their count."""

    def __init__(self, kept, n_edges: int):
        kept = np.asarray(kept, dtype=bool)
        if kept.ndim != 2 or kept.shape[1] != n_edges:
            raise InputError(f"a batch of edge sets is (K, {n_edges}) bool, got {kept.shape}")
        self.kept, self.k = kept, kept.shape[0]


def copies(x, sets: int | None, axis: int = 0):
    """``x`` repeated ``sets`` times along ``axis`` (None: ``x``)."""
    if x is None or sets is None:
        return x
    reps = [1] * x.ndim
    reps[axis] = sets
    return x.repeat(*reps)


def delta(o, c, sets: int | None):
    """``o_s − c_s``: ``o`` over every set's copy of the prompts, ``c`` given once."""
    return o - c if sets is None else (o.view(sets, -1, *o.shape[1:]) - c).view_as(o)
