"""Edge scores and circuits in the field's formats, and read back.

**JSON** (MIB's circuit format, as EAP-IG's ``Graph.to_json`` writes and ``Graph.from_json``
reads it; Mueller et al. 2025, arXiv:2504.13151): ``{"cfg": {"n_layers", "n_heads",
"parallel_attn_mlp", "d_model"}, "nodes": {name: {"in_graph"}}, "edges":
{"a0.h1->a1.h0<k>": {"score", "in_graph"}, …}}`` with every node and edge of
:class:`..core.graph.Graph` (``d_model`` where the graph knows it: EAP-IG's reader needs it).
rmtbase adds, per edge, ``se``, ``exact``/``exact_se`` (where patched) and the TransformerLens hook
names of its ends (``sender_hook``: ``blocks.L.attn.hook_result[h]``, ``blocks.L.hook_mlp_out``,
``blocks.0.hook_resid_pre``; ``receiver_hook``: ``blocks.L.hook_k_input[h]``,
``blocks.L.hook_mlp_in``, ``blocks.{L−1}.hook_resid_post``), and a top-level ``rmtbase`` object
(task, metric, counterfactual); MIB's readers ignore both.

:func:`read_circuit` takes that file, or a list of edge names, or ``{"edges": [names]}``, and
returns the kept edges as a boolean vector over the model's graph (one-line refusal of a graph
of another shape or an unknown edge). **DOT** and **GraphML** hold the kept edges with their
scores (the exact effect where measured) for Graphviz, yEd, Gephi or networkx.
:func:`auto_circuit_name` names an edge as auto-circuit's graph does (Miller et al. 2024,
arXiv:2407.08734)."""

from __future__ import annotations

import json
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from ...errors import InputError
from ..core.graph import Graph, parse, receiver_hook, sender_hook, split_receiver


def _num(x):
    x = float(x)
    return x if np.isfinite(x) else None


def circuit_json(g: Graph, kept, score, se=None, exact=None, meta=None, columns=None) -> dict:
    """The JSON document (module docstring); ``exact``: ``{edge number: (effect, se)}``;
    ``columns``: ``{edge number: {name: value}}`` added to those edges (the weights screen's
    :func:`.weights.head_edge_columns`)."""
    kept = np.asarray(kept, dtype=bool)
    names = g.edge_names()
    edges = {}
    in_nodes = {"logits"} if kept.any() else set()
    for i, name in enumerate(names):
        s, r = g.edge(i)
        rec = {"score": _num(score[i]), "in_graph": bool(kept[i])}
        if se is not None:
            rec["se"] = _num(se[i])
        if exact is not None and i in exact:
            rec["exact"], rec["exact_se"] = _num(exact[i][0]), _num(exact[i][1])
        if columns is not None and i in columns:
            rec.update(columns[i])
        rec["sender_hook"] = sender_hook(s)
        rec["receiver_hook"] = receiver_hook(r, g.n_layers)
        edges[name] = rec
        if kept[i]:
            in_nodes.add(s)
            in_nodes.add(split_receiver(r)[0])
    nodes = {n: {"in_graph": n in in_nodes} for n in g.nodes()}
    doc = {"cfg": g.cfg, "nodes": nodes, "edges": edges}
    if meta:
        doc["rmtbase"] = meta
    return doc


def read_circuit_file(path) -> dict | list:
    """The circuit file ``path`` parsed and checked without a graph (before a model is read):
    MIB's JSON (``cfg`` integers, every edge's ``in_graph`` a JSON boolean) or edge names;
    InputError in one line for anything else."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"no circuit file {path}")
    try:
        doc = json.loads(p.read_text("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p.name}: not a JSON circuit ({exc})") from None
    except ValueError as exc:  # an integer over sys.get_int_max_str_digits() digits
        raise InputError(f"{p.name}: not a JSON circuit ({str(exc).split(';')[0]})") from None
    except RecursionError:
        raise InputError(f"{p.name}: not a JSON circuit (nested too deeply)") from None
    if isinstance(doc, dict) and isinstance(doc.get("edges"), dict):
        cfg = doc.get("cfg", {})
        if cfg is None:
            cfg = {}
        if not isinstance(cfg, dict):
            raise InputError(f"{p.name}: cfg must be a JSON object, got {type(cfg).__name__}")
        for key in ("n_layers", "n_heads"):
            v = cfg.get(key)
            if key in cfg and not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
                raise InputError(f"{p.name}: cfg {key} must be a non-negative integer, got "
                                 f"{_short(v)}")
        for name, rec in doc["edges"].items():
            if not isinstance(rec, dict) or "in_graph" not in rec:
                raise InputError(f"{p.name}: edge {_short(name)} has no in_graph")
            if not isinstance(rec["in_graph"], bool):
                raise InputError(f"{p.name}: edge {_short(name)}: in_graph must be true or "
                                 f"false, got {_short(rec['in_graph'])}")
        return doc
    names = doc.get("edges") if isinstance(doc, dict) else doc
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputError(f"{p.name}: a circuit is MIB's JSON ({{'edges': {{name: {{'in_graph': "
                         f"…}}}}}}) or a list of edge names")
    return names


def _short(v, limit: int = 60) -> str:
    """``repr(v)``, cut to ``limit`` characters (a value quoted in a one-line refusal)."""
    r = repr(v)
    return r if len(r) <= limit else r[:limit - 3] + "..."


def read_circuit(path, g: Graph) -> np.ndarray:
    """The kept edges of the circuit file ``path`` (module docstring, :func:`read_circuit_file`)
    on graph ``g``; InputError for a graph of another shape or an edge outside it."""
    p = Path(path)
    doc = read_circuit_file(p)
    kept = g.empty()
    if isinstance(doc, dict):
        cfg = doc.get("cfg") or {}
        for key in ("n_layers", "n_heads"):
            if key in cfg and cfg[key] != getattr(g, key):
                raise InputError(f"{p.name}: a circuit of a model with {cfg[key]} {key[2:]}, "
                                 f"this one has {getattr(g, key)}")
        for name, rec in doc["edges"].items():
            if rec["in_graph"]:
                kept[g.index(name)] = True
        return kept
    for n in doc:
        kept[g.index(n)] = True
    return kept


def _kept_edges(g: Graph, kept):
    for i in np.flatnonzero(kept):
        s, r = g.edge(int(i))
        yield int(i), s, *split_receiver(r)


def shown_values(score, exact=None, metric: str = "logit_diff"):
    """``(value, measured)`` per edge: the exact effect where patched (``exact``: {edge:
    (effect, se)}), else the attribution ``score``; signed so that positive carries the
    metric (under ``kl``, lower is better: turned)."""
    value = np.array(score, dtype=np.float64)
    measured = np.zeros(value.size, dtype=bool)
    for e, (a, _) in (exact or {}).items():
        value[int(e)], measured[int(e)] = a, True
    return (-value if metric == "kl" else value), measured


def dot(g: Graph, kept, score, exact=None, metric: str = "logit_diff") -> str:
    """Graphviz DOT of the kept edges: nodes boxes, an edge labelled by its input (q, k, v)
    and its exact effect where patched (``exact``), else its attribution (``attr``, dashed);
    red where that value works against the metric (:func:`shown_values`)."""
    value, measured = shown_values(score, exact, metric)
    lines = ["digraph circuit {", "  rankdir=BT;", "  node [shape=box];"]
    nodes = set()
    body = []
    for i, s, r, x in _kept_edges(g, kept):
        nodes |= {s, r}
        label = f"{x} {'exact' if measured[i] else 'attr'} {value[i]:+.3g}".strip()
        style = "" if measured[i] else ", style=dashed"
        color = "red" if value[i] < 0 else "black"
        body.append(f'  "{s}" -> "{r}" [label="{label}", color={color}{style}];')
    order = {n: j for j, n in enumerate(g.nodes())}
    lines += [f'  "{n}";' for n in sorted(nodes, key=order.get)]
    return "\n".join(lines + body + ["}"]) + "\n"


def graphml(g: Graph, kept, score, exact=None) -> str:
    """GraphML of the kept edges, attributes ``input`` (q, k, v or empty), ``score`` (the
    attribution) and ``exact`` (the exact effect, where patched)."""
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">',
           '  <key id="input" for="edge" attr.name="input" attr.type="string"/>',
           '  <key id="score" for="edge" attr.name="score" attr.type="double"/>',
           '  <key id="exact" for="edge" attr.name="exact" attr.type="double"/>',
           '  <graph id="circuit" edgedefault="directed">']
    nodes, edges = [], []
    for i, s, r, x in _kept_edges(g, kept):
        for n in (s, r):
            if n not in nodes:
                nodes.append(n)
        ex = (exact or {}).get(i)
        ex = "" if ex is None else f'<data key="exact">{float(ex[0])!r}</data>'
        edges.append(f'    <edge source={quoteattr(s)} target={quoteattr(r)}>'
                     f'<data key="input">{x}</data><data key="score">{float(score[i])!r}'
                     f'</data>{ex}</edge>')
    out += [f"    <node id={quoteattr(n)}/>" for n in nodes] + edges
    return "\n".join(out + ["  </graph>", "</graphml>"]) + "\n"


def auto_circuit_name(name: str) -> str:
    """Edge ``name`` (``sender->receiver``, :meth:`..core.graph.Graph.edge_names`) as auto-circuit's
    factorised graph with separate q, k, v inputs names it: ``input`` ↔ ``Resid Start``,
    ``a{l}.h{h}`` ↔ ``A{l}.{h}``, ``m{l}`` ↔ ``MLP {l}``, ``logits`` ↔ ``Resid End``, and a
    head's input ``<q>``, ``<k>``, ``<v>`` ↔ the suffix ``.Q``, ``.K``, ``.V`` of the receiving
    head (``input->a3.h0<v>`` ↔ ``Resid Start->A3.0.V``)."""
    s, sep, r = name.partition("->")
    if not sep:
        raise InputError(f"an edge name is sender->receiver, got {name!r}")
    return f"{parse(s).auto_circuit}->{parse(r).auto_circuit}"


__all__ = ["auto_circuit_name", "circuit_json", "dot", "graphml", "read_circuit",
           "read_circuit_file", "shown_values"]
