"""One behaviour label per head from the probe's statistics (:mod:`rmtbase.probe.behaviour`,
never recomputed): ``induction``, ``previous-token`` (``prev_token``), ``duplicate-token``
(``duplicate_token``), ``self/local`` (``self``), the sink ``first-token`` (``first_token``),
else ``none``.

Rule (:func:`label_heads`): statistic ``s`` earns its label when ``s ≥ c + θ (1 − c)``, θ =
:data:`THRESHOLD` = 0.4 (ARENA 3.0 ch. 1.2's head detectors, "score > 0.4"), ``c`` the
statistic of uniform causal attention on the same sequences (:func:`chance_levels`), pooled
over at least :data:`MIN_LABEL_QUERIES` queries. Specific labels come before the sink; among
them the largest score wins, exact ties in :data:`LABELS` order."""

from __future__ import annotations

import numpy as np
import xarray as xr

from ...errors import InputError
from ..core.graph import head_name

#: Labels in tie order (the sink and ``none`` last).
LABELS = ("induction", "previous-token", "duplicate-token", "self/local", "first-token", "none")
#: The probe statistic behind each label.
STATISTIC = {"induction": "induction", "previous-token": "prev_token",
             "duplicate-token": "duplicate_token", "self/local": "self",
             "first-token": "first_token"}
#: Mean attention a statistic must reach (ARENA's detectors, module docstring).
THRESHOLD = 0.4
#: Queries a statistic must pool over to earn a label (module docstring, "Chance").
MIN_LABEL_QUERIES = 100
_SPECIFIC = LABELS[:4]


def _label_one(scores: dict[str, float], bars: dict[str, float]) -> tuple[str, float]:
    best, best_score = "none", np.nan
    for group in (_SPECIFIC, ("first-token",)):
        for lab in group:
            s = scores[lab]
            if np.isfinite(s) and s >= bars[lab] and not (s <= best_score):
                best, best_score = lab, s
        if best != "none":
            break
    return best, best_score


def chance_levels(seqs) -> tuple[dict[str, float], dict[str, int]]:
    """({statistic: chance level}, {statistic: queries pooled}) on ``seqs``: each statistic of
    uniform causal attention ``A[i, j] = 1/(i+1)``, pooled as the probe pools it
    (:func:`rmtbase.probe.behaviour.window_sums`)."""
    from ...probe import behaviour as bh

    t = seqs.length
    u = np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]
    total = None
    for ids in seqs.ids:
        total = bh.add_sums(total, bh.window_sums(u[None], seqs.content, causal=True, ids=ids))
    means = bh.finish(total)
    stats = set(STATISTIC.values())
    return ({k: float(means[k][0]) for k in stats}, {k: int(total[k][1]) for k in stats})


def label_heads(probe: xr.Dataset, *, threshold: float = THRESHOLD, chance=None,
                counts=None) -> xr.Dataset:
    """One behaviour label per head by the rule of the module docstring.

    probe: a probe Dataset (a statistic it lacks earns no label). threshold: θ in (0, 1].
    chance: {statistic: chance level} (None: 0). counts: {statistic: pooled queries} (None: not
    checked). Returns a (layer, head) Dataset: ``label`` (of :data:`LABELS`), ``label_score``
    (the statistic that earned it; NaN for ``none``), ``label_statistic`` (its name), the probe's
    ``probe_source`` attr. InputError for a probe without the statistics or a bad θ."""
    missing = [s for s in STATISTIC.values() if s not in probe]
    if missing:
        raise InputError(f"the probe lacks {', '.join(missing)}: cannot label its heads")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
            or not 0.0 < float(threshold) <= 1.0:
        raise InputError(f"threshold must be a number in (0, 1], got {threshold!r}")
    th = float(threshold)
    bars = {}
    for lab, st in STATISTIC.items():
        c = float((chance or {}).get(st, 0.0))
        few = counts is not None and int(counts.get(st, 0)) < MIN_LABEL_QUERIES
        bars[lab] = np.inf if few else c + th * (1.0 - c)
    stats = {lab: np.asarray(probe[s].transpose("layer", "head").values, dtype=np.float64)
             for lab, s in STATISTIC.items()}
    n_l, n_h = stats["induction"].shape
    label = np.empty((n_l, n_h), dtype=object)
    score = np.full((n_l, n_h), np.nan)
    for li in range(n_l):
        for hi in range(n_h):
            label[li, hi], score[li, hi] = _label_one(
                {lab: v[li, hi] for lab, v in stats.items()}, bars)
    statistic = np.array([[STATISTIC.get(x, "") for x in row] for row in label], dtype=object)
    out = xr.Dataset(coords={"layer": probe["layer"].values, "head": probe["head"].values})
    out["label"] = (("layer", "head"), label.astype(str), {
        "long_name": "behaviour label of the head", "units": "1",
        "definition": f"first of {', '.join(LABELS)} whose statistic s reaches "
                      f"c + {th} (1 - c), c its chance level (rmtbase.circuits.labels)"})
    out["label_score"] = (("layer", "head"), score, {
        "long_name": "the statistic that earned the label", "units": "1"})
    out["label_statistic"] = (("layer", "head"), statistic.astype(str), {
        "long_name": "name of the probe statistic behind the label", "units": "1"})
    out.attrs.update(label_threshold=th,
                     label_rule="ARENA 1.2 head detectors' 0.4 above chance (uniform causal "
                                "attention); specific labels before the first-token sink; "
                                "largest score, ties in label order",
                     label_min_queries=MIN_LABEL_QUERIES)
    if "probe_source" in probe.attrs:
        out.attrs["probe_source"] = probe.attrs["probe_source"]
    return out


def label_across(probes: dict, chances: dict, counts: dict, *,
                 threshold: float = THRESHOLD) -> xr.Dataset:
    """Labels from probes at several repeat lengths: each head takes the length where it earns a
    specific label with the largest score (else ``first-token``, else ``none`` at the longest).

    probes, chances, counts: {repeat length: probe Dataset / :func:`chance_levels`' dicts}.
    Returns :func:`label_heads`' Dataset plus ``label_length`` (tokens per half) and
    ``statistic_by_length`` (statistic, repeat_length, layer, head)."""
    lengths = sorted(probes)
    per = {n: label_heads(probes[n], threshold=threshold, chance=chances[n], counts=counts[n])
           for n in lengths}
    first = per[lengths[-1]]
    n_l, n_h = first["label"].shape
    label = np.array(first["label"].values, dtype=object)
    score = np.array(first["label_score"].values, dtype=np.float64)
    stat = np.array(first["label_statistic"].values, dtype=object)
    length = np.full((n_l, n_h), lengths[-1], dtype=np.int64)
    rank = {lab: (0 if lab in _SPECIFIC else 1 if lab == "first-token" else 2) for lab in LABELS}
    for li in range(n_l):
        for hi in range(n_h):
            best = None
            for n in lengths:
                lab = str(per[n]["label"].values[li, hi])
                sc = float(per[n]["label_score"].values[li, hi])
                key = (rank[lab], -sc if np.isfinite(sc) else 0.0)
                if best is None or key < best[0]:
                    best = (key, n, lab, sc, str(per[n]["label_statistic"].values[li, hi]))
            _, length[li, hi], label[li, hi], score[li, hi], stat[li, hi] = best
    out = first.copy()
    out["label"] = (("layer", "head"), label.astype(str), first["label"].attrs)
    out["label_score"] = (("layer", "head"), score, first["label_score"].attrs)
    out["label_statistic"] = (("layer", "head"), stat.astype(str), first["label_statistic"].attrs)
    out["label_length"] = (("layer", "head"), length, {
        "long_name": "repeat length the label was earned at (tokens per half)",
        "units": "tokens"})
    names = sorted(set(STATISTIC.values()))
    out["statistic_by_length"] = (
        ("statistic", "repeat_length", "layer", "head"),
        np.stack([np.stack([np.asarray(probes[n][s].transpose("layer", "head").values,
                                       dtype=np.float64) for n in lengths]) for s in names]),
        {"long_name": "each label statistic at each repeat length", "units": "1"})
    out = out.assign_coords(statistic=np.array(names, dtype=str),
                            repeat_length=np.array(lengths, dtype=np.int64))
    out["chance_by_length"] = (("statistic", "repeat_length"), np.array(
        [[chances[n][s] for n in lengths] for s in names]), {
        "long_name": "the statistic of uniform causal attention (chance level)", "units": "1"})
    out.attrs["repeat_lengths"] = ", ".join(str(n) for n in lengths)
    return out


__all__ = ["LABELS", "MIN_LABEL_QUERIES", "STATISTIC", "THRESHOLD", "chance_levels", "head_name",
           "label_across", "label_heads"]
