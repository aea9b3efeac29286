"""Figures of a task's circuit (:mod:`rmtbase.circuits.task`): the circuit as a graph over
layers and heads, and its faithfulness curve. Functions take ``ax=None`` and return the Axes;
nothing saves.

The graph: x is the depth (``input`` left, each layer's heads then its MLP, ``logits``
right), y the head (MLPs above the heads, ``input`` and ``logits`` in the middle). An edge
is a line from its sender to its receiver, drawn ending a quarter of a row below (``q``), at
(``k``) or above (``v``) the receiving head so the three inputs stay apart; its width grows
with ``|score|`` and its colour is the score's sign (blue: the edge carries the metric,
positive; red: it works against it). Nodes are named (``a3.h1`` a head, ``m3`` an MLP), the
strongest first, as many as fit without overlapping."""

from __future__ import annotations

import numpy as np

from ._labels import figure_axes

#: Colours of an edge carrying the metric (positive score) and working against it.
SUPPORT, AGAINST = "#2166ac", "#b2182b"
#: Font size of the nodes' names (points; tests/test_figure_legibility.py: >= 7).
NODE_FONT = 7.5
#: Least gap between two names, in points (half of it on each side of a box).
NAME_PAD = 1.5
#: Offsets of a head's q, k and v inputs, in rows.
INPUT_OFFSET = {"q": -0.25, "k": 0.0, "v": 0.25}


def node_xy(name: str, n_layers: int, n_heads: int) -> tuple[float, float]:
    """Where node ``name`` (``input``, ``a{l}.h{h}``, ``m{l}``, ``logits``; a receiver's
    ``<q>``, ``<k>``, ``<v>`` shifts it by :data:`INPUT_OFFSET`) is drawn."""
    from ..circuits.core.graph import parse

    node = parse(name)
    mid = (n_heads - 1) / 2
    if node.kind == "input":
        return -1.0, mid
    if node.kind == "logits":
        return float(n_layers), mid
    if node.kind == "mlp":
        return node.layer + 0.5, n_heads + 0.5
    return float(node.layer), node.head + INPUT_OFFSET.get(node.input, 0.0)


def plot_task_circuit(graph, kept, score, ax=None, *, top: int = 150, title: str = ""):
    """The edges of ``kept`` (``(n_edges,)`` bool over ``graph``,
    :class:`rmtbase.circuits.core.graph.Graph`) with their ``score``; of a larger circuit
    the ``top`` of largest ``|score|`` are drawn (the title says how many of how many)."""
    from matplotlib.collections import LineCollection

    from ..circuits.core.graph import split_receiver

    ax = figure_axes(ax)
    kept = np.asarray(kept, dtype=bool)
    score = np.asarray(score, dtype=np.float64)
    idx = np.flatnonzero(kept)
    idx = idx[np.argsort(-np.abs(score[idx]), kind="stable")][:int(top)]
    L, H = graph.n_layers, graph.n_heads
    segs, colours, widths, weight = [], [], [], {}
    big = float(np.abs(score[idx]).max()) if idx.size else 1.0
    for i in idx[::-1]:  # the strongest drawn last, on top
        s, r = graph.edge(int(i))
        segs.append([node_xy(s, L, H), node_xy(r, L, H)])
        colours.append(SUPPORT if score[i] > 0 else AGAINST)
        widths.append(0.4 + 3.0 * abs(score[i]) / (big or 1.0))
        for n in (s, split_receiver(r)[0]):
            weight[n] = weight.get(n, 0.0) + abs(float(score[i]))
    nodes = set(weight)
    ax.add_collection(LineCollection(segs, colors=colours, linewidths=widths, alpha=0.7))
    if nodes:
        xy = np.array([node_xy(n, L, H) for n in sorted(nodes)])
        ax.scatter(xy[:, 0], xy[:, 1], s=14, c="0.2", zorder=3)
    ax.set_xlim(-1.5, L + 0.5)
    ax.set_ylim(-1, H + 1.5)
    step = max(1, int(np.ceil(L / 12)))
    ax.set_xticks([-1, *range(0, L, step), L],
                  labels=["input", *[str(v) for v in range(0, L, step)], "logits"])
    ax.set_yticks([*range(H), H + 0.5], labels=[*[str(h) for h in range(H)], "MLP"])
    ax.set_xlabel("layer (heads at the integer, the MLP half a layer on)")
    ax.set_ylabel("head")
    shown = f"the {idx.size} strongest of {int(kept.sum())} edges" if kept.sum() > idx.size \
        else f"{int(kept.sum())} edges"
    said = (f"{shown}; blue supports the metric, red works against it\n"
            "nodes named where they fit, the strongest first (aL.hH a head, mL an MLP)")
    ax.set_title(f"{title}\n{said}" if title else said, fontsize="medium")
    name_nodes(ax, weight, L, H)
    return ax


def name_nodes(ax, weight: dict, n_layers: int, n_heads: int) -> int:
    """Name the drawn nodes beside their dots, the largest ``weight`` (summed |score| of their
    drawn edges) first, skipping a name whose box would overlap one already placed; returns
    how many were named. Measured on the figure as drawn (names stay out of its layout)."""
    fig = ax.figure
    if not hasattr(fig.canvas, "get_renderer"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    pad = NAME_PAD * fig.dpi / 72
    placed = []
    for n in sorted(weight, key=lambda k: (-weight[k], k)):
        t = ax.annotate(n, node_xy(n, n_layers, n_heads), xytext=(3, 3),
                        textcoords="offset points", fontsize=NODE_FONT, color="0.15",
                        zorder=4, annotation_clip=False)
        t.set_in_layout(False)
        box = t.get_window_extent(r).padded(pad)
        if any(box.overlaps(b) for b in placed):
            t.remove()
            continue
        placed.append(box)
    return len(placed)


def plot_faithfulness(curve: dict, n_edges: int, ax=None, *, label: str = "ranked edges",
                      colour=None, losses: dict | None = None):
    """The faithfulness curve (:func:`rmtbase.circuits.core.faithfulness.curve`): ``f`` of
    the top ``k`` edges against ``k`` (log scale, ``k = 0`` at the left edge), the target as
    a dashed line and the smallest circuit reaching it as a dotted one; ``losses`` (the output
    losses of the reported circuit) as a note at the lower right. Call again on the same
    ``ax`` to add another ranking's curve."""
    ax = figure_axes(ax)
    k = np.asarray(curve["k"], dtype=np.float64)
    f = np.asarray(curve["faithfulness"], dtype=np.float64)
    line, = ax.plot(np.maximum(k, 0.5), f, marker="o", ms=3, color=colour,
                    label=f"{label} (area {curve['area']:.3f})")
    ax.set_xscale("log")
    ax.axhline(curve["target"], color="0.5", ls="--", lw=0.8)
    if curve.get("smallest") is not None:
        ax.axvline(curve["smallest"], color=line.get_color(), ls=":", lw=1)
    ax.set_xlim(0.5, n_edges * 1.5)
    ax.set_xlabel("edges kept, the top k (k = 0 at the left edge)")
    ax.set_ylabel("faithfulness")
    ax.legend(fontsize="small", loc="upper left")
    if losses is not None:
        text = "\n".join(f"{k.replace('_', ' ')}: {v['mean']:.3f} ± {v['se']:.2g}"
                         for k, v in losses.items() if isinstance(v, dict))
        ax.text(0.98, 0.03, "output loss, nats\n" + text, transform=ax.transAxes,
                ha="right", va="bottom", fontsize="x-small", family="monospace",
                bbox={"facecolor": "white", "edgecolor": "0.7", "alpha": 0.9})
    return ax


__all__ = ["AGAINST", "INPUT_OFFSET", "NAME_PAD", "NODE_FONT", "SUPPORT", "name_nodes", "node_xy",
           "plot_faithfulness", "plot_task_circuit"]
