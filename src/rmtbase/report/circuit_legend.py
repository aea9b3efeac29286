"""What ``summary.txt`` says after the found lines of a circuit search: every receiver's lines
(:func:`rmtbase.report.circuit_lines.receiver_lines`, by layer and head) and the legend, each
number's meaning and the confirmation rule said once, under the counterfactual the search ran
(``ablation``)."""

from __future__ import annotations

from . import circuit_text as T


def rule(meta: dict | None = None, rows=()) -> str:
    """The confirmation rule in words, with the counterfactual it was applied under."""
    from ..circuits.head import find as F

    m = dict(meta or {})
    ablation = T.ablation_of(m, rows)
    se, frac = m.get("confirm_se", F.CONFIRM_SE), m.get("confirm_fraction", F.CONFIRM_FRACTION)
    n = m.get("min_sequences", F.MIN_SEQUENCES)
    other = {"mean": "resample", "resample": "mean"}.get(ablation)
    keep = (f"; and under {other} ablation the effect keeps at least half its size and its "
            "sign" if other else "")
    return (f"confirmed: receiver labelled, under {ablation} ablation |effect| >= {se:g} se and "
            f">= {100 * float(frac):.0f} % of the receiver's score (>= {frac:g} for V), >= "
            f"{int(n)} sequences{keep}")


def legend(meta: dict | None = None, rows=(), losses: bool = False) -> list[str]:
    """Each number of the lines said once (``summary.txt``'s legend); ``losses``: the output
    loss lines' too."""
    m = dict(meta or {})
    ablation = T.ablation_of(m, rows)
    how = T.COUNTERFACTUALS.get(ablation, ablation)
    out = [f"effect±se (K, Q): drop of the receiver's behaviour statistic (its mean attention "
           f"to its label's positions, units 1) when the source's output is {how} ({ablation} "
           "ablation), mean ± standard error over the sequences; + the source supports the "
           "behaviour, - it suppresses it",
           "effect±se (V): relative change |dz|/|z| of the receiver's output under the same "
           "replacement (its pattern does not depend on its values)",
           "path: a source acts directly (replaced in the receiver's input only) unless "
           "marked via MLP (only the change carried through the MLPs in between)",
           "a..b: the range of one source's effect over a circuit line's receivers (each with "
           "its se in the lines by receiver); +N more: the circuit's further sources, there too",
           rule(m, rows),
           f"faithful f±se (empty e): the receiver's behaviour when only the line's sources "
           f"are kept and every other earlier head's output is {how}, MLPs recomputed, over "
           "the clean behaviour (V: 1 - the relative output change); e: the same with no "
           "source kept, the floor",
           "idle: a confirmed source whose removal from the circuit changes faithfulness by "
           "less than its se",
           "depends on zero ablation only: passes the rule with the output set to zero, not "
           f"under {ablation} ablation; depends on the counterfactual: mean and resample "
           "ablation disagree (one keeps less than half of the other's effect, or flips its "
           "sign); neither is confirmed; numbers: the effect under each",
           "redundant: no single source of the kind is confirmed but all earlier sources "
           "replaced together pass the rule; other sign: all earlier sources together move "
           "the behaviour against the confirmed sources' sum",
           "dependencies: a receiver without a behaviour label whose attention (total "
           "variation) changes by the rule; not a circuit"]
    if losses:
        from .circuit_losses import loss_legend

        out.append(loss_legend(ablation))
    if T.finite(m.get("expected_false_confirmations")):
        out.append(f"expected false confirmations: {float(m['expected_false_confirmations']):.2g}"
                   " (each patched row's chance to pass 3 se with no effect, the t tail on "
                   "its sequences, summed: an upper bound)")
    return out


def detail_lines(circuits, meta: dict | None = None, losses: bool = False) -> list[str]:
    """``By receiver`` (every receiver's lines) and ``Legend`` blocks, each line indented two
    spaces under its heading; [] without rows. ``losses``: the legend explains the output loss
    lines."""
    from .circuit_lines import receiver_lines

    rows = [T.normalised(c) for c in circuits or []]
    if not rows:
        return []
    ablation = T.ablation_of(meta, rows)
    by: dict = {}
    for r in rows:
        by.setdefault(r["to"], []).append(r)
    out = ["", "By receiver (layer, head; sources by |effect|):"]
    for to in sorted(by, key=T.head_order):
        out += [f"  {t}" for t in receiver_lines(by[to], ablation=ablation)]
    out += ["", "Legend:"] + [f"  {t}" for t in legend(meta, rows, losses)]
    return out


__all__ = ["detail_lines", "legend", "rule"]
