"""The circuit search's rule: which receivers, which sources, what counts as confirmed.

:func:`rmtbase.circuits.run.find_circuits` runs, per repeat length (:mod:`.sequences`): the
model on its sequences, every head's probe statistics and a label (:mod:`.labels`, chance
level and minimum counts included), each head at the length where its label's statistic is
largest. **Receivers**: the heads after layer 0 with a specific label (:data:`PATCHED_LABELS`;
``first-token`` sinks only with ``sinks=True``: Xiao et al. 2023, arXiv:2309.17453, say why a
sink's inputs are not a circuit), patched on the sequences of their own length. A receiver
without a label has no behaviour to measure: it gets circuits only when asked for by name, and
then its rows are **dependencies** (attention change or output change), never ``confirmed``.

**Sources**: every head of an earlier layer, screened by its first-order attribution estimate
(:mod:`.screen`) beside its rank by the weights (composition); exact path patching of every
source where the plan fits :data:`EXACT_BUDGET` patches, else of the union of the top ``k`` by
weights and the top ``k`` by attribution. Paths: ``direct`` (:mod:`.patching`) and ``via_mlp``
(:mod:`.mlp_path`, top ``k`` by its own attribution, patched exactly).

**Rule** (per row): ``confirmed`` when ``|effect| ≥ CONFIRM_SE · se`` and ``|effect| ≥
CONFIRM_FRACTION · score_to`` (``CONFIRM_FRACTION`` itself for the change metrics), with at
least :data:`MIN_SEQUENCES` sequences; ``role`` "supports" (the behaviour drops without the
source) or "suppresses" (it rises). A row is one two-sided z test at 3 se: ``P(|Z| ≥ 3) =
0.0027``, so among ``n`` rows with no true effect about ``0.0027 n`` pass the se part by chance
(stated as ``expected_false_confirmations``); the 10 % floor keeps small but precise effects
out. ``dominant``: the supporting confirmed row with the largest effect of its receiver and kind.
Per receiver, kind and path: ``joint_effect`` (every earlier source removed together),
``explained`` (the sum of the confirmed single effects over the joint effect, where the joint
effect passes the rule; else NaN), ``redundant`` (no single row confirmed, the joint removal
passes), ``joint_contradicts`` (the confirmed singles' sum and a joint effect of at least 3 se
have opposite signs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr

from ..errors import InputError
from .labels import head_name

#: Sources patched per receiver and kind by each ranking (weights, attribution).
DEFAULT_K = 3
CONFIRM_SE = 3.0
CONFIRM_FRACTION = 0.10
#: Two-sided P(|Z| >= CONFIRM_SE) of a row with no true effect.
FALSE_RATE = 0.0027
#: Fewest sequences a confirmation rests on (an se from fewer means little).
MIN_SEQUENCES = 8
#: Exact patches (receivers x kinds x sources) above which only the top k are patched.
EXACT_BUDGET = 3000
#: Labels whose heads are patched as receivers by default (``first-token`` with ``sinks``).
PATCHED_LABELS = ("induction", "previous-token", "duplicate-token", "self/local")
#: Receivers kept for back-compatibility of imports; unlabelled heads are never receivers
#: unless named.
UNLABELLED_RECEIVERS = 0


@dataclass(frozen=True)
class Search:
    """The options of one circuit search, checked (:func:`rmtbase.circuits.find_circuits`
    says what each means)."""

    k: int = DEFAULT_K
    sequences: object = None
    text: object = None
    receivers: tuple | None = None
    seed: int = 0
    threshold: float = 0.4
    sinks: bool = False
    lengths: object = "auto"
    screen: str = "auto"
    mlp_paths: object = "auto"
    layers: tuple | None = None
    progress: bool = True


def check_composition(composition: xr.Dataset) -> None:
    """One-line :class:`InputError` unless ``composition`` is a composition Dataset
    (:func:`rmtbase.scoring.composition.composition`)."""
    need = ("kind", "layer_from", "head_from", "layer_to", "head_to")
    if "composition" not in composition or tuple(composition["composition"].dims) != need:
        raise InputError("composition must be rmtbase's composition Dataset (a 'composition' "
                         f"variable over {', '.join(need)})")


def ranked_sources(composition: xr.Dataset, layer: int, head: int, kind: str):
    """[(layer_from, head_from, rank, score), …] of every earlier source of receiver
    (layer, head), best first by ``kind``'s composition score (rank 1 = top; NaN last)."""
    s = composition["composition"].sel(kind=kind, layer_to=layer, head_to=head)
    s = np.asarray(s.transpose("layer_from", "head_from").values, dtype=np.float64)[:layer]
    n_h = s.shape[1]
    flat = np.where(np.isfinite(s.ravel()), s.ravel(), -np.inf)
    order = np.argsort(-flat, kind="stable")
    return [(int(i // n_h), int(i % n_h), r + 1, float(s.ravel()[i]))
            for r, i in enumerate(order)]


def receivers(labels: xr.Dataset, *, sinks: bool = False) -> list[tuple[int, int, str]]:
    """[(layer, head, statistic), …]: the labelled receivers of the module docstring
    (``sinks``: the ``first-token`` heads too)."""
    lab = labels["label"].transpose("layer", "head").values
    stat = labels["label_statistic"].transpose("layer", "head").values
    keep = PATCHED_LABELS + (("first-token",) if sinks else ())
    return [(li, hi, str(stat[li, hi])) for li in range(1, lab.shape[0])
            for hi in range(lab.shape[1]) if lab[li, hi] in keep]


def passes(effect: float, se: float, base: float, metric_is_score: bool) -> bool:
    """The confirmation rule of the module docstring for one signed effect."""
    floor = CONFIRM_FRACTION * abs(base) if metric_is_score else CONFIRM_FRACTION
    return bool(np.isfinite(effect) and np.isfinite(se) and abs(effect) >= CONFIRM_SE * se
                and abs(effect) >= floor and effect != 0)


def exact_sources(ranked_weights, attribution, k: int, exact_all: bool):
    """The sources patched exactly for one receiver and kind: all, or the union of the top
    ``k`` by weights (``ranked_weights`` as :func:`ranked_sources`) and the top ``k`` by
    ``|attribution|`` (``(layer, H)``, NaN ignored), in weight-rank order."""
    if exact_all:
        return [(m, s) for m, s, _, _ in ranked_weights]
    keep = {(m, s) for m, s, _, _ in ranked_weights[:k]}
    a = np.abs(np.asarray(attribution, dtype=np.float64))
    if np.isfinite(a).any():
        flat = np.where(np.isfinite(a), a, -np.inf).ravel()
        for i in np.argsort(-flat, kind="stable")[:k]:
            if np.isfinite(flat[i]):
                keep.add((int(i // a.shape[1]), int(i % a.shape[1])))
    return [(m, s) for m, s, _, _ in ranked_weights if (m, s) in keep]


def plan(recv, n_sources: int, k: int, exact_all: bool) -> dict:
    """The cost stated before the work: receivers and exact patches (3 kinds × sources, or
    at most 2k a kind, + 1 joint)."""
    per = n_sources if exact_all else min(n_sources, 2 * int(k))
    return {"receivers": len(recv), "patches": len(recv) * 3 * (per + 1)}


__all__ = ["CONFIRM_FRACTION", "CONFIRM_SE", "DEFAULT_K", "EXACT_BUDGET", "FALSE_RATE",
           "MIN_SEQUENCES", "PATCHED_LABELS", "Search", "UNLABELLED_RECEIVERS", "check_composition",
           "exact_sources", "head_name", "passes", "plan", "ranked_sources", "receivers"]
