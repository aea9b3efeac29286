"""A circuit scored as a whole: :func:`ratio` (the head search's, :mod:`..head.faithfulness`) or
:func:`normalised`, each a ratio of means with one delta-method se (:func:`ratio_se`). A task's
circuit (an edge set ``C``) is scored as a subgraph: ``m(C)``, the metric with only ``C`` kept,
beside the full model's ``m(M)`` and the empty graph's ``m(∅)`` (means over prompts). Faithfulness
``f(C) = (m(C) − m(∅)) / (m(M) − m(∅))`` (:func:`normalised`), the ratio ``m(C) / m(M)``,
completeness ``m(M ∖ C)`` (Wang et al. 2022). The curve: ``f`` of the top ``k`` edges by ``|score|``
at every ``k`` (at most :data:`DENSE` edges) or on a log grid, its area over ``x = log(1 + k) /
log(1 + E)`` (trapezoids); the smallest ``k`` reaching ``f ≥ 0.8``, on a grid the first crossing's
bracket bisected to :data:`SCAN` edges (or ``resolution`` of its end) and then measured at every
``k``, as a curve need not rise monotonically."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import InputError
from .runner import Runner

#: Faithfulness the smallest circuit must reach.
TARGET = 0.8
#: The least ``|m(M) − m(∅)|``, relative to ``max(1, |m(M)|)``, a task's metric must move by.
MOVES = 1e-9


def ratio_se(a, b, f):
    """The delta-method se of ``f = ā / b̄`` over N pairs: ``sd(a − f b) / √N / |b̄|``."""
    return (a - f * b).std(-1, ddof=1) / np.sqrt(b.size) / abs(b.mean())


def ratio(values, base) -> tuple[float, float]:
    """``(mean values / mean base, its se)`` where both are finite; NaN on < 2 or mean 0."""
    base = np.asarray(base, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(base) & np.isfinite(values)
    if ok.sum() < 2 or base[ok].mean() == 0:
        return np.nan, np.nan
    b, v = base[ok], values[ok]
    f = v.mean() / b.mean()
    return float(f), float(ratio_se(v, b, f))


def normalised(m, full: float, empty: float):
    """``(m − m(∅)) / (m(M) − m(∅))``: 0 at the empty graph's metric, 1 at the full model's."""
    return (np.asarray(m) - empty) / (full - empty)


def log_grid(n_edges: int, points: int = 24) -> np.ndarray:
    """``0`` and about ``points`` integers from 1 to ``n_edges``, log-spaced, every one once."""
    g = np.unique(np.round(np.geomspace(1, n_edges, points)).astype(int))
    return np.concatenate([[0], g])


def top_k(order: np.ndarray, k: int, n_edges: int) -> np.ndarray:
    kept = np.zeros(n_edges, dtype=bool)
    kept[order[:k]] = True
    return kept


@dataclass
class Scorer:
    """``m(M)``, ``m(∅)`` of ``runner``'s task, measured once; :meth:`faithfulness`."""

    runner: Runner
    full: float = field(init=False)
    empty: float = field(init=False)

    def __post_init__(self):
        g = self.runner.tm.graph
        self._per = self.runner.metrics([g.full(), g.empty()], desc="full and empty graphs")
        v = self._per.mean(-1)
        self.full, self.empty = float(v[0]), float(v[1])
        if not abs(self.full - self.empty) > MOVES * max(1.0, abs(self.full)):
            raise InputError(f"the metric does not move between the full model "
                             f"({self.full:.6g}) and the counterfactual ({self.empty:.6g}): "
                             f"no circuit carries it; check that answer differs from wrong "
                             f"and clean from corrupted")

    def faithfulness(self, m) -> np.ndarray:
        return normalised(m, self.full, self.empty)

    def faithfulness_se(self, per_prompt, f) -> np.ndarray:
        """The se of faithfulnesses ``f`` of sets with ``per_prompt`` ``(K, N)`` metrics: ``ā/b̄``
        (``a = m(C) − m(∅)``, ``b = m(M) − m(∅)``), :func:`ratio_se`."""
        full, empty = self._per
        a = np.asarray(per_prompt, dtype=np.float64) - empty
        b = full - empty
        f = np.asarray(f, dtype=np.float64)[:, None]
        return ratio_se(a, b, f)

    def means(self, kept_sets, desc: str = "circuits") -> np.ndarray:
        return self.runner.metrics(kept_sets, desc=desc).mean(-1)


#: The bisection of the smallest circuit stops at a bracket of this fraction of its upper end.
RESOLUTION = 0.01
#: A graph of at most this many edges has its curve measured at every ``k``.
DENSE = 512
#: A bracket of at most this many edges has every ``k`` in it measured, up to the first
#: reaching the target, this many sizes a pass over the prompts.
SCAN = 64
SCAN_CHUNK = 8


def curve(scorer: Scorer, scores, *, points: int = 24, target: float = TARGET,
          resolution: float = RESOLUTION) -> dict:
    """The faithfulness curve of edges ranked by ``|scores|`` (module docstring): ``k``,
    ``metric``, ``faithfulness`` on the grid (every ``k`` on a graph of at most
    :data:`DENSE` edges), ``area``, ``smallest`` (None if no ``k`` reaches ``target``),
    ``order`` (the ranking)."""
    n = scorer.runner.tm.graph.n_edges
    order = np.argsort(-np.abs(np.asarray(scores)), kind="stable")
    ks = np.arange(n + 1) if n <= DENSE else log_grid(n, points)
    m = scorer.means([top_k(order, int(k), n) for k in ks], "faithfulness curve")
    f = scorer.faithfulness(m)
    x = np.log1p(ks) / np.log1p(n)
    area = float(np.sum(np.diff(x) * (f[1:] + f[:-1]) / 2))
    hit = np.flatnonzero(f >= target)
    smallest = None
    if hit.size:
        i = int(hit[0])
        lo, hi = (int(ks[i - 1]), int(ks[i])) if i else (0, 0)
        smallest = _smallest(scorer, order, n, lo, hi, target, resolution)
    return {"k": ks, "metric": m, "faithfulness": f, "area": area, "smallest": smallest,
            "order": order, "target": target}


def _smallest(scorer, order, n, lo, hi, target, resolution) -> int:
    """The smallest ``k`` in ``(lo, hi]`` whose top ``k`` reaches ``target`` (``hi`` does):
    bisection while the bracket is wider than :data:`SCAN` and ``resolution · hi``, then
    every ``k`` of a bracket of at most :data:`SCAN` measured, so that a curve that is not
    monotone inside it is not stepped over."""
    while hi - lo > max(SCAN, int(resolution * hi)):
        mid = (lo + hi) // 2
        fm = scorer.faithfulness(scorer.means([top_k(order, mid, n)]))[0]
        lo, hi = (lo, mid) if fm >= target else (mid, hi)
    if 1 < hi - lo <= SCAN:  # upwards, :data:`SCAN_CHUNK` sizes a pass, to the first reaching
        for at in range(lo + 1, hi, SCAN_CHUNK):
            ks = np.arange(at, min(at + SCAN_CHUNK, hi))
            f = scorer.faithfulness(scorer.means([top_k(order, int(k), n) for k in ks],
                                                 "smallest circuit"))
            reach = np.flatnonzero(np.asarray(f) >= target)
            if reach.size:
                return int(ks[reach[0]])
    return hi


def evaluate_kept(scorer: Scorer, kept) -> dict:
    """A circuit ``kept`` ``(n_edges,)`` bool: its size, ``metric`` ``m(C)``, ``faithfulness``,
    ``ratio`` ``m(C)/m(M)``, ``completeness`` ``m(M ∖ C)`` and its faithfulness, with the full
    and empty graphs' metric; the faithfulnesses with their se (:meth:`Scorer.faithfulness_se`)."""
    kept = np.asarray(kept, dtype=bool)
    per = scorer.runner.metrics([kept, ~kept], desc="circuits")
    m_c, m_rest = per.mean(-1)
    f = scorer.faithfulness([m_c, m_rest])
    f_se = scorer.faithfulness_se(per, f)
    return {"edges": int(kept.sum()), "metric": float(m_c), "faithfulness": float(f[0]),
            "faithfulness_se": float(f_se[0]),
            "ratio": float(m_c / scorer.full) if scorer.full else float("nan"),
            "completeness_metric": float(m_rest), "completeness_faithfulness": float(f[1]),
            "completeness_faithfulness_se": float(f_se[1]),
            "full_metric": scorer.full, "empty_metric": scorer.empty}


__all__ = ["RESOLUTION", "TARGET", "Scorer", "curve", "evaluate_kept", "log_grid", "normalised",
           "ratio", "ratio_se", "top_k"]
