"""What was found, in lines: the first thing ``score --composition`` and ``circuits`` say.

With the circuit search (rows as :func:`rmtbase.circuits.circuit_list` objects, or the search's
own rows; ``meta`` the circuits Dataset's attrs), :func:`found_lines` gives, in order of
importance (a terminal shows the first lines):

- a first line when no head pair is unlike random and none is open, or "composition
  undecided" when none is flagged but the draws leave some open (:func:`_null_line`);
- one line per circuit of the first label present (induction where there is one; else the
  first circuit only): the confirmed q or k sources (each with its path and effect ± se) → the
  receivers that share exactly those sources, kind and label, and the circuit's
  ``faithfulness`` ± se (``faithfulness_empty`` its floor) where measured. Circuits by their
  first receiver's layer and head, K before Q; sources by |effect|; then each induction
  circuit's output loss (:mod:`.circuit_losses`);
- one line of the rows that pass the rule under zero ablation only (``depends == "zero"``), one
  of those mean and resample disagree on (``"counterfactual"``), neither confirmed (a list
  longer than a line cut to ``+N more``: :func:`rmtbase.report.line_width.listed`);
- one line summing up the confirmed V sources (each is in :func:`receiver_lines`);
- the other labels' circuit lines; the receivers and kinds whose sources matter only together
  (``redundant``); labelled receivers with nothing confirmed; unlabelled ones' dependencies;
- "no circuit found" with the reason; else the pairs unlike random and open at the
  composition's draws; how well the weights screen worked;
- the counterfactual the effects were measured under.

:func:`receiver_lines` gives one receiver's lines (every confirmed source by kind, V included)
as soon as that receiver is done; ``summary.txt`` lists them all by receiver, then the legend
(:mod:`.circuit_legend`), which states each number's meaning once. :func:`terminal` fits the
lines in :data:`TERMINAL_LINES` rows of :data:`TERMINAL_WIDTH` columns and names the file that
holds the rest. Without patching the weights' screen is said as not confirmed.
"""

from __future__ import annotations

import textwrap

import numpy as np

from . import circuit_text as T
from .line_width import listed

#: Rows a terminal shows of what was found, its heading included, and their width.
TERMINAL_LINES = 24
TERMINAL_WIDTH = 80
#: Rows one line may wrap to on a terminal before it is cut with "…".
LINE_ROWS = 2
#: Where every item of a found line's list is, said after its ``+N more``.
EVERY = "all in summary.txt by receiver"
_KINDS = ("k", "q", "v")


def _receivers(rows) -> dict:
    """{receiver: its rows}, receivers by layer and head as numbers."""
    out: dict = {}
    for r in rows:
        out.setdefault(r["to"], []).append(r)
    return {to: out[to] for to in sorted(out, key=T.head_order)}


def _by_effect(rows) -> list[dict]:
    return sorted(rows, key=lambda r: -abs(r["effect_causal"]) if T.finite(
        r.get("effect_causal")) else 0.0)


def _source(r: dict) -> str:
    return f"{_name(r['from'], r['path'])} {T.effect(r)}" + (" idle" if r.get("idle") else "")


def _name(frm: str, path: str) -> str:
    """A source as said: its name, ``via MLP`` where it acts through the MLPs (else directly)."""
    return frm + (" via MLP" if path == "via_mlp" else "")


def _depends(rows, which: str) -> list[dict]:
    return [r for r in rows if str(r.get("depends") or "") == which]


def _depends_items(rows: list[dict], ablation: str, receiver: bool = True) -> list[str]:
    """The rows of one ``depends`` value, one item per source, kind and path (its receivers
    together, by layer and head; K, then Q, then V items, each by first receiver, then
    |effect|; more than fit in 60 characters counted):
    ``K L3H1 → L5H1, L9H2: zero +0.14, mean +0.014``."""
    groups: dict = {}
    for r in sorted(_by_effect(rows), key=lambda r: (_KINDS.index(r["kind"]) if r["kind"] in
                                                     _KINDS else 3, T.head_order(r["to"]))):
        groups.setdefault((r["kind"], r["from"], r["path"]), []).append(r)
    return [
        f"{kind.upper()} {_name(frm, p)}" + (
            f" → {listed('', [r['to'] for r in got], sep=', ', width=60)}" if receiver
            else "") +
        f": {T.counterfactual_effects(got, ablation)}"
        for (kind, frm, p), got in groups.items()]


_DEPENDS = {"zero": "depends on zero ablation only",
            "counterfactual": "depends on the counterfactual"}


def _joint_lines(mine: list[dict], any_confirmed: bool, before: str, after: str = "") -> list[str]:
    """A receiver and kind's lines on every earlier source removed together, per path: the
    sources matter only together (``redundant``, nothing confirmed of the kind), or their
    joint effect has the other sign than the confirmed ones' sum; each opens with ``before``,
    the path and ``after``."""
    lines = []
    for p in ("direct", "via_mlp"):
        on = [r for r in mine if r["path"] == p]
        if not on:
            continue
        head = f"{before}{T.path(p)}{after}"
        joint = T.with_se(on[0].get("joint_effect"), on[0].get("joint_se"),
                          not T.is_change(on[0]))
        if not any_confirmed and on[0].get("redundant"):
            lines.append(f"{head}: no single source confirmed; all earlier sources together "
                         f"{joint} (redundant: they matter only together)")
        if on[0].get("joint_contradicts"):
            total = sum(r["effect_causal"] for r in on if r.get("confirmed"))
            lines.append(f"{head}: the confirmed sources sum to {T.num(total)} but all "
                         f"earlier sources together give {joint} (other sign)")
    return lines


def receiver_lines(rows: list[dict], *, ablation: str | None = None) -> list[str]:
    """The lines of one receiver's rows (every kind and path; the search's rows or
    ``circuit_list`` objects): per kind its confirmed sources by |effect| and the kind's
    faithfulness; sources that matter only together; a joint effect of the other sign; the rows
    that depend on zero ablation or on the counterfactual; else the largest effect seen. An
    unlabelled receiver: its dependencies (not circuits). ``ablation``: the counterfactual
    (default: the rows' own)."""
    rows = [T.normalised(r) for r in rows]
    if not rows:
        return []
    ablation = ablation or T.ablation_of(None, rows)
    to, lab = rows[0]["to"], T.label(rows[0].get("label_to"))
    if lab == "unlabelled":
        dep = _by_effect([r for r in rows if r.get("dependency")])[:3]
        if not dep:
            return [f"{to} (no behaviour label): no source passes the rule"]
        return [f"{to} (no behaviour label; dependencies, not circuits): " + "; ".join(
            f"{r['kind'].upper()} {_source(r)}" for r in dep)]
    head, lines = f"{to} {lab}", []
    for kind in _KINDS:
        mine = [r for r in rows if r["kind"] == kind]
        conf = _by_effect([r for r in mine if r.get("confirmed")])
        faith = T.faithfulness(conf[:1] or mine[:1])
        if conf:
            lines.append(f"{head} · {kind.upper()}: " + ", ".join(_source(r) for r in conf)
                         + (f"; {faith}" if faith else ""))
        lines += _joint_lines(mine, bool(conf), f"{head} · {kind.upper()} ")
    for which, said in _DEPENDS.items():
        dep = _by_effect(_depends(rows, which))
        if dep:
            lines.append(f"{head} · {said}: " + "; ".join(
                _depends_items(dep, ablation, receiver=False)))
    if not lines:
        big = _by_effect(rows)[0]
        lines.append(f"{head} · no source confirmed on any path (largest: "
                     f"{big['kind'].upper()} {_source(big)})")
    return lines


def _circuits(labelled: dict) -> list[tuple]:
    """[(label, kind, sources, [(receiver, its confirmed rows)])]: the receivers of one label
    and kind with exactly the same confirmed sources (source, path, sign, idle) together, in
    the module docstring's order."""
    from .composition_standing import label_rank

    groups: dict = {}
    for to, rows in labelled.items():
        for kind in ("k", "q"):
            conf = [r for r in rows if r["kind"] == kind and r.get("confirmed")]
            if conf:
                sig = frozenset((r["from"], r["path"], r.get("role"), bool(r.get("idle")))
                                for r in conf)
                groups.setdefault((T.label(rows[0]["label_to"]), kind, sig), []).append(
                    (to, conf))
    return sorted(((lab, kind, sig, recs) for (lab, kind, sig), recs in groups.items()),
                  key=lambda g: (label_rank(g[0]), T.head_order(g[3][0][0]), g[1]))


def _circuit_line(lab: str, kind: str, sig, recs, width: int = TERMINAL_WIDTH - 2) -> str:
    """``K: L16H0 +0.73±0.02, L3H1 via MLP +0.1±0.01 +4 more → L17H3 induction; faithful …``:
    the sources by |effect| (a source acts directly unless marked ``via MLP``; of several
    receivers the range of its effects), as many as keep the line within ``width`` (one at
    least), the others counted."""
    rows = [r for _, conf in recs for r in conf]
    srcs = []
    for key in sig:
        mine = [r for r in rows if (r["from"], r["path"], r.get("role"),
                                    bool(r.get("idle"))) == key]
        sizes = [abs(r["effect_causal"]) for r in mine if T.finite(r.get("effect_causal"))]
        text = _name(key[0], key[1]) + " " + T.span(
            mine, "effect_causal", "effect_se" if len(mine) == 1 else None, True)
        srcs.append((-max(sizes, default=0.0), T.head_order(key[0]),
                     text + (" idle" if key[3] else "")))
    srcs = [t for *_, t in sorted(srcs)]
    faith = T.faithfulness([conf[0] for _, conf in recs])
    tail = (f" → {listed('', [to for to, _ in recs], sep=', ', width=width // 2)} {lab}"
            + (f"; {faith}" if faith else ""))
    n = 1
    while n < len(srcs) and len(_sources(kind, srcs, n + 1) + tail) <= width:
        n += 1
    return _sources(kind, srcs, n) + tail


def _sources(kind: str, srcs: list[str], n: int) -> str:
    more = f" +{len(srcs) - n} more" if n < len(srcs) else ""
    return f"{kind.upper()}: " + ", ".join(srcs[:n]) + more


_JOINT = {"redundant": "redundant (no single source confirmed, all earlier ones together "
                       "pass)",
          "joint_contradicts": "all earlier sources together of the other sign than the "
                               "confirmed ones' sum"}


def _joint_says(rows: list[dict], kind: str, which: str) -> bool:
    """Whether a receiver's rows of ``kind`` are ``redundant`` (nothing of the kind confirmed)
    or ``joint_contradicts`` on some path."""
    mine = [r for r in rows if r["kind"] == kind]
    if which == "redundant" and any(r.get("confirmed") for r in mine):
        return False
    return any(r.get(which) for r in mine)


def _summary_lines(circuits: list[dict], ablation: str, losses=()) -> list[str]:
    """The circuit lines and the one-line summaries in the module docstring's order (labelled
    and unlabelled receivers' rows), ``losses`` after the first label's circuits."""
    from .composition_standing import LABEL_ORDER

    labelled = _receivers([c for c in circuits if T.label(c.get("label_to")) != "unlabelled"])
    groups = _circuits(labelled)
    n_first = sum(g[0] == LABEL_ORDER[0] for g in groups) or min(1, len(groups))
    lines = [_circuit_line(*g) for g in groups[:n_first]] + list(losses)
    every = [r for rows in labelled.values() for r in rows]
    for which, said in _DEPENDS.items():
        dep = _depends(every, which)
        if dep:
            lines.append(listed(f"{said} (not confirmed): ", _depends_items(dep, ablation),
                                where=EVERY))
    v = _by_effect([r for r in every if r["kind"] == "v" and r.get("confirmed")])
    if v:
        n_rec = len({r["to"] for r in v})
        lines.append(f"V: {len(v)} source(s) confirmed of {n_rec} receiver(s); largest "
                     f"{_name(v[0]['from'], v[0]['path'])} → {v[0]['to']} {T.effect(v[0])}")
    lines += [_circuit_line(*g) for g in groups[n_first:]]
    for which, said in _JOINT.items():
        got = [f"{to} " + " ".join(k.upper() for k in _KINDS if _joint_says(rows, k, which))
               for to, rows in labelled.items()
               if any(_joint_says(rows, k, which) for k in _KINDS)]
        if got:
            lines.append(listed(f"{said}: ", got, sep=", ", where=EVERY))
    quiet = [to for to, rows in labelled.items()
             if not any(r.get("confirmed") or r.get("redundant") for r in rows)]
    if quiet:
        lines.append(listed("no source confirmed on any path: ", [
            f"{to} {T.label(labelled[to][0]['label_to'])}" for to in quiet], sep=", ",
            where=EVERY))
    dep = _receivers([c for c in circuits if c.get("dependency")])
    if dep:
        lines.append(listed("no behaviour label (dependencies, not circuits): ", [
            f"{to} ← {(b := _by_effect(rows)[0])['kind'].upper()} {_source(b)}"
            for to, rows in dep.items()], where=EVERY))
    return lines


def found_lines(ds, circuits=None, *, patched: bool = False, labels=None,
                meta: dict | None = None, losses=()) -> list[str]:
    """Every line of the module docstring. ``circuits``: the search's rows; ``patched``: whether
    it ran (no rows then means nothing confirmed); ``labels``: the text probe's when it did not;
    ``meta``: the circuits Dataset's attrs; ``losses``: the output loss lines
    (:func:`rmtbase.report.circuit_losses.loss_lines`)."""
    meta = dict(meta or {})
    if not patched and not circuits:
        from .weights_lines import weights_lines

        return weights_lines(ds, labels)
    circuits = [T.normalised(c) for c in circuits or []]
    lines = []
    null_line, lead = _null_line(ds, meta.get("pairs_unlike_random"))
    if null_line and lead:
        lines.append(null_line)
    ablation = T.ablation_of(meta, circuits)
    lines += _summary_lines(circuits, ablation, losses)
    labelled = [c for c in circuits if T.label(c.get("label_to")) != "unlabelled"]
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
    if T.finite(sw):
        lines.append(f"the weights' screen: Spearman {float(sw):.2f} between a source's rank "
                     f"by weights and its exact effect (attribution: {float(sa):.2f}; "
                     f"{int(meta.get('n_tests', 0)):,} patched rows)")
    if circuits:
        lines.append(f"effects under {ablation} ablation; what each number means: the legend "
                     "in summary.txt")
    return lines


def _null_line(ds, flagged) -> tuple[str | None, bool]:
    """(the line saying what the composition's null decided, whether it leads): the pairs
    flagged unlike random of all M scored pair entries, at the draws ``ds.attrs["draws"]``,
    and the ``composition_open_pairs`` whose flag more draws could change. "No pair differs"
    only when nothing is open and the draws could flag a pair (no ``composition_draws_note``
    saying they cannot); with none flagged and some open: "composition undecided"."""
    ds = {} if ds is None else ds  # rows alone (a receiver's lines): no composition
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


def fit_rows(line: str, width: int = TERMINAL_WIDTH - 2) -> list[str]:
    """``line`` wrapped to ``width`` (continuations indented), at most :data:`LINE_ROWS` rows,
    cut with "…"."""
    got = textwrap.wrap(line, width=width, subsequent_indent="  ", break_on_hyphens=False) \
        or [""]
    if len(got) > LINE_ROWS:
        got = got[:LINE_ROWS]
        got[-1] = got[-1][:width - 2].rstrip() + " …"
    return got


def terminal(lines: list[str], where: str = "summary.txt and --json", *,
             rows: int = TERMINAL_LINES - 1, width: int = TERMINAL_WIDTH - 2) -> list[str]:
    """``lines`` as terminal rows of at most ``width`` columns (each wrapped, at most
    :data:`LINE_ROWS` rows, cut with "…"), at most ``rows`` of them: the first whole lines that
    fit and, when some are left, one row saying how many and where they all are. The defaults
    leave a heading row and a two-space indent within :data:`TERMINAL_LINES` x
    :data:`TERMINAL_WIDTH`."""
    wrapped = [fit_rows(t, width) for t in lines]
    if sum(map(len, wrapped)) <= rows:
        return [r for w in wrapped for r in w]
    out: list[str] = []
    shown = 0
    for w in wrapped:
        if len(out) + len(w) > rows - 1:
            break
        out += w
        shown += 1
    return out + fit_rows(f"… {len(lines) - shown} more line(s): all of them in {where}",
                          width)[:1]


__all__ = ["LINE_ROWS", "TERMINAL_LINES", "TERMINAL_WIDTH", "fit_rows", "found_lines",
           "receiver_lines", "terminal"]
