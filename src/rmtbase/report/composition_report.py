"""The composition section of ``report.html`` (``rmtbase score MODEL --composition``): what was
found (:mod:`rmtbase.report.circuit_lines`), the null and the counts, a sortable table of at most
``top`` pairs by standing (:func:`rmtbase.report.composition_standing.standing_rows`), and the
circuit figure when drawn."""

from __future__ import annotations

import html as _html
import textwrap

import numpy as np

#: Rows of the table at most.
TOP = 50
#: Columns of the table, in order (label and causal columns only where given).
COLUMNS = ("kind", "from", "to", "rank_in_receiver", "sources", "rank_in_kind", "composition",
           "effect", "p", "flag")
LABEL_COLUMNS = ("label_from", "label_to")
#: The heads' primary kinds (weight geometry, rmtbase.decision.kinds), beside their labels.
KIND_COLUMNS = ("kind_from", "kind_to")
CAUSAL_COLUMNS = ("effect_causal", "effect_se", "confirmed")


def _causal(circuits) -> dict:
    return {(str(c["kind"]), str(c["from"]), str(c["to"])): c for c in (circuits or [])}


def pair_rows(ds, *, top: int = TOP, circuits=None, labels=None, kinds=None
              ) -> tuple[list[tuple], list]:
    """(rows, columns) of the first ``top`` pairs by standing; label columns with ``labels``,
    causal ones with ``circuits``."""
    from .composition_standing import standing_rows

    cols = list(COLUMNS[:3]) + (list(LABEL_COLUMNS) if labels else []) \
        + (list(KIND_COLUMNS) if kinds else []) + list(COLUMNS[3:]) \
        + (list(CAUSAL_COLUMNS) if circuits else [])
    causal = _causal(circuits)
    rows = []
    for r in standing_rows(ds, top=top, circuits=circuits):
        row = [r["kind"], r["from"], r["to"]]
        if labels:
            row += [str(labels.get((r["layer_from"], r["head_from"]), "")),
                    str(labels.get((r["layer_to"], r["head_to"]), ""))]
        if kinds:
            row += [str(kinds.get((r["layer_from"], r["head_from"]), "")),
                    str(kinds.get((r["layer_to"], r["head_to"]), ""))]
        row += [r["rank_source"], r["sources"], r["rank_kind"], r["score"], r["effect"], r["p"],
                "yes" if r["flag"] else "no"]
        if circuits:
            c = causal.get((r["kind"], r["from"], r["to"]))
            row += ([float(c.get("effect_causal", np.nan)), float(c.get("effect_se", np.nan)),
                     "yes" if c.get("confirmed") else "no"] if c else
                    [np.nan, np.nan, "not patched"])
        rows.append(tuple(row))
    return rows, cols


def _null_label(ds) -> str:
    """The file's null in its own words (``null_kind`` looked up in the null registry; Gaussian
    when absent), or the name as written when not registered."""
    from ..stats.gaussian_null import GaussianNull
    from ..stats.null_protocol import Null
    from ..stats.null_registry import NULLS

    kind = str(ds.attrs.get("null_kind", GaussianNull.name))
    storage = str(ds.attrs.get("null_storage", "float32"))
    return Null.parse(kind).composition_label(storage) if kind in NULLS else kind


def _note(ds) -> str:
    flag = ds["composition_flag"]
    n_pairs = int(np.isfinite(ds["composition"].isel(kind=0)).sum())
    per_kind = ", ".join(f"{str(k).upper()} {int(flag.sel(kind=k).sum())}"
                         for k in ds["kind"].values)
    null = _null_label(ds)
    return (f"{n_pairs:,} ordered cross-layer pairs per kind. Unlike random (BH q ≤ "
            f"{ds.attrs.get('alpha', 0.05)} over all pairs and kinds, a trained model's pairs "
            f"mostly are): {per_kind}. Null: {null}, {ds.attrs.get('draws', '?')} draws. "
            "Standing: rank among the receiver's earlier sources (of 'sources') and over all "
            "pairs of the kind, 1 = strongest. Effect: the score over the null median. Scores "
            "describe the weights, not attention on a text; path patching decides "
            "(docs/composition.md, docs/circuits.md).")


def composition_section(ds, png: bytes | None = None, *, top: int = TOP, circuits=None,
                        labels=None, found: list[str] | None = None, kinds=None) -> str:
    """The HTML section; ``png``: the circuit figure, embedded; ``found``: the found lines,
    shown first."""
    import pandas as pd

    from .html import _img, table_html

    rows, cols = pair_rows(ds, top=top, circuits=circuits, labels=labels, kinds=kinds)
    what = (f"the first {len(rows)} pairs by standing" + (", confirmed pairs first"
                                                          if circuits else ""))
    lead = ""
    if found:
        items = "".join(f"<li>{_html.escape(t)}</li>" for t in found)
        lead = f"<h3>What was found</h3><ul>{items}</ul>"
    table = table_html(pd.DataFrame(rows, columns=cols), what)
    fig = _img("composition.png", png, "The chosen circuits (the title says how chosen): "
               "layers as columns, heads named with their behaviour label; edges coloured by "
               "kind (Q blue, K red, V green), solid where path patching confirmed them "
               "(every confirmed Q and K edge; confirmed V edges faint).") \
        if png else ""
    return (f'<section id="composition"><h2>Head–head composition</h2>{lead}'
            f'<p class="note">{_html.escape(_note(ds))}</p>{table}{fig}</section>\n')


def summary_lead(ctx: dict | None, *, terminal: bool = False) -> str:
    """The block opening ``summary.txt`` with a composition: what was found, then the counts,
    and with the circuit search every receiver's lines and the legend
    (:func:`rmtbase.report.circuit_legend.detail_lines`) ("" without a composition);
    ``terminal``: the rows a terminal shows (:func:`rmtbase.report.circuit_lines.terminal`,
    heading and counts included in its 24 x 80) and where the rest is."""
    from .circuit_lines import TERMINAL_LINES, TERMINAL_WIDTH
    from .circuit_lines import terminal as first_rows

    if not ctx:
        return ""
    ds = ctx["composition"]
    n = int(np.isfinite(ds["composition"].isel(kind=0)).sum())
    flagged = int(ds["composition_flag"].sum())
    how = ("circuits.nc: candidates path-patched" if ctx["patched"] else
           "screened by weights; heads labelled by the text probe, not patched" if ctx["labels"]
           else "screened by weights; --probe confirms by path patching")
    head = f"What was found (composition.nc: {n:,} cross-layer pairs per kind; {how}):"
    tail = (f"unlike random (the null's p, BH over all pairs and kinds): {flagged:,} of "
            f"{3 * n:,} pairs; lists sort by standing, not by p")
    if terminal:
        head_rows = textwrap.wrap(head, TERMINAL_WIDTH)
        tail_rows = textwrap.wrap(tail, TERMINAL_WIDTH - 2)
        found = first_rows(ctx["found"], rows=TERMINAL_LINES - len(head_rows) - len(tail_rows))
        return "\n".join(head_rows + [f"  {t}" for t in found + tail_rows]) + "\n\n"
    from .circuit_legend import detail_lines

    lines = [head] + [f"  {t}" for t in ctx["found"]] + [f"  {tail}"]
    if ctx["patched"]:
        lines += detail_lines(ctx["circuits"], ctx.get("meta"), bool(ctx.get("losses")))
    return "\n".join(lines) + "\n\n"


def section_of(ctx: dict, png: bytes | None) -> str:
    """:func:`composition_section` of a composition context."""
    return composition_section(ctx["composition"], png, circuits=ctx["circuits"],
                               labels=ctx["labels"], found=ctx["found"],
                               kinds=ctx.get("kinds"))


__all__ = ["CAUSAL_COLUMNS", "COLUMNS", "KIND_COLUMNS", "LABEL_COLUMNS", "TOP",
           "composition_section", "pair_rows", "section_of", "summary_lead"]
