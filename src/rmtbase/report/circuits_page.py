"""``report.html`` of ``rmtbase circuits MODEL``, with the task search's sections
(:mod:`.task_report`): the facts (what was found, output losses), the figure, the edges patched
exactly and the strongest confirmed edges (sortable tables), ``summary.txt`` folded."""

from __future__ import annotations

import html as _html

from .._version import __version__
from . import circuit_text as T
from .html import _figures, page, table_html

#: Figures of the page, with their captions.
CAPTIONS = {
    "circuits.png": "Every confirmed Q and K edge (confirmed V edges faint): layers as "
                    "columns, heads named with their behaviour label; edges coloured by kind "
                    "(Q blue, K red, V green).",
}
#: Rows of the patched-edge table at most (circuits.nc holds every row).
PATCHED_ROWS = 200
#: Columns of the patched-edge table, and of the confirmed-edge table.
PATCHED = ("kind", "path", "from", "to", "label_to", "effect_causal", "effect_se",
           "effect_zero", "effect_mean", "effect_resample", "confirmed", "depends",
           "rank_weights", "attribution", "n_sequences")
CONFIRMED = ("kind", "path", "from", "to", "label_to", "effect_causal", "effect_se",
             "faithfulness", "faithfulness_se", "faithfulness_empty", "idle")


def _size(row: dict) -> float:
    x = row.get("effect_causal")
    return abs(float(x)) if T.finite(x) else 0.0


def edge_table(circuits, columns, *, confirmed_only: bool = False, top: int = PATCHED_ROWS):
    """The rows (:func:`rmtbase.circuits.circuit_list` objects) as a DataFrame: confirmed
    first, then by |effect|, at most ``top``; ``columns`` those present."""
    import pandas as pd

    rows = [r for r in circuits or [] if r.get("confirmed") or not confirmed_only]
    rows = sorted(rows, key=lambda r: (not r.get("confirmed"), -_size(r)))[:top]
    cols = [c for c in columns if any(c in r for r in rows)] or list(columns[:4])
    return pd.DataFrame([{c: _cell(r.get(c)) for c in cols} for r in rows], columns=cols)


def _cell(v):
    if v is None:
        return float("nan")
    if isinstance(v, bool):
        return "yes" if v else "no"
    return v


def facts(ctx: dict) -> list[tuple[str, str]]:
    """(name, value) rows of the circuits' facts, from the context
    (:func:`rmtbase.report.circuit_context.context`)."""
    from .circuit_legend import rule

    m, rows = ctx["meta"], ctx["circuits"] or []
    conf = [r for r in rows if r.get("confirmed")]
    by_kind = ", ".join(f"{k.upper()} {sum(r['kind'] == k for r in conf)}" for k in "kqv")
    depends = {w: sum(str(r.get("depends") or "") == w for r in rows)
               for w in ("zero", "counterfactual")}
    out = [("model", str(m.get("model", ""))),
           ("sequences", str(m.get("sequences", "")) or "?"),
           ("counterfactual", T.ablation_of(m, rows)),
           ("receivers patched", str(m.get("n_receivers", len({r["to"] for r in rows})))),
           ("patched rows", f"{len(rows):,}: {len(conf):,} confirmed ({by_kind}); "
                            f"{depends['zero']:,} depend on zero ablation only, "
                            f"{depends['counterfactual']:,} on the counterfactual"),
           ("output loss", "; ".join(ctx.get("losses") or []) or "not measured (no "
                                                                   "induction circuit)"),
           ("confirmation", rule(m, rows))]
    if T.finite(m.get("expected_false_confirmations")):
        out.append(("expected false confirmations",
                    f"{float(m['expected_false_confirmations']):.2g} (an upper bound)"))
    return out


def facts_table(rows: list[tuple[str, str]]) -> str:
    """A two-column facts table."""
    body = "".join(f"<tr><th>{_html.escape(k)}</th><td>{_html.escape(str(v))}</td></tr>"
                   for k, v in rows)
    return f'<table class="facts">{body}</table>'


def circuits_page_html(ctx: dict, cds, summary: str, images: dict[str, bytes]) -> str:
    """The page (module docstring) of the context ``ctx``, the circuits Dataset ``cds``,
    ``summary.txt``'s text and the figures' PNGs ``images``."""
    from .circuit_losses import loss_table

    rows = ctx["circuits"] or []
    n_conf = sum(bool(r.get("confirmed")) for r in rows)
    model = str(ctx["meta"].get("model", "")) or "the model"
    found = "".join(f"<li>{_html.escape(t)}</li>" for t in ctx["found"])
    losses = loss_table(cds)
    loss_html = ("<h3>Output loss</h3><p class=\"note\">Next-token loss (nats) where a copy "
                 "predicts the next token, per induction circuit: clean, with its confirmed "
                 "edges removed, with its receivers' outputs removed (mean and se over the "
                 f"sequences).</p>{table_html(losses)}" if len(losses) else "")
    n_patched = min(PATCHED_ROWS, len(rows))
    body = (
        f"<section><h2>The circuits</h2>{facts_table(facts(ctx))}<h3>What was found</h3>"
        f"<ul>{found}</ul>{loss_html}</section>\n"
        + _figures(images, CAPTIONS)
        + "<section><h2>Edges patched exactly</h2><p class=\"note\">The drop of the "
          "receiver's behaviour statistic (V: its relative output change) when the source's "
          "output alone carries the counterfactual, mean and se over the sequences, beside "
          "the other counterfactuals' effects; confirmed rows first, then by |effect|: "
          f"{n_patched} of the {len(rows):,} patched rows (circuits.nc holds every row)."
          f"</p>{table_html(edge_table(rows, PATCHED))}</section>\n"
        + "<section><h2>The circuits' strongest edges</h2><p class=\"note\">The "
          f"{n_conf:,} confirmed edges by |effect|, each with its receiver and input's "
          "faithfulness (the sources confirmed for it kept, every other earlier head's output "
          "replaced) beside its empty-circuit floor; idle: removing it changes faithfulness "
          "by less than its se.</p>"
          f"{table_html(edge_table(rows, CONFIRMED, confirmed_only=True))}</section>\n"
        + "<section><details><summary>summary.txt</summary><pre>"
        + _html.escape(summary) + "</pre></details></section>\n"
        + f"<footer class=\"note\">rmtbase {__version__}</footer>")
    title = f"rmtbase circuits: {model}"
    sub = (f"{n_conf:,} confirmed edges of {len(rows):,} patched rows; "
           f"{len(ctx.get('losses') or [])} induction circuit(s) on the output")
    return page(title, sub, body, {"entries": [], "refs": {}, "scale": {}})


__all__ = ["CAPTIONS", "CONFIRMED", "PATCHED", "PATCHED_ROWS", "circuits_page_html",
           "edge_table", "facts", "facts_table"]
