"""A task circuit's result (:func:`.search.find_task_circuit`) as files: :func:`summary`
(summary.json) and :func:`write_outputs`: ``circuit.json`` (every edge with its scores, the
circuit's marked ``in_graph``: MIB's format), ``circuit.dot``, ``circuit.graphml``,
``curve.csv`` and ``summary.json``, one all-or-nothing folder."""

from __future__ import annotations

from .confirm import confirmation, verdict_row
from .losses import LOSS_UNIT
from .notes import peak

KIND = "rmtbase circuits --task"


def summary(res: dict) -> dict:
    """The JSON summary of :func:`find_task_circuit`'s result."""
    cur, g = res["curve"], res["tm"].graph
    t = res["task"]
    top = []
    listed = [int(e) for e in cur["order"] if int(e) in res["exact"]][:res["top"]]
    for e in listed:
        a, b = res["exact"][e]
        s, r = g.edge(e)
        top.append({"edge": f"{s}->{r}", "attribution": float(res["score"][e]),
                    "attribution_se": float(res["se"][e]), "exact": a, "exact_se": b,
                    **verdict_row(res["verdicts"][e]), **res.get("columns", {}).get(e, {})})
    return {"model": res["model"], "task": t.name, "task_source": t.source, "prompts": t.n,
            "tokens": t.length, "input": res.get("input"), "behaviour": res.get("behaviour"),
            "metric": res["metric"], "counterfactual": res["counterfactual"],
            "attribution_steps": res["steps"], "n_edges": g.n_edges,
            "split": res["split"], "ranking": res["ranking_method"],
            "circuit": res["circuit"], "confirmed_circuit": res["confirmed_circuit"],
            "confirmation": confirmation(res["verdicts"], len(res["exact"]),
                                         res["confirmed_in"], res["split"]["fit"]),
            "weights_screen": bool(res.get("columns")), "threads": res.get("threads"),
            "output_losses": {"unit": LOSS_UNIT, **res["output_losses"]},
            "curve_area": cur["area"], "curve_peak": peak(cur),
            "smallest_reaching": {"target": cur["target"], "edges": cur["smallest"]},
            "notes": _notes(res), "top_edges": top}


def _notes(res: dict) -> list[str]:
    """:mod:`.notes`' sentences for ``res`` (those that apply)."""
    from .notes import confirmed_note, curve_note

    held = res.get("held_behaviour")
    confirmed = [e for e, v in res["verdicts"].items() if v["confirmed"]]
    tested = sum(v.get("context") is not None for v in res["verdicts"].values())
    kept = res["tm"].graph.empty()
    kept[confirmed] = True
    out = [None if held is None else curve_note(res["curve"], held),
           confirmed_note(res["tm"].graph, kept, res["confirmed_circuit"],
                          res["confirmed_in"], tested)]
    return [n for n in out if n is not None]


def write_outputs(res: dict, out, *, extra=None) -> dict:
    """Write the outputs (module docstring) into folder ``out`` all or nothing; ``extra``:
    ``extra(folder)`` writes more into the open folder (the CLI's ``report.html``, from
    :mod:`rmtbase.report.task_report`). Returns {name: path}."""
    from ...files.output import OutputFolder
    from ...files.strict_json import dumps
    from .export import circuit_json, dot, graphml

    g, cur = res["tm"].graph, res["curve"]
    meta = {"task": res["task"].name, "metric": res["metric"],
            "counterfactual": res["counterfactual"], "model": res["model"]}
    full = circuit_json(g, res["kept"], res["score"], res["se"], res["exact"], meta,
                        res.get("columns") or None)
    csv = ["k,metric,faithfulness"] + [f"{int(k)},{float(m)!r},{float(f)!r}" for k, m, f in zip(
        cur["k"], cur["metric"], cur["faithfulness"], strict=True)]
    files = {"circuit.json": dumps(full) + "\n",
             "circuit.dot": dot(g, res["kept"], res["score"], res["exact"], res["metric"]),
             "circuit.graphml": graphml(g, res["kept"], res["score"], res["exact"]),
             "curve.csv": "\n".join(csv) + "\n",
             "summary.json": dumps(summary(res), indent=1) + "\n"}
    with OutputFolder(out, kind=KIND) as folder:
        for rel, text in files.items():
            folder.write_text(rel, text)
        if extra is not None:
            extra(folder)
    return dict(folder.written)


__all__ = ["KIND", "summary", "write_outputs"]
