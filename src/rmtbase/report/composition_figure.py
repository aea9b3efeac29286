"""The circuit figure of a composition score, and its ``--json`` fields.

Draws the chosen pairs only (:mod:`rmtbase.report.composition_standing`), layers as columns,
edges coloured by kind, solid where confirmed: with a circuit search every confirmed Q and K
edge, and the confirmed V edges faint (the :data:`MAX_EDGES` largest by |effect|)."""

from __future__ import annotations

import numpy as np

#: Edge colour per composition kind.
KIND_COLOURS = {"q": "tab:blue", "k": "tab:red", "v": "tab:green"}


def flagged_edges(ds, *, top: int | None = None) -> list[tuple]:
    """(kind, layer_from, head_from, layer_to, head_to, effect) of the flagged pairs, largest
    effect first (``top`` of them, all by default)."""
    flag = np.asarray(ds["composition_flag"].values, dtype=bool)
    eff = np.asarray(ds["composition_effect"].values)
    kinds = [str(k) for k in ds["kind"].values]
    rows = [(kinds[i], int(a), int(b), int(c), int(e), float(eff[i, a, b, c, e]))
            for i, a, b, c, e in zip(*np.nonzero(flag), strict=True)]
    rows.sort(key=lambda r: -r[5])
    return rows if top is None else rows[:top]


#: Edges drawn at most (the first by standing; of confirmed circuits, the V edges by |effect|,
#: every Q and K edge drawn); the title says when more were chosen.
MAX_EDGES = 40
#: Opacity of the confirmed V edges (faint beside the Q and K edges).
V_ALPHA = 0.3
#: Font size of every text of the figure (points; tests/test_figure_legibility.py: >= 7).
FONT = 7.5
#: Least distance between neighbouring head boxes' centres, in box widths (heights).
GAP = 1.12
_BEND = {"q": 0.18, "k": 0.0, "v": -0.18}


def _layout(pairs) -> tuple[dict, list[int], int]:
    """({(layer, head): (x, y)}, the layers drawn, the most heads in one column): the heads of
    ``pairs`` in columns by layer (only the layers with a head), by head number down each."""
    heads = sorted({(r["layer_from"], r["head_from"]) for r in pairs}
                   | {(r["layer_to"], r["head_to"]) for r in pairs})
    layers = sorted({layer for layer, _ in heads})
    col = {layer: i for i, layer in enumerate(layers)}
    pos, depth = {}, {}
    for layer, head in heads:
        pos[(layer, head)] = (col[layer], depth.get(layer, 0))
        depth[layer] = depth.get(layer, 0) + 1
    return pos, layers, max(depth.values(), default=1)


def _figure(n_cols: int, n_rows: int):
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(min(15.0, 3.4 + 1.45 * n_cols), min(10.0, 2.2 + 0.62 * n_rows)),
                     layout="constrained")
    return fig.add_subplot()


def plot_circuit(ds, ax=None, *, circuits=None, labels=None, k: int = 3, top: int = 10):
    """Draw the chosen pairs (:func:`rmtbase.report.composition_standing.chosen_pairs`) as
    arrows between heads in layer columns, named with their ``labels``: of confirmed circuits
    every Q and K pair and at most :data:`MAX_EDGES` V pairs, faint; else at most
    :data:`MAX_EDGES`. Colour by kind, solid if confirmed by patching (dotted via MLP, width by
    |effect| within its kind), dashed if ranked by weights only."""
    import textwrap

    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    from .composition_standing import chosen_pairs, head_name

    pairs, how = chosen_pairs(ds, circuits=circuits, labels=labels, k=k, top=top)
    sizes = _edge_effects(circuits)
    pairs, how = _capped(pairs, how, sizes)
    pos, layers, n_rows = _layout(pairs)
    own = ax is None
    if own:
        ax = _figure(len(layers), n_rows)
    top_effect = {kd: max((abs(v[0]) for key, v in sizes.items() if key[0] == kd),
                          default=0.0) or 1.0 for kd in KIND_COLOURS}
    for r in pairs:
        a, b = pos[(r["layer_from"], r["head_from"])], pos[(r["layer_to"], r["head_to"])]
        bend = _BEND.get(r["kind"], 0.0) + (0.3 if b[0] - a[0] > 1 else 0.0)  # skip columns
        eff, via, neg = sizes.get((r["kind"], head_name(r["layer_from"], r["head_from"]),
                                   head_name(r["layer_to"], r["head_to"])), (None, False, False))
        lw = (1.0 + 3.5 * abs(eff) / top_effect.get(r["kind"], 1.0) if eff is not None
              else 2.2 if r["confirmed"] else 1.1)
        faint = r["kind"] == "v" and r["confirmed"]
        ax.add_patch(FancyArrowPatch(
            a, b, arrowstyle="-[" if neg else "-|>", mutation_scale=9, shrinkA=16,
            shrinkB=16, zorder=1, connectionstyle=f"arc3,rad={bend}",
            color=KIND_COLOURS.get(r["kind"], "0.4"), lw=lw,
            ls=":" if via else "-" if r["confirmed"] else "--",
            alpha=V_ALPHA if faint else 0.85))
    names = []
    for (layer, head), (x, y) in pos.items():
        lab = (labels or {}).get((layer, head))
        text = head_name(layer, head) + (f"\n{lab}" if lab and str(lab) != "none" else "")
        names.append(ax.text(x, y, text, ha="center", va="center", fontsize=FONT, zorder=3,
                             bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": "0.4",
                                   "lw": 0.6}))
    if not pairs:
        ax.text(0.5, 0.5, "no pairs to draw", ha="center", va="center", fontsize=FONT + 1,
                transform=ax.transAxes)
    ax.set_xlim(-0.6, max(len(layers), 1) - 0.4)
    ax.set_ylim(n_rows - 0.5, -0.5)
    ax.set_xticks(range(len(layers)), [f"L{x}" for x in layers], fontsize=FONT)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel("layer (only layers with a drawn head)", fontsize=FONT + 0.5)
    width = max(40, int(ax.figure.get_figwidth() * 11))
    ax.set_title(textwrap.fill(f"composition circuits: {how}", width), fontsize=FONT + 1.5)
    handles = [Line2D([], [], color=c, lw=1.6, label=f"{kn.upper()}-composition")
               for kn, c in KIND_COLOURS.items()]
    handles += [Line2D([], [], color="0.3", lw=2.2, label="confirmed by patching"),
                Line2D([], [], color="0.3", lw=1.1, ls="--", label="ranked by weights only")]
    if sizes:
        handles += [Line2D([], [], color="0.3", lw=2.2, ls=":", label="confirmed via MLP"),
                    Line2D([], [], color="0.3", lw=1.0, label="width: |effect| within its "
                                                                "kind (bar end: suppresses)"),
                    Line2D([], [], color=KIND_COLOURS["v"], lw=1.6, alpha=V_ALPHA,
                           label="V confirmed (faint)")]
    ax.legend(handles=handles, fontsize=FONT, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False, borderaxespad=0.0)
    if own:
        _spread(ax, names, len(layers), n_rows)
    return ax


def _spread(ax, names, n_cols: int, n_rows: int, *, rounds: int = 4) -> None:
    """Grow the figure until no two head boxes overlap: neighbouring columns (rows) at least
    :data:`GAP` times the widest (tallest) box apart, measured as drawn."""
    fig = ax.figure
    for _ in range(rounds):
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        boxes = [t.get_bbox_patch().get_window_extent(r) for t in names]
        if not boxes:
            return
        (x0, y0), (x1, y1) = ax.transData.transform([(0.0, 0.0), (1.0, 1.0)])
        gx = GAP * max(b.width for b in boxes) / abs(x1 - x0) if n_cols > 1 else 1.0
        gy = GAP * max(b.height for b in boxes) / abs(y1 - y0) if n_rows > 1 else 1.0
        if gx <= 1.0 and gy <= 1.0:
            return
        box = ax.get_window_extent(r)
        w, h = fig.get_size_inches()
        fig.set_size_inches(w + box.width / fig.dpi * max(gx - 1.0, 0.0),
                            h + box.height / fig.dpi * max(gy - 1.0, 0.0))


def _capped(pairs: list[dict], how: str, sizes: dict) -> tuple[list[dict], str]:
    """The pairs drawn and the title's words: of confirmed circuits every Q and K pair and the
    :data:`MAX_EDGES` V pairs of largest |effect| (``sizes``: :func:`_edge_effects`); else the
    first :data:`MAX_EDGES` by standing."""
    from .composition_standing import head_name

    if not any(r["confirmed"] for r in pairs):
        if len(pairs) > MAX_EDGES:
            how += f"; the first {MAX_EDGES} of {len(pairs)} by standing drawn"
            pairs = pairs[:MAX_EDGES]
        return pairs, how

    def size(r):
        got = sizes.get((r["kind"], head_name(r["layer_from"], r["head_from"]),
                         head_name(r["layer_to"], r["head_to"])))
        return abs(got[0]) if got else 0.0

    qk = [r for r in pairs if r["kind"] != "v"]
    v = sorted((r for r in pairs if r["kind"] == "v"), key=lambda r: -size(r))
    how = f"{len(qk)} Q/K pair(s) confirmed by path patching, all drawn; V: {len(v)} faint"
    if len(v) > MAX_EDGES:
        how += f" (the {MAX_EDGES} largest by |effect|)"
    return qk + v[:MAX_EDGES], how


def _edge_effects(circuits) -> dict:
    """{(kind, from, to): (effect, via MLP, suppresses)} of the confirmed rows, the largest
    |effect| of each pair (its path and sign with it)."""
    out: dict = {}
    for c in circuits or []:
        if not c.get("confirmed") or c.get("effect_causal") is None:
            continue
        key = (str(c["kind"]), str(c["from"]), str(c["to"]))
        e = float(c["effect_causal"])
        if key not in out or abs(e) > abs(out[key][0]):
            out[key] = (e, c.get("path") == "via_mlp", c.get("role") == "suppresses")
    return out


def _attr_or_none(ds, name: str, kind):
    """A file attr as ``kind``, None where the file has none (an older file)."""
    return kind(ds.attrs[name]) if name in ds.attrs else None


def composition_json(ds, circuits=None) -> dict:
    """The ``--json`` fields: sizes, null, flag counts per kind, the largest flagged pairs
    (``top``) and the first pairs by standing (``standing``)."""
    from .composition_standing import standing_rows

    flag = ds["composition_flag"]
    med = ds["null_median"]  # one value (Gaussian null) or per pair (permutation null)
    keys = ("kind", "from", "to", "rank_source", "sources", "rank_kind", "score", "effect", "p",
            "flag", "confirmed")
    return {"file": "composition.nc", "draws": int(ds.attrs.get("draws", 0)),
            "null": str(ds.attrs.get("null_kind", "gaussian")),
            "null_median": float(med) if med.ndim == 0 else None,
            "alpha": float(ds.attrs.get("alpha", 0)),
            "size_sd": _attr_or_none(ds, "composition_size_sd", float),
            "open_pairs": _attr_or_none(ds, "composition_open_pairs", int),
            "pairs_per_kind": int(np.isfinite(ds["composition"].isel(kind=0)).sum()),
            "flagged": {str(k): int(flag.sel(kind=k).sum()) for k in ds["kind"].values},
            "top": [{"kind": k, "layer_from": a, "head_from": b, "layer_to": c, "head_to": e,
                     "effect": eff} for k, a, b, c, e, eff in flagged_edges(ds, top=10)],
            "standing": [{key: r[key] for key in keys}
                         for r in standing_rows(ds, top=10, circuits=circuits)]}


def circuit_figure(ctx: dict):
    """The figure ``figures/composition.png`` of a composition context
    (:func:`rmtbase.report.circuit_context.context`): :func:`plot_circuit` of its composition,
    circuits and labels, closed to pyplot (saved by the caller)."""
    import matplotlib.pyplot as plt

    ax = plot_circuit(ctx["composition"], circuits=ctx["circuits"], labels=ctx["labels"])
    plt.close(ax.figure)
    return ax.figure


__all__ = ["FONT", "GAP", "KIND_COLOURS", "MAX_EDGES", "V_ALPHA", "circuit_figure",
           "composition_json", "flagged_edges", "plot_circuit"]
