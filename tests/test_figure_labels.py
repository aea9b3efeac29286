"""No two names overlap in the circuit figures, measured on the drawn figure (Agg,
``get_window_extent`` of each name as rendered): the head-search figure
(``rmtbase.report.composition_figure.plot_circuit``, ``figures/circuits.png``) grows until
every head's box stands clear of its neighbours, at 20 layers × 9 heads; the task
figure (``rmtbase.report.task_figures.plot_task_circuit``, ``figures/circuit.png``) names its
heads and MLPs, the strongest first, only where a name fits."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def _boxes(fig, texts):
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    return [(t.get_text(), (t.get_bbox_patch() or t).get_window_extent(r)) for t in texts]


def _overlapping(boxes):
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


def _head_search_case(seed=1, n_l=20, n_h=9):
    from test_composition_report import _random_composition

    rng = np.random.default_rng(seed)
    names = ["induction", "previous-token", "duplicate-token", "self/local"]
    labels = {(int(layer), int(h)): names[int(rng.integers(4))]
              for layer in range(1, n_l) for h in rng.choice(n_h, 3, replace=False)}
    conf = [{"kind": "kq"[int(rng.integers(2))], "confirmed": True, "to": f"L{layer}H{h}",
             "from": f"L{int(rng.integers(0, layer))}H{int(rng.integers(n_h))}"}
            for (layer, h) in labels for _ in range(2)]
    return _random_composition(n_l=n_l, n_h=n_h, seed=seed), labels, conf


def test_head_search_figure_has_no_overlapping_heads():
    from test_figure_legibility import legibility

    from rmtbase.report.composition_figure import plot_circuit

    ds, labels, conf = _head_search_case()  # boxes overlapped at the former fixed 15-in width
    ax = plot_circuit(ds, labels=labels, circuits=conf)
    texts = [t for t in ax.texts if t.get_text().strip() and t.get_bbox_patch() is not None]
    assert len(texts) >= 40
    assert not _overlapping(_boxes(ax.figure, texts))
    n, problems = legibility(ax.figure)
    assert n == 1 and not problems, problems
    plt.close(ax.figure)


def test_task_figure_names_heads_and_mlps_without_overlap():
    from test_figure_legibility import legibility

    from rmtbase.circuits.core.graph import Graph
    from rmtbase.report.task_figures import plot_task_circuit

    g = Graph(30, 9)  # SmolLM2-135M's graph
    rng = np.random.default_rng(0)
    score = rng.standard_normal(g.n_edges) * rng.random(g.n_edges) ** 4
    kept = np.zeros(g.n_edges, dtype=bool)
    kept[np.argsort(-np.abs(score))[:400]] = True
    fig, ax = plt.subplots(figsize=(10, 5), layout="constrained")  # as write_task_report
    plot_task_circuit(g, kept, score, ax, title="capitals on SmolLM2")
    names = [t for t in ax.texts if t.get_text().strip()]
    got = {t.get_text() for t in names}
    assert any(n.startswith("a") and ".h" in n for n in got), got  # heads named
    assert any(n.startswith("m") and n[1:].isdigit() for n in got), got  # MLPs named
    assert len(names) >= 10
    assert not _overlapping(_boxes(fig, names))
    n, problems = legibility(fig)
    assert n == 1 and not problems, problems
    plt.close(fig)


def test_a_small_task_circuit_names_every_node():
    from rmtbase.circuits.core.graph import Graph
    from rmtbase.report.task_figures import plot_task_circuit

    g = Graph(2, 4)
    score = np.linspace(-1.0, 1.0, g.n_edges)
    kept = np.zeros(g.n_edges, dtype=bool)
    kept[[0, g.n_edges - 1]] = True
    ax = plot_task_circuit(g, kept, score)
    ends = {n.partition("<")[0] for i in np.flatnonzero(kept) for n in g.edge(int(i))}
    assert {t.get_text() for t in ax.texts} == ends
    plt.close(ax.figure)


def test_task_report_facts_name_units_and_signs():
    """The task page's facts say each number's unit and sign convention: the metric's unit for
    every metric the search takes, faithfulness's ends, what a negative ratio means, and the
    confirmation rule."""
    import html

    from rmtbase.circuits.core.metric import METRICS
    from rmtbase.circuits.task.confirm import RULE_IN_CONTEXT
    from rmtbase.report.task_report import METRIC_UNITS, _facts

    assert set(METRIC_UNITS) == set(METRICS)
    c = {"edges": 10, "faithfulness": -0.2, "faithfulness_se": 0.05, "ratio": -0.64,
         "full_metric": 8.0, "empty_metric": -8.0, "completeness_faithfulness": 0.9}
    losses = {k: {"mean": 1.5, "se": 0.1} for k in ("clean", "circuit_only",
                                                    "circuit_removed", "all_removed")}
    s = {"model": "m", "task": "t", "prompts": 8, "tokens": 5, "metric": "logit_diff",
         "counterfactual": "corrupted", "n_edges": 100, "circuit": c, "confirmed_circuit": c,
         "curve_area": 0.5, "smallest_reaching": {"target": 0.8, "edges": 40},
         "output_losses": losses, "confirmation": {"rule": RULE_IN_CONTEXT, "in_context": True},
         "split": {"holdout": 0.5, "fit": 4, "held_out": 4, "in_sample": False}}
    text = _facts(s)
    assert html.escape(RULE_IN_CONTEXT) in text  # the rule the verdicts followed
    assert "-0.200 ± 0.05" in text and "circuit only 1.500 ± 0.1" in text
    assert "nats (-log p(answer))" in text
    assert "(logits)" in text and "1: the full model, 0: the empty graph" in text
    assert "ratio -0.640" in text and "negative: the circuit alone gives the metric" in text
