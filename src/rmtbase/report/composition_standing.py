"""The order in which composition pairs are listed and drawn: by standing, not by null p.

A pair's standing is its rank among its receiver's earlier sources (``composition_rank_source``)
and over its kind (``composition_rank_kind``). :func:`standing_rows`: confirmed pairs first,
then rank among sources, rank over kind, score. :func:`chosen_pairs` (the figure): the confirmed
pairs (by :data:`LABEL_ORDER`); else the top ``k`` sources of each labelled receiver; else the
``top`` pairs of each kind."""

from __future__ import annotations

import re

import numpy as np

_HEAD = re.compile(r"^L(\d+)H(\d+)$")
#: Receiver labels in the order their circuits are said and drawn (sinks and unlabelled last).
LABEL_ORDER = ("induction", "previous-token", "duplicate-token", "self/local", "first-token",
               "unlabelled")


def label_rank(label) -> int:
    """Place of a behaviour label in :data:`LABEL_ORDER` ("none" and unknown ones last)."""
    text = "unlabelled" if not label or str(label) == "none" else str(label)
    return LABEL_ORDER.index(text) if text in LABEL_ORDER else len(LABEL_ORDER) - 1


def head_name(layer: int, head: int) -> str:
    """``L16H0``."""
    return f"L{int(layer)}H{int(head)}"


def parse_head(name: str) -> tuple[int, int]:
    """(layer, head) of ``"L16H0"``."""
    m = _HEAD.match(str(name))
    if m is None:
        raise ValueError(f"not a head name (L<layer>H<head>): {name!r}")
    return int(m.group(1)), int(m.group(2))


def ranks(ds) -> tuple[np.ndarray, np.ndarray]:
    """(rank among the receiver's sources, rank over the kind) of a composition Dataset: its
    stored variables, or computed for a file written before they were (the same function)."""
    if "composition_rank_source" in ds and "composition_rank_kind" in ds:
        return (np.asarray(ds["composition_rank_source"].values, np.float64),
                np.asarray(ds["composition_rank_kind"].values, np.float64))
    from ..scoring.composition.dataset import standing

    by_source, by_kind = standing(ds["composition"].values)
    return by_source.astype(np.float64), by_kind.astype(np.float64)


def confirmed_set(circuits) -> set[tuple[str, str, str]]:
    """{(kind, from, to)} of the confirmed rows of a circuits list (``circuit_list`` objects)."""
    return {(str(c["kind"]), str(c["from"]), str(c["to"])) for c in (circuits or [])
            if c.get("confirmed")}


def standing_rows(ds, *, top: int | None = None, circuits=None, keep=None) -> list[dict]:
    """Every cross-layer pair (or where ``keep`` holds) as a dict, in standing order, the first
    ``top`` (all by default)."""
    comp = np.asarray(ds["composition"].values, np.float64)
    by_source, by_kind = ranks(ds)
    sel = np.isfinite(comp) if keep is None else np.isfinite(comp) & np.asarray(keep, bool)
    idx = np.argwhere(sel)
    kinds = [str(k) for k in ds["kind"].values]
    conf = confirmed_set(circuits)
    t = tuple(idx.T)
    is_conf = np.array([(kinds[i], head_name(a, b), head_name(c, e)) in conf
                        for i, a, b, c, e in idx], bool) if conf else np.zeros(len(idx), bool)
    order = np.lexsort((-comp[t], by_kind[t], by_source[t], ~is_conf))
    if top is not None:
        order = order[:top]
    eff = np.asarray(ds["composition_effect"].values)
    pt = np.asarray((ds["composition_p_tail"] if "composition_p_tail" in ds
                     else ds["composition_p"]).values)
    flag = np.asarray(ds["composition_flag"].values, bool)
    n_h = ds.sizes["head_from"]
    rows = []
    for j in order:
        i, a, b, c, e = (int(x) for x in idx[j])
        at = (i, a, b, c, e)
        rows.append({"kind": kinds[i], "layer_from": a, "head_from": b, "layer_to": c,
                     "head_to": e, "from": head_name(a, b), "to": head_name(c, e),
                     "score": float(comp[at]), "effect": float(eff[at]),
                     "rank_source": int(by_source[at]), "sources": c * n_h,
                     "rank_kind": int(by_kind[at]), "p": float(pt[at]), "flag": bool(flag[at]),
                     "confirmed": bool(is_conf[j])})
    return rows


def chosen_pairs(ds, *, circuits=None, labels=None, k: int = 3, top: int = 10
                 ) -> tuple[list[dict], str]:
    """(pairs, how they were chosen) for the figure (module docstring). ``labels``: {(layer,
    head): behaviour label}, heads labelled ``none`` (or absent) not counted as labelled."""
    by_source, by_kind = ranks(ds)
    conf = confirmed_set(circuits)
    if conf:
        keep = np.zeros(by_source.shape, bool)
        kinds = [str(x) for x in ds["kind"].values]
        for kind, frm, to in conf:
            if kind in kinds:
                keep[(kinds.index(kind), *parse_head(frm), *parse_head(to))] = True
        got = standing_rows(ds, circuits=circuits, keep=keep)
        got.sort(key=lambda r: label_rank((labels or {}).get((r["layer_to"], r["head_to"]))))
        return got, (f"{len(got)} pair(s) confirmed by path patching" +
                     (", receivers by behaviour (induction first), then standing" if labels
                      else ""))
    named = {h for h, lab in (labels or {}).items() if lab and str(lab) != "none" and h[0] > 0}
    if named:
        keep = np.zeros(by_source.shape, bool)
        for layer, head in named:
            keep[:, :, :, layer, head] = by_source[:, :, :, layer, head] <= k
        got = standing_rows(ds, circuits=circuits, keep=keep)
        return got, (f"top {k} sources by weights (per kind) of the {len(named)} labelled "
                     "receiver(s); none confirmed by patching")
    got = standing_rows(ds, circuits=circuits, keep=by_kind <= top)
    return got, f"the {top} strongest pairs of each kind by weights (no behaviour labels)"


__all__ = ["LABEL_ORDER", "chosen_pairs", "confirmed_set", "head_name", "label_rank",
           "parse_head", "ranks", "standing_rows"]
