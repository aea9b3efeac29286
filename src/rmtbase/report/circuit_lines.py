"""What was found, in a few lines: the first thing ``rmtbase score MODEL --composition``
says (terminal, ``summary.txt``, ``report.html``) — the circuits, not "every pair differs from
random", which is true of any trained model (issue 55, item 3).

With path patching (``--probe``; :mod:`rmtbase.circuits`, rows as ``circuit_list`` objects:
kind, from, to, label_from, label_to, rank_weights, effect_causal, effect_se, confirmed and,
where given, dominant and redundant):

- one line per (receiver label, source, kind) with confirmed pairs, receivers of the same
  label joined, induction first, then previous-token, duplicate-token, self/local, first-token
  (sinks), unlabelled; within a label K before Q before V: ``induction circuit: L16H0 (previous-token) → L17H3, L17H5 (induction);
  K-composition ranks 1, 6 of 35,235 (among each receiver's sources: 1, 1); confirmed by
  patching: induction drops 0.41 ± 0.03, 0.22 ± 0.02`` (the drop of the receiver's behaviour
  statistic when the source's output is removed from that input; for v, and for unlabelled
  receivers, the relative change the row's ``metric`` names). The ranks over the kind come from the composition
  Dataset (``composition_rank_kind``), the ranks among the receiver's sources from the rows;
- one line per labelled receiver whose sources matter only together (``redundant``);
- one line counting the labelled receivers with no source confirmed among their candidates.

Without patching: with behaviour labels (the text probe's, on an architecture the patching does
not run) each labelled receiver's top source per kind by weights; else the strongest pair of
each kind. Both said as screened, not confirmed.
"""

from __future__ import annotations

import numpy as np

#: Lines at most (the rest counted in a last line).
MAX_LINES = 8


def _rank_kind(ds, kind: str, frm: str, to: str):
    from .composition_standing import parse_head, ranks

    _, by_kind = ranks(ds)
    kinds = [str(k) for k in ds["kind"].values]
    v = by_kind[(kinds.index(kind), *parse_head(frm), *parse_head(to))]
    return int(v) if np.isfinite(v) else None


def _effect(r: dict) -> str:
    """``0.41 ± 0.03`` (the drop of the receiver's statistic, or its change)."""
    e, se = r.get("effect_causal"), r.get("effect_se")
    e = "?" if e is None or not np.isfinite(e) else f"{float(e):.2g}"
    return e + ("" if se is None or not np.isfinite(se) else f" ± {float(se):.1g}")


#: Receivers named in one line at most (the rest counted).
MAX_RECEIVERS = 6
_CHANGE = ("output_change", "attention_tv")


def _circuit_line(ds, rows: list[dict]) -> str:
    """One confirmed circuit: one source, one kind, receivers of one label."""
    r0 = rows[0]
    n = int(ds.attrs.get("pairs_per_kind", np.isfinite(ds["composition"].isel(kind=0)).sum()))
    more = len(rows) - MAX_RECEIVERS
    rows = rows[:MAX_RECEIVERS]
    kind_ranks = [_rank_kind(ds, r["kind"], r["from"], r["to"]) for r in rows]
    tos = ", ".join(r["to"] for r in rows) + (f" and {more} more" if more > 0 else "")
    lab_to, lab_from = _label(r0.get("label_to")), _label(r0.get("label_from"))
    effects = ", ".join(_effect(r) for r in rows)
    metric = r0.get("metric") or "the receiver's statistic"
    how = f"{metric} {effects}" if metric in _CHANGE else f"{metric} drops {effects}"
    head = f"{lab_to} circuit" if lab_to != "unlabelled" else "unlabelled receivers"
    return (f"{head}: {r0['from']} ({lab_from}) → {tos} ({lab_to}); "
            f"{r0['kind'].upper()}-composition ranks "
            f"{', '.join(str(k) for k in kind_ranks)} of {n:,} (among each receiver's sources: "
            f"{', '.join(str(r.get('rank_weights')) for r in rows)}); confirmed by patching: "
            f"{how}")


def _label(text) -> str:
    return "unlabelled" if not text or str(text) == "none" else str(text)


def _grouped(circuits) -> dict:
    groups: dict = {}
    for c in circuits:
        if c.get("confirmed"):
            groups.setdefault((_label(c.get("label_to")), c["from"], c["kind"]), []).append(c)
    return groups


def _group_order(groups: dict):
    """By the receivers' label (:data:`rmtbase.report.composition_standing.LABEL_ORDER`), then
    K, Q, V, then more receivers, then the best rank by weights."""
    from .composition_standing import label_rank

    def key(g):
        return (label_rank(g[0]), "kqv".index(g[2]) if g[2] in "kqv" else 3, -len(groups[g]),
                min(c.get("rank_weights") or 1e9 for c in groups[g]), g)
    return sorted(groups, key=key)


def found_lines(ds, circuits=None, *, patched: bool = False, labels=None) -> list[str]:
    """The lines of the module docstring, from the composition Dataset ``ds`` and the
    ``circuits`` rows; ``patched``: whether path patching ran (so that no rows means none
    confirmed, not "not run"); ``labels`` ({(layer, head): label}): the heads' behaviour
    labels when no patching ran (the text probe's)."""
    if not patched and not circuits:
        return _screen_lines(ds, labels)
    circuits = list(circuits or [])
    groups = _grouped(circuits)
    lines = [_circuit_line(ds, sorted(groups[g], key=lambda c: c["to"]))
             for g in _group_order(groups)]
    redundant = sorted({(c["to"], c.get("label_to") or "", c["kind"]) for c in circuits
                        if c.get("redundant")})
    lines += [f"{to} ({_label(lab)}): no single {kind.upper()} source confirmed; its top "
              "sources by weights matter together (redundant)" for to, lab, kind in redundant]
    receivers = {c["to"] for c in circuits}
    settled = {c["to"] for c in circuits if c.get("confirmed")} | {t for t, _, _ in redundant}
    if receivers - settled:
        lines.append(f"{len(receivers - settled)} of {len(receivers)} receiver(s) patched: no "
                     "source among their candidates confirmed")
    if not lines:
        lines.append("path patching confirmed no pair (no receiver with a behaviour label)")
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES - 1] + [f"… and {len(lines) - MAX_LINES + 1} more line(s) "
                                         "(composition.nc, circuits.nc)"]
    return lines


def _screen_lines(ds, labels=None) -> list[str]:
    """No patching ran: with behaviour labels each labelled receiver's top source per kind by
    weights; else the strongest pair of each kind. Said as not confirmed."""
    from .composition_standing import standing_rows

    named = sorted(((layer, head), lab) for (layer, head), lab in (labels or {}).items()
                   if lab and str(lab) != "none" and layer > 0)
    if named:
        lines = []
        for (layer, head), lab in named[:MAX_LINES - 1]:
            keep = np.zeros(ds["composition"].shape, bool)
            keep[:, :, :, layer, head] = True
            top = {}
            for r in standing_rows(ds, keep=keep):
                top.setdefault(r["kind"], r)
            lines.append(f"L{layer}H{head} ({lab}): top source by weights " + ", ".join(
                f"{k.upper()} {r['from']} ({_label((labels or {}).get((r['layer_from'], r['head_from'])))}"
                f", rank {r['rank_kind']:,} of the kind)" for k, r in sorted(top.items())))
        more = len(named) - len(lines)
        return lines + ([f"… and {more} more labelled head(s)"] if more > 0 else []) + [
            "labels from the text probe; not confirmed by path patching (it runs gpt2 and the "
            "LLaMA family)"]
    n = int(ds.attrs.get("pairs_per_kind", np.isfinite(ds["composition"].isel(kind=0)).sum()))
    best = {}
    for r in standing_rows(ds, top=3 * 4):
        best.setdefault(r["kind"], r)
    lines = [f"strongest {k.upper()}-composition by weights: {r['from']} → {r['to']} (rank 1 of "
             f"{n:,}; effect {r['effect']:.3g}× the null median)" for k, r in sorted(best.items())]
    return lines + ["not confirmed: weights screen, path patching decides (add --probe)"]


__all__ = ["MAX_LINES", "MAX_RECEIVERS", "found_lines"]
