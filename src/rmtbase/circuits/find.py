"""Circuits: candidates screened by the weights (composition), confirmed by path patching.

:func:`rmtbase.circuits.run.find_circuits` (``rmtbase.circuits.find_circuits``) runs, in
order:

1. the model on its sequences (:mod:`.sequences`: repeated random tokens by default, the
   probe's text or given sequences on request), capturing what patching needs and the probe's
   statistics (:mod:`.capture`); every head labelled (:mod:`.labels`);
2. the receivers of interest: every head after layer 0 with a specific label (induction,
   previous-token, duplicate-token, self/local: :data:`PATCHED_LABELS`); ``first-token``
   heads (sinks) only with ``sinks=True``; with none of them, the
   :data:`UNLABELLED_RECEIVERS` receivers with the largest composition score into them (any
   kind, any earlier source), measured by the change of their attention (q, k) or output (v)
   since they have no behaviour score. Why sinks are left out by default: ``first-token`` is
   the label of a head that passes no specific label and parks its attention on position 0
   (an attention sink: Xiao et al. 2023, *Efficient streaming language models with
   attention sinks*, arXiv:2309.17453); what writes into its query or key is not a
   circuit in the issue's sense (a source feeding a head's behaviour), and on SmolLM2 the
   sinks were 103 of its 126 labelled receivers after layer 0 (docs/path-patching.md, section
   5), about four fifths of the patching. They stay labelled in the output (``label`` of
   circuits.nc), not patched;
3. per receiver and kind (q, k, v), its top ``k`` earlier sources by that kind's composition
   score (``rank_weights``, 1 = top among the receiver's earlier sources), each removed on its
   own from that input, and all ``k`` together (:mod:`.patching`); the cost (receivers ×
   patches × sequences) is said before the work, a progress bar during it.

**Rule** (constants below). A candidate is ``confirmed`` when its effect is at least
:data:`CONFIRM_SE` standard errors and at least :data:`CONFIRM_FRACTION` of the receiver's
unpatched score (for the change metrics, output change and attention TV, at least
:data:`CONFIRM_FRACTION` itself, i.e. a 10 % change). ``dominant``: the confirmed candidate
with the largest effect among its receiver's candidates of the same kind. ``redundant`` (per
receiver and kind, on each of its rows): no single candidate is confirmed but removing all
``k`` together passes the rule; then no source is confirmed alone. 3 se is a one-sided
z ≈ 0.0013 before the number of candidates (at 1,000 candidates about 1 false positive by
chance alone when every true effect is 0); the 10 % floor keeps tiny but precise effects out.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ..errors import InputError
from .labels import head_name

#: Sources patched per receiver and kind by default (the issue asks for k ≥ 3).
DEFAULT_K = 3
CONFIRM_SE = 3.0
CONFIRM_FRACTION = 0.10
#: Receivers taken by composition when no head is labelled.
UNLABELLED_RECEIVERS = 8
#: Labels whose heads are patched as receivers by default (``first-token`` with ``sinks``).
PATCHED_LABELS = ("induction", "previous-token", "duplicate-token", "self/local")


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


def receivers(labels: xr.Dataset, composition: xr.Dataset, n: int = UNLABELLED_RECEIVERS,
              *, sinks: bool = False) -> list[tuple[int, int, str | None]]:
    """[(layer, head, statistic or None), …]: the receivers of interest (module docstring;
    ``sinks``: the ``first-token`` heads too)."""
    lab = labels["label"].transpose("layer", "head").values
    stat = labels["label_statistic"].transpose("layer", "head").values
    keep = PATCHED_LABELS + (("first-token",) if sinks else ())
    out = [(li, hi, str(stat[li, hi])) for li in range(1, lab.shape[0])
           for hi in range(lab.shape[1]) if lab[li, hi] in keep]
    if out:
        return out
    c = np.asarray(composition["composition"].values, dtype=np.float64)
    best = np.nanmax(np.where(np.isfinite(c), c, -np.inf), axis=(0, 1, 2))  # (L, H)
    best[0] = -np.inf
    order = np.argsort(-best.ravel(), kind="stable")[: int(n)]
    return [(int(i // best.shape[1]), int(i % best.shape[1]), None) for i in order
            if np.isfinite(best.ravel()[i])]


def passes(effect: float, se: float, base: float, metric_is_score: bool) -> bool:
    """The confirmation rule of the module docstring for one effect."""
    floor = CONFIRM_FRACTION * base if metric_is_score else CONFIRM_FRACTION
    return bool(np.isfinite(effect) and np.isfinite(se) and effect >= CONFIRM_SE * se
                and effect >= floor and effect > 0)


def plan(recv, k: int, n_sequences: int, length: int) -> dict:
    """The cost stated before the work: receivers, patches (3 kinds × (k single + 1 joint)
    per receiver) and sequences."""
    patches = len(recv) * 3 * (int(k) + 1)
    return {"receivers": len(recv), "patches": patches, "sequences": int(n_sequences),
            "tokens": int(n_sequences) * int(length)}


__all__ = ["CONFIRM_FRACTION", "CONFIRM_SE", "DEFAULT_K", "PATCHED_LABELS", "UNLABELLED_RECEIVERS",
           "check_composition", "head_name", "passes", "plan", "ranked_sources", "receivers"]
