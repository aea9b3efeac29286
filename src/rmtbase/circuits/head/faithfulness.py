"""A receiver's circuit tested as a whole: faithfulness, its floor, and idle sources.

Receiver R (layer ``l``), input ``κ`` (q, k or v), circuit ``C``: the sources confirmed for
(R, κ) on any path. Every head of a layer before ``l`` that is not in ``C`` has its output
replaced by its counterfactual (:mod:`..core.counterfactual`) in its layer's attention
output, the MLPs are recomputed on the changed residual (so the kept heads' contributions
through MLPs survive) and every attention output is otherwise held clean
(:meth:`..core.paths.ForwardPaths.kept`). Where the via-MLP screen does not run (a model without
MLPs, or one above its budget: then no via-MLP edge is confirmed either) the direct changes are
summed instead, one forward pass less per set. R's ``κ`` input reads the resulting residual at
``l``, its other inputs the clean one (:meth:`..core.receiver.Patcher.effects_from_residuals`).

q, k (a behaviour statistic ``s``): ``F = mean_n s_C / mean_n s`` (:func:`..core.faithfulness
.ratio`); v: ``F = 1 − mean_n c_C``, ``c`` the relative output change ``‖z' − z‖/‖z‖``.

``faithfulness_empty`` is ``F`` with nothing kept (every earlier head counterfactual): the floor
a circuit is read against. With every earlier head kept ``F = 1`` exactly. A confirmed source
``c`` is **idle** when ``|F(C) − F(C ∖ {c})| < se(C)`` (or is 0): the circuit does as well
without it. An input with no confirmed source has the empty circuit: ``F`` is its floor.
Resample averages the per-sequence values over its pairings first. MIB scores circuits by the
same ratio (Mueller et al. 2025, arXiv:2504.13151); Wang et al. 2022 (arXiv:2211.00593) measure
a circuit with everything else mean-ablated."""

from __future__ import annotations

import numpy as np

from ..core.faithfulness import ratio
from ..core.receiver import OUTPUT_CHANGE, TV
from ..core.se import finite_mean_se


def residual_keeping(run, layer: int, keep, how, mlps: bool):
    """The residual entering ``layer`` with every earlier head but ``keep`` counterfactual:
    through the MLPs (``mlps``), else the direct changes only (every head replaced, then the
    kept ones' changes added back: ``|keep|`` products)."""
    if mlps:
        return run.cap.resid[layer].float() + run.mlp().kept(layer, keep, how)
    out = run.pt.without_sources(layer, how).clone()
    for m, s in keep:
        out += run.pt.source_delta(int(m), int(s), how)
    return out


def residual_removing(run, layer: int, removed, how, mlps: bool):
    """The residual entering ``layer`` with only the heads ``removed`` counterfactual (as
    :func:`residual_keeping` with every other earlier head kept; directly: ``|removed|``
    products)."""
    if mlps:
        gone = {(int(m), int(s)) for m, s in removed}
        keep = [(m, s) for m in range(layer) for s in range(run.hm.n_heads)
                if (m, s) not in gone]
        return residual_keeping(run, layer, keep, how, True)
    out = run.cap.resid[layer].float().clone()
    for m, s in removed:
        out -= run.pt.source_delta(int(m), int(s), how)
    return out


def _values(run, rec, kind, keep, mlps):
    """Per sequence ``s_C`` (q, k) or ``c_C`` (v), averaged over the counterfactual's patches."""
    li, hi, stat = rec
    pt = run.pt
    st = None if kind == "v" else stat
    vals = []
    for how in pt.hows():
        x = residual_keeping(run, li, keep, how, mlps)
        e = pt.effects_from_residuals(li, hi, [x], kind, st)[0]
        if e.metric == OUTPUT_CHANGE:
            vals.append(np.asarray(e.per_sequence, dtype=np.float64))
        else:
            base = pt.base_scores(li, hi, st)
            vals.append(np.asarray(base, dtype=np.float64) - e.per_sequence)
    return np.mean(vals, axis=0)


def _ratio(run, rec, kind, values):
    """``(F, se)`` of the module docstring from the per-sequence values."""
    li, hi, stat = rec
    if kind == "v":
        m, se = finite_mean_se(values, least=2)
        return 1.0 - m, se
    return ratio(values, run.pt.base_scores(li, hi, stat))


def measure(run, rec, kind: str, circuit, *, mlps: bool) -> dict:
    """``{faithfulness, faithfulness_se, faithfulness_empty, idle: {source: bool}}`` of
    receiver ``rec`` = (layer, head, statistic), input ``kind`` and ``circuit`` ((m, s) pairs;
    empty: faithfulness is its floor); NaN for an unlabelled receiver's q or k (no behaviour to
    keep). ``idle`` also where removing a source changes nothing at all (``se`` 0)."""
    circuit = sorted({(int(m), int(s)) for m, s in circuit})
    nan = {"faithfulness": np.nan, "faithfulness_se": np.nan, "faithfulness_empty": np.nan,
           "idle": {}}
    if kind != "v" and rec[2] is None:
        return nan
    f0, se0 = _ratio(run, rec, kind, _values(run, rec, kind, [], mlps))
    if not circuit:  # nothing confirmed: the circuit is empty, its faithfulness the floor
        return {"faithfulness": f0, "faithfulness_se": se0, "faithfulness_empty": f0,
                "idle": {}}
    f, se = _ratio(run, rec, kind, _values(run, rec, kind, circuit, mlps))
    idle = {}
    for c in circuit:
        rest = [x for x in circuit if x != c]
        fc, _ = _ratio(run, rec, kind, _values(run, rec, kind, rest, mlps))
        idle[c] = bool(np.isfinite(fc) and np.isfinite(se)
                       and (abs(f - fc) < se or f == fc))
    return {"faithfulness": f, "faithfulness_se": se, "faithfulness_empty": f0, "idle": idle}


def apply(run, rec, rows: list[dict], *, mlps: bool) -> None:
    """Faithfulness of each input's circuit (its confirmed rows' sources, any path) set on that
    input's rows of receiver ``rec``, and ``idle`` on its confirmed rows, in place."""
    for kind in ("q", "k", "v"):
        mine = [r for r in rows if r["kind"] == kind]
        circuit = {(r["layer_from"], r["head_from"]) for r in mine if r["confirmed"]}
        got = (measure(run, rec, kind, circuit, mlps=mlps) if mine and
               mine[0]["metric"] != TV else None)
        for r in mine:
            r["faithfulness"] = np.nan if got is None else got["faithfulness"]
            r["faithfulness_se"] = np.nan if got is None else got["faithfulness_se"]
            r["faithfulness_empty"] = np.nan if got is None else got["faithfulness_empty"]
            r["idle"] = bool(got is not None and r["confirmed"] and
                             got["idle"].get((r["layer_from"], r["head_from"]), False))


__all__ = ["apply", "measure", "residual_keeping", "residual_removing"]
