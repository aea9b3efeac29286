"""What was found, in lines: the first thing ``score --composition`` and ``circuits`` say.

With the circuit search (rows as :func:`rmtbase.circuits.circuit_list` objects; ``meta`` the
circuits Dataset's attrs), in order:

- a first line when no head pair is unlike random and none is open, or "composition
  undecided" when none is flagged but the draws leave some open (:func:`_null_line`);
- one line per receiver, kind and path with confirmed sources (receivers by
  :data:`rmtbase.report.composition_standing.LABEL_ORDER`, then K, Q, V, direct before via
  MLP), each source signed (``supports``/``suppresses``) with its ranks and the fraction of the
  joint effect explained;
- weak explanation (< half), ``redundant`` sources, joint effect of the other sign;
- receivers with nothing confirmed; unlabelled receivers' dependencies;
- "no circuit found" with the reason;
- else the pairs unlike random and open at the composition's draws;
- how well the weights screen worked (Spearman against the exact effect) and :data:`RULE`.

A terminal shows :data:`TERMINAL_LINES` and says where the rest is (:func:`terminal`). Without
patching the weights' screen is said as not confirmed."""

from __future__ import annotations

import numpy as np

#: Lines a terminal shows before pointing to summary.txt / --json.
TERMINAL_LINES = 12
#: A receiver whose confirmed sources explain less than this share of the joint effect is said.
EXPLAINED_LOW = 0.5
_CHANGE = ("output_change", "attention_tv")
RULE = ("effects: drop of the receiver's behaviour statistic (mean attention, units 1) when the "
        "source's output is removed from that input, mean ± se over n sequences (+ supports, "
        "- suppresses); V: relative change of the receiver's output |dz|/|z|; confirmed: "
        "|effect| >= 3 se and >= 10 % of the receiver's score (0.1 for V), >= 8 sequences; "
        "explained: confirmed singles over all earlier sources removed together")


def _label(text) -> str:
    return "unlabelled" if not text or str(text) == "none" else str(text)


def _num(x, signed=True) -> str:
    if x is None or not np.isfinite(x):
        return "?"
    return f"{float(x):+.2g}" if signed else f"{float(x):.2g}"


def _effect(r: dict) -> str:
    change = r.get("metric") in _CHANGE
    e = _num(r.get("effect_causal"), signed=not change)
    se = r.get("effect_se")
    return e + ("" if se is None or not np.isfinite(se) else f" ± {float(se):.1g}")


def _path(kind: str, path: str) -> str:
    return f"{kind.upper()} {'via MLP' if path == 'via_mlp' else 'direct'}"


def _receiver(r: dict) -> str:
    lab = _label(r.get("label_to"))
    n = r.get("label_length") or 0
    at = f" at repeat {n}" if n else ""
    score = r.get("score_to")
    s = f"{float(score):.2f}{at}" if score is not None and r.get("metric") not in _CHANGE \
        else at.strip()
    return f"{lab} head {r['to']}" + (f" ({s})" if s else "")


def _source(r: dict) -> str:
    role = r.get("role") or "supports"
    verb = "changes it" if role == "changes" else role
    return (f"{r['from']} ({_label(r.get('label_from'))}) {verb} {_effect(r)} "
            f"[weights rank {r.get('rank_weights')}, attribution rank "
            f"{r.get('rank_attribution', '?')}]")


def _groups(circuits) -> dict:
    groups: dict = {}
    for c in circuits:
        groups.setdefault((c["to"], c["kind"], c.get("path", "direct")), []).append(c)
    return groups


def _order(groups, meta_rank):
    def key(g):
        r = groups[g][0]
        return (meta_rank(_label(r.get("label_to"))), r["to"], "kqv".index(g[1]),
                g[2] != "direct")
    return sorted(groups, key=key)


def _group_lines(rows: list[dict]) -> list[str]:
    r0 = rows[0]
    head = f"{_receiver(r0)} · {_path(r0['kind'], r0.get('path', 'direct'))}"
    conf = sorted((r for r in rows if r.get("confirmed")),
                  key=lambda r: -abs(r.get("effect_causal") or 0))
    joint = {"effect_causal": r0.get("joint_effect"), "effect_se": r0.get("joint_se"),
             "metric": r0.get("metric")}
    lines = []
    if conf:
        ex = r0.get("explained")
        has_joint = joint["effect_causal"] is not None and np.isfinite(joint["effect_causal"])
        has_ex = ex is not None and np.isfinite(ex) and r0.get("metric") not in _CHANGE
        tail = ("" if not has_joint else
                f"; explained {100 * ex:.0f} % of {_effect(joint)}" if has_ex else
                f"; all earlier sources together {_effect(joint)}")
        lines.append(f"{head}: " + "; ".join(_source(r) for r in conf) + tail)
        if ex is not None and np.isfinite(ex) and abs(ex) < EXPLAINED_LOW \
                and r0.get("metric") not in _CHANGE:
            lines.append(f"{head}: {100 * (1 - ex):.0f} % of the joint effect "
                         f"{_effect(joint)} stays unexplained by single sources")
    elif r0.get("redundant"):
        lines.append(f"{head}: no single source confirmed; all earlier sources together "
                     f"{_effect(joint)} (redundant: the sources matter only together)")
    if r0.get("joint_contradicts"):
        total = sum(r.get("effect_causal") or 0 for r in conf)
        lines.append(f"{head}: the confirmed sources sum to {_num(total)} but removing every "
                     f"earlier source together gives {_effect(joint)} (other sign)")
    return lines


def found_lines(ds, circuits=None, *, patched: bool = False, labels=None,
                meta: dict | None = None) -> list[str]:
    """Every line of the module docstring. ``circuits``: the search's rows; ``patched``: whether
    it ran (no rows then means nothing confirmed); ``labels``: the text probe's when it did not;
    ``meta``: the circuits Dataset's attrs."""
    from .composition_standing import label_rank

    meta = dict(meta or {})
    if not patched and not circuits:
        return _screen_lines(ds, labels)
    circuits = list(circuits or [])
    lines = []
    null_line, lead = _null_line(ds, meta.get("pairs_unlike_random"))
    if null_line and lead:
        lines.append(null_line)
    dep = [c for c in circuits if c.get("dependency")]
    labelled = [c for c in circuits if _label(c.get("label_to")) != "unlabelled"]
    groups = _groups(labelled)
    for g in _order(groups, label_rank):
        lines += _group_lines(groups[g])
    settled = {c["to"] for c in labelled if c.get("confirmed") or c.get("redundant")}
    quiet = sorted({c["to"] for c in labelled} - settled)
    for to in quiet:
        rows = [c for c in labelled if c["to"] == to]
        big = max(rows, key=lambda r: abs(r.get("effect_causal") or 0))
        lines.append(f"{_receiver(big)}: no source confirmed on any path (largest: "
                     f"{_path(big['kind'], big.get('path', 'direct'))} {_source(big)})")
    for to in sorted({c["to"] for c in dep}):
        rows = sorted((c for c in dep if c["to"] == to),
                      key=lambda r: -abs(r.get("effect_causal") or 0))[:3]
        lines.append(f"{to} (no behaviour label; dependencies, not circuits): " + "; ".join(
            f"{_path(r['kind'], r.get('path', 'direct'))} {r['from']} {_effect(r)}"
            for r in rows))
    if not any(c.get("confirmed") for c in circuits):
        if not labelled:
            tried = meta.get("repeat_lengths") or "the sequences given"
            lines.append(f"no circuit found: no head after layer 0 reached a behaviour label "
                         f"(repeat lengths tried: {tried}; threshold "
                         f"{meta.get('label_threshold', 0.4)} above chance)")
        else:
            lines.append(f"no circuit found: {len({c['to'] for c in labelled})} labelled "
                         "receiver(s) patched, no source confirmed")
    if null_line and not lead:
        lines.append(null_line)
    sw, sa = meta.get("spearman_weights_rank_vs_effect"), meta.get(
        "spearman_attribution_vs_effect")
    if sw is not None and np.isfinite(sw):
        lines.append(f"the weights' screen here: Spearman {float(sw):.2f} between a source's "
                     f"rank by weights and its exact effect (attribution: "
                     f"{float(sa):.2f}; {int(meta.get('n_tests', 0)):,} patched rows)")
    if circuits:
        lines.append(RULE)
    return lines


def _null_line(ds, flagged) -> tuple[str | None, bool]:
    """(the line saying what the composition's null decided, whether it leads): the pairs
    flagged unlike random of all M scored pair entries, at the draws ``ds.attrs["draws"]``,
    and the ``composition_open_pairs`` whose flag more draws could change. "No pair differs"
    only when nothing is open and the draws could flag a pair (no ``composition_draws_note``
    saying they cannot); with none flagged and some open: "composition undecided"."""
    a = getattr(ds, "attrs", {}) or {}
    if flagged is None and "composition_flag" in ds:
        flagged = int(np.asarray(ds["composition_flag"]).sum())
    if flagged is None:
        return None, False
    flagged = int(flagged)
    m = int(np.isfinite(ds["composition_p"].values).sum()) if "composition_p" in ds else None
    of = "" if m is None else f" of {m:,}"
    draws = a.get("draws", ds["composition_p"].attrs.get("draws") if m is not None else None)
    at = "" if draws is None else f" at {int(draws):,} draws"
    n_open = a.get("composition_open_pairs")
    n_open = None if n_open is None else int(n_open)
    cannot = "cannot flag" in str(a.get("composition_draws_note", ""))
    if flagged == 0 and (cannot or n_open):
        n = m if cannot and m is not None else n_open
        return (f"composition undecided: {n:,}{of} pairs open{at} (none flagged; more draws "
                "settle them): no claim that the heads' composition is random"), True
    opened = "" if n_open is None else f", {n_open:,} open"
    if flagged == 0:
        return (f"no head pair differs from random (composition: 0{of} pairs flagged{at}"
                f"{opened}): no circuit is expected"), True
    return f"composition: {flagged:,}{of} pairs unlike random{at}{opened}", False


def terminal(lines: list[str], where: str = "summary.txt and --json") -> list[str]:
    """The first :data:`TERMINAL_LINES` of ``lines`` and, when some are left, one line saying
    how many and where they all are."""
    if len(lines) <= TERMINAL_LINES:
        return list(lines)
    return lines[:TERMINAL_LINES - 1] + [f"… {len(lines) - TERMINAL_LINES + 1} more line(s): "
                                         f"all of them in {where}"]


def _screen_lines(ds, labels=None) -> list[str]:
    """No patching ran: with behaviour labels each labelled receiver's top source per kind by
    weights; else the strongest pair of each kind. Said as not confirmed."""
    from .composition_standing import standing_rows

    named = sorted(((layer, head), lab) for (layer, head), lab in (labels or {}).items()
                   if lab and str(lab) != "none" and layer > 0)
    if named:
        lines = []
        for (layer, head), lab in named:
            keep = np.zeros(ds["composition"].shape, bool)
            keep[:, :, :, layer, head] = True
            top = {}
            for r in standing_rows(ds, keep=keep):
                top.setdefault(r["kind"], r)
            lines.append(f"L{layer}H{head} ({lab}): top source by weights " + ", ".join(
                f"{k.upper()} {r['from']} ({_label((labels or {}).get((r['layer_from'], r['head_from'])))}"
                f", rank {r['rank_kind']:,} of the kind)" for k, r in sorted(top.items())))
        return lines + ["labels from the text probe; not confirmed by path patching"]
    n = int(ds.attrs.get("pairs_per_kind", np.isfinite(ds["composition"].isel(kind=0)).sum()))
    best = {}
    for r in standing_rows(ds, top=3 * 4):
        best.setdefault(r["kind"], r)
    lines = [f"strongest {k.upper()}-composition by weights: {r['from']} → {r['to']} (rank 1 of "
             f"{n:,}; effect {r['effect']:.3g}× the null median)" for k, r in sorted(best.items())]
    return lines + ["not confirmed: weights screen, path patching decides (add --probe)"]


__all__ = ["EXPLAINED_LOW", "RULE", "TERMINAL_LINES", "found_lines", "terminal"]
