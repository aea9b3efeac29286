"""The circuit figure of a composition score: layers as columns, heads as nodes, flagged pairs
as edges coloured by kind (Q, K, V), width by effect (score over the null median).

Takes the Dataset of :func:`rmtbase.scoring.composition.composition`; ``ax`` in, ``ax`` out.
"""

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


def plot_circuit(ds, ax=None, *, top: int | None = 200):
    """Draw the heads as a layer × head grid and the flagged pairs as edges (module docstring);
    returns the Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    if ax is None:
        _, ax = plt.subplots(figsize=(1.2 + 0.9 * ds.sizes["layer_to"],
                                      1.0 + 0.25 * ds.sizes["head_to"]))
    n_l, n_h = ds.sizes["layer_to"], ds.sizes["head_to"]
    edges = flagged_edges(ds, top=top)
    big = max((e[5] for e in edges), default=1.0)
    for kind, a, b, c, e, eff in edges:
        ax.plot([a, c], [b, e], color=KIND_COLOURS[kind], alpha=0.7,
                lw=0.5 + 3.5 * (eff - 1.0) / max(big - 1.0, 1e-9), zorder=1)
    gx, gy = np.meshgrid(np.arange(n_l), np.arange(n_h), indexing="ij")
    ax.scatter(gx.ravel(), gy.ravel(), s=18, c="0.3", zorder=2)
    ax.set_xticks(range(n_l))
    ax.set_xlabel("layer")
    ax.set_ylabel("head")
    ax.set_ylim(n_h - 0.5, -0.5)
    ax.set_title(f"composition: {len(edges)} flagged pair(s) shown (BH {ds.attrs.get('alpha', '')})"
                 , fontsize=9)
    ax.legend(handles=[Line2D([], [], color=c, label=f"{k.upper()}-composition")
                       for k, c in KIND_COLOURS.items()], fontsize=7, loc="upper right")
    return ax


def composition_json(ds) -> dict:
    """The ``--json`` fields of a composition score: sizes, null, flag counts per kind, the
    largest flagged pairs."""
    flag = ds["composition_flag"]
    med = ds["null_median"]  # one value (Gaussian null) or per pair (permutation null)
    return {"file": "composition.nc", "draws": int(ds.attrs.get("draws", 0)),
            "null": str(ds.attrs.get("null_kind", "gaussian")),
            "null_median": float(med) if med.ndim == 0 else None,
            "alpha": float(ds.attrs.get("alpha", 0)),
            "pairs_per_kind": int(np.isfinite(ds["composition"].isel(kind=0)).sum()),
            "flagged": {str(k): int(flag.sel(kind=k).sum()) for k in ds["kind"].values},
            "top": [{"kind": k, "layer_from": a, "head_from": b, "layer_to": c, "head_to": e,
                     "effect": eff} for k, a, b, c, e, eff in flagged_edges(ds, top=10)]}


__all__ = ["KIND_COLOURS", "composition_json", "flagged_edges", "plot_circuit"]
