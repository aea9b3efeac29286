"""The composition section of ``report.html`` (``rmtbase score MODEL --composition``).

One shape, decided here: a heading, one line on the null and the counts (pairs per kind,
flagged per kind), a sortable table of the flagged pairs — kind, from (layer, head), to
(layer, head), the score, the effect (the score over the null median: the Gaussian null's
median at (d, d_h), or the pair's own permuted median under the permutation null), p and q
(Benjamini–Hochberg over all pairs and kinds, and within the pair's (kind, layer pair)
family) — largest effect first, at most ``top`` rows; when nothing is flagged, the ``top`` pairs
of smallest p instead, marked as not flagged; and the circuit figure
(:func:`rmtbase.report.composition_figure.plot_circuit`) when one was drawn.
"""

from __future__ import annotations

import html as _html

import numpy as np

#: Rows of the table at most.
TOP = 50
#: Columns of the table, in order.
COLUMNS = ("kind", "from", "to", "composition", "effect", "p", "q", "q_family", "flag")


def pair_rows(ds, *, top: int = TOP) -> tuple[list[tuple], bool]:
    """(rows, flagged): the flagged pairs largest effect first, or (none flagged) the pairs
    of smallest p; each row in :data:`COLUMNS` order."""
    comp = np.asarray(ds["composition"].values)
    flag = np.asarray(ds["composition_flag"].values, dtype=bool) & np.isfinite(comp)
    eff = np.asarray(ds["composition_effect"].values)
    p = np.asarray(ds["composition_p"].values)
    pt = np.asarray(ds["composition_p_tail"].values) if "composition_p_tail" in ds else p
    q = np.asarray(ds["composition_q"].values)
    qf = np.asarray(ds["composition_q_family"].values) if "composition_q_family" in ds \
        else np.full(comp.shape, np.nan)
    kinds = [str(k) for k in ds["kind"].values]
    flagged = bool(flag.any())
    idx = np.argwhere(flag) if flagged else np.argwhere(np.isfinite(comp))
    if flagged:
        key = np.array([-eff[tuple(i)] for i in idx])
    else:
        key = np.array([pt[tuple(i)] for i in idx])
    rows = []
    for j in np.argsort(key, kind="stable")[:top]:
        i = tuple(int(x) for x in idx[j])
        k, a, b, c, e = i
        rows.append((kinds[k], f"L{a}H{b}", f"L{c}H{e}", float(comp[i]), float(eff[i]),
                     float(pt[i]), float(q[i]), float(qf[i]), "yes" if flag[i] else "no"))
    return rows, flagged


def composition_section(ds, png: bytes | None = None, *, top: int = TOP) -> str:
    """The HTML section (module docstring); ``png``: the circuit figure's bytes, embedded."""
    import pandas as pd

    from .html import _img, table_html

    rows, flagged = pair_rows(ds, top=top)
    flag = ds["composition_flag"]
    n_pairs = int(np.isfinite(ds["composition"].isel(kind=0)).sum())
    per_kind = ", ".join(f"{str(k).upper()} {int(flag.sel(kind=k).sum())}"
                         for k in ds["kind"].values)
    null = "permutation (each factor's entries shuffled)" \
        if ds.attrs.get("null_kind") == "permutation" \
        else f"independent Gaussian factors ({ds.attrs.get('null_storage', 'float32')})"
    total = int(flag.sum())
    what = (f"{min(total, top)} of {total} flagged pair(s), largest effect first" if flagged
            else f"no pair flagged; the {len(rows)} pairs of smallest p")
    note = (f"{n_pairs:,} ordered cross-layer pairs per kind; flagged (BH q ≤ "
            f"{ds.attrs.get('alpha', 0.05)} over all pairs and kinds): {per_kind}. Null: "
            f"{null}, {ds.attrs.get('draws', '?')} draws. Effect: the score over the null "
            "median. Scores describe the weights, not attention on a text "
            "(docs/composition.md).")
    table = table_html(pd.DataFrame(rows, columns=list(COLUMNS)), what)
    fig = _img("composition.png", png, "Layers as columns, heads as nodes; flagged pairs as "
               "edges coloured by kind (Q blue, K red, V green), width by effect.") \
        if png else ""
    return (f'<section id="composition"><h2>Head–head composition</h2>'
            f'<p class="note">{_html.escape(note)}</p>{table}{fig}</section>\n')


__all__ = ["COLUMNS", "TOP", "composition_section", "pair_rows"]
