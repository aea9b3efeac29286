"""``report.html`` of a task's circuit (``rmtbase circuits MODEL --task FILE``): the circuit's
facts, its graph and faithfulness curve (:mod:`.task_figures`, under ``figures/`` and
embedded), the exactly patched edges and the circuit's strongest edges as sortable tables,
and ``summary.json`` folded. Written into the command's all-or-nothing folder."""

from __future__ import annotations

import html as _html

import numpy as np

from .._version import __version__
from ..files.strict_json import dumps
from ._html_figures import figure_saver
from .html import _figures, page, table_html

#: Figures of the page, with their captions.
CAPTIONS = {
    "circuit.png": "The circuit's edges (the strongest, if many): a head's q, k and v inputs "
                   "end a quarter row below, at and above it; width grows with |exact effect| "
                   "(attribution where not patched); red: works against the metric.",
    "faithfulness.png": "Faithfulness of the top-k edges (the others carry the "
                        "counterfactual) against k; dashed: the target, dotted: the smallest "
                        "circuit reaching it; the box: that circuit's output losses.",
}
#: Rows of the circuit's edge table.
EDGE_ROWS = 100


#: What each metric is, in which unit (the facts' "metric" row).
METRIC_UNITS = {
    "logit_diff": "logit of the answer minus logit of the wrong token (logits)",
    "logprob": "log-probability of the answer (nats)",
    "kl": "KL divergence from the full model's clean distribution (nats; 0 for the full "
          "model, lower is better)",
}


def loss_text(losses: dict) -> str:
    """The output losses (:mod:`rmtbase.circuits.task.losses`) in one line."""
    part = [f"{k.replace('_', ' ')} {losses[k]['mean']:.3f} ± {losses[k]['se']:.2g}"
            for k in ("clean", "circuit_only", "circuit_removed", "all_removed")]
    return ", ".join(part) + " nats (-log p(answer))"


def _scope(sp: dict) -> str:
    """Where the curve and the circuit are scored: the held-out pairs, or in-sample."""
    return f"on the {sp['held_out']} held-out pairs" if not sp.get("in_sample") else \
        f"on the same {sp['fit']} pairs (in-sample: --holdout 0)"


def _model_lines(s: dict) -> list[str]:
    """The input and the behaviour lines (:mod:`rmtbase.circuits.task.model_input`,
    :mod:`rmtbase.circuits.task.behaviour`), where the summary has them."""
    from ..circuits.task.behaviour import line
    from ..circuits.task.model_input import input_line

    return ([input_line(s["input"])] if s.get("input") else []) + \
        ([line(s["behaviour"])] if s.get("behaviour") else [])


def summary_lines(s: dict) -> list[str]:
    """summary.txt of a task's circuit, whose first lines are the screen: the task, its input
    and the model's behaviour on it, the circuit's faithfulness ± se, what looks wrong
    (summary.json's ``notes``), output losses, then every listed edge (positive: it carries)."""
    c, sp = s["circuit"], s["split"]
    out = [f"{s['task']}: {s['prompts']} prompts, metric {s['metric']}, counterfactual "
           f"{s['counterfactual']}; ranked by {s['ranking']['method']} on {sp['fit']} pairs, "
           f"scored {_scope(sp)}", *_model_lines(s),
           f"{_scope(sp)}: full model {c['full_metric']:.4g}, empty graph "
           f"{c['empty_metric']:.4g} ({METRIC_UNITS.get(s['metric'], s['metric'])})",
           f"circuit: {c['edges']} of {s['n_edges']} edges, faithfulness "
           f"{c['faithfulness']:.3f} ± {c['faithfulness_se']:.2g}, with it removed "
           f"{c['completeness_faithfulness']:.3f} ± {c['completeness_faithfulness_se']:.2g}; "
           f"curve area {s['curve_area']:.3f}", *s.get("notes", []),
           "output loss: " + loss_text(s["output_losses"])]
    for e in s["top_edges"]:
        mark = " confirmed" if e["confirmed"] else ""
        out.append(f"  {e['edge']:<28} exact {e['exact']:+.4g} ± {e['exact_se']:.2g}  "
                   f"attribution {e['attribution']:+.4g} ± {e['attribution_se']:.2g}{mark}")
    return out


def _facts(s: dict) -> str:
    c, cc = s["circuit"], s["confirmed_circuit"]
    unit = METRIC_UNITS.get(s["metric"], "")
    rows = [("model", s["model"]), ("task", f"{s['task']} ({s['prompts']} prompt pairs of "
                                            f"{s['tokens']} tokens)"),
            *(("the model's input" if x.startswith("input:") else "the model on the task", x)
              for x in _model_lines(s)),
            ("metric", f"{s['metric']}: {unit}" if unit else s["metric"]),
            ("counterfactual", s["counterfactual"]),
            ("full model / empty graph", f"{c['full_metric']:.4g} / {c['empty_metric']:.4g} "
                                         f"(the metric's mean {_scope(s['split'])})"),
            ("circuit", f"{c['edges']} of {s['n_edges']} edges, faithfulness "
                        f"{c['faithfulness']:.3f} ± {c['faithfulness_se']:.2g} (1: the full "
                        "model, 0: the empty graph), "
                        f"ratio {c['ratio']:.3f} (its metric over the full model's; negative: "
                        "the circuit alone gives the metric the other sign)"),
            ("with the circuit removed", f"faithfulness {c['completeness_faithfulness']:.3f}"),
            ("output loss", loss_text(s["output_losses"])),
            ("faithfulness curve", f"area {s['curve_area']:.3f}; smallest circuit reaching "
                                   f"{s['smallest_reaching']['target']}: "
                                   f"{s['smallest_reaching']['edges']} edges"),
            ("confirmed edges' circuit", f"{cc['edges']} edges, faithfulness "
                                         f"{cc['faithfulness']:.3f}"),
            *(("note", n) for n in s.get("notes", [])),
            ("confirmation", s["confirmation"]["rule"])]
    body = "".join(f"<tr><th>{_html.escape(k)}</th><td>{_html.escape(str(v))}</td></tr>"
                   for k, v in rows)
    return f'<table class="facts">{body}</table>'


def _patched_table(s: dict):
    import pandas as pd

    cols = ["edge", "exact", "exact_se", "exact_other", "attribution", "attribution_se",
            "confirmed", "depends"]
    if s["confirmation"].get("in_context"):
        cols[4:4] = ["effect_in_context", "effect_in_context_se"]
    extra = [c for c in ("composition_rank", "composition_p") if any(
        c in e for e in s["top_edges"])]
    return pd.DataFrame([{c: e.get(c, "") for c in cols + extra} for e in s["top_edges"]],
                        columns=cols + extra)


def _circuit_table(res: dict):
    import pandas as pd

    from ..circuits.core.graph import split_receiver

    g, kept = res["tm"].graph, np.asarray(res["kept"], dtype=bool)
    score, se = res["score"], res["se"]
    idx = np.flatnonzero(kept)
    idx = idx[np.argsort(-np.abs(score[idx]), kind="stable")][:EDGE_ROWS]
    rows = []
    for i in idx:
        s, r = g.edge(int(i))
        node, x = split_receiver(r)
        ex = res["exact"].get(int(i))
        rows.append({"sender": s, "receiver": node, "input": x,
                     "attribution": float(score[i]), "se": float(se[i]),
                     "exact": ex[0] if ex else float("nan")})
    return pd.DataFrame(rows, columns=["sender", "receiver", "input", "attribution", "se",
                                       "exact"])


def task_report_html(res: dict, summary: dict, images: dict[str, bytes]) -> str:
    """The page (module docstring) of :func:`rmtbase.circuits.task.search.find_task_circuit`'s
    result ``res``, its ``summary`` and the figures' PNGs ``images``."""
    s = summary
    c = s["circuit"]
    title = f"rmtbase circuits --task: {s['task']} on {s['model']}"
    sub = (f"circuit of {c['edges']} of {s['n_edges']} edges, faithfulness "
           f"{c['faithfulness']:.3f}; curve area {s['curve_area']:.3f}")
    n_kept = int(np.asarray(res["kept"]).sum())
    body = (
        f"<section><h2>The circuit</h2>{_facts(s)}</section>\n"
        + _figures(images, CAPTIONS)
        + "<section><h2>Edges patched exactly</h2><p class=\"note\">The metric's change when "
          "the edge alone carries the counterfactual (mean and se over prompts) beside its "
          "attribution; positive: the edge carries the metric; confirmed: as the circuit's "
          "facts state the rule (exact_other: the other counterfactual's effect)."
          f"</p>{table_html(_patched_table(s))}</section>\n"
        + f"<section><h2>The circuit's strongest edges</h2><p class=\"note\">The "
          f"{min(EDGE_ROWS, n_kept)} of its {n_kept} edges of largest |attribution| "
          f"(circuit.json holds every edge).</p>{table_html(_circuit_table(res))}</section>\n"
        + "<section><details><summary>summary.json</summary><pre>"
        + _html.escape(dumps(s, indent=1)) + "</pre></details></section>\n"
        + f"<footer class=\"note\">rmtbase {__version__}</footer>")
    return page(title, sub, body, {"entries": [], "refs": {}, "scale": {}})


def write_task_report(folder, res: dict, summary: dict, *, figures: bool = True) -> None:
    """Write ``figures/circuit.png``, ``figures/faithfulness.png`` (unless not ``figures``)
    and ``report.html`` into ``folder`` (an open :class:`rmtbase.files.output.OutputFolder`)."""
    images: dict[str, bytes] = {}
    if figures:
        import matplotlib.pyplot as plt

        from .task_figures import plot_faithfulness, plot_task_circuit

        save = figure_saver(folder, images)
        fig, ax = plt.subplots(figsize=(10, 5), layout="constrained")
        from ..circuits.task.export import shown_values

        plot_task_circuit(res["tm"].graph, res["kept"],  # exact effects where measured
                          shown_values(res["score"], res["exact"], res["metric"])[0], ax,
                          title=f"{summary['task']} on {summary['model']}")
        save(fig, "circuit.png")
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
        plot_faithfulness(res["curve"], res["tm"].graph.n_edges, ax,
                          losses=summary["output_losses"])
        save(fig, "faithfulness.png")
        plt.close(fig)
    folder.write_text("report.html", task_report_html(res, summary, images))


__all__ = ["CAPTIONS", "EDGE_ROWS", "METRIC_UNITS", "loss_text", "summary_lines",
           "task_report_html", "write_task_report"]
