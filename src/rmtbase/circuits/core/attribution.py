"""Edge attribution: a first-order estimate of every edge's effect, with its se over prompts.

Edge ``s → r`` carrying the counterfactual changes ``r``'s input by ``c_s − o_s``
(:mod:`.forward`); to first order the metric loses ``Δ_s · ∂m/∂x_r`` with ``Δ_s = o_s − c_s``,
summed over positions and the model dimension (EAP: Syed, Rager & Conmy 2023, arXiv:2310.10348,
whose score is its negative), or over the model dimension alone for the edge at one position
(:mod:`.exact`); positive where the edge carries the metric, as the exact effect. The gradient
is taken at the clean run (``steps = 0``) or averaged over ``steps`` runs whose embeddings lie
at ``c + α (e − c)``, ``α = j/steps``, ``j = 1 … steps`` (EAP-IG's input integral as its code
takes it, Hanna et al. 2024, arXiv:2403.17806; the last run is the clean one, whose outputs
serve as ``o``); ``kl``, with zero gradient at the clean run, takes ``steps = 5`` by default.

Memory: one batch's ``∂m/∂x_r`` per stage (``R · n · T · d``) and its senders' ``Δ`` (``S · n
· T · d``); per edge only running sums over prompts are kept: no ``(E, N)`` or ``(E, N, T,
d)`` tensor is formed. A stage's scores per prompt are one batched product (:func:`dots`) in
the model's dtype, summed over prompts in float64. The batch's counterfactual outputs come from
:meth:`.runner.Runner.prepared` (kept for the passes that follow); the clean outputs are the
gradient run's own when it is at the clean run. The model's weights take no gradient (their
``requires_grad`` is off during the passes and restored after)."""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from .runner import Runner
from .se import mean_se_of_sums


def default_steps(metric: str) -> int:
    return 5 if metric == "kl" else 0


def attribute(runner: Runner, *, steps: int | None = None, by_position: bool = False,
              within=None):
    """``(score, se)`` ``(n_edges,)`` float64: the mean over prompts of the estimated metric
    loss when the edge alone carries the counterfactual, and its standard error.
    ``by_position``: ``(n_edges, T)``, the edge carrying it at one position (the sum over
    ``d`` only; summed over positions it is the edge's score). ``within``: an edge set ``C``,
    the gradient taken in ``C``'s run (the others carrying the counterfactual); only ``C``'s
    edges are scored, the others NaN."""
    g = runner.tm.graph
    steps = default_steps(runner.metric) if steps is None else int(steps)
    if within is not None:
        within = np.asarray(within, dtype=bool)
        if within.shape != (g.n_edges,):
            raise InputError("within is an (n_edges,) edge set")
    shape = (g.n_edges, runner.task.length) if by_position else (g.n_edges,)
    sums = np.zeros((2, *shape))  # the per-prompt scores' sum and sum of squares
    alphas = [1.0] if steps == 0 else [j / steps for j in range(1, steps + 1)]
    net = getattr(runner.tm, "net", None)  # a model of plain tensors has none
    params = [] if net is None else [p for p in net.parameters() if p.requires_grad]
    for p in params:  # gradients flow to the receivers' inputs only, not to the weights
        p.requires_grad_(False)
    try:
        # prompts × integral points: the bar moves with every gradient run, not per batch
        with runner.bar(runner.task.n * len(alphas), "attribution") as bar:
            for lo, hi in runner.batches():
                _batch(runner, lo, hi, alphas, sums, within, bar)
    finally:
        for p in params:
            p.requires_grad_(True)
    mean, se = mean_se_of_sums(*sums, runner.task.n)
    if within is not None:  # an edge outside the set is not scored
        mean[~within], se[~within] = np.nan, np.nan
    return mean, se


def dots(grad, delta, *, by_position: bool = False, weight=None):
    """Per prompt ``⟨g_r, Δ_s⟩`` ``(n, R, S)`` over positions and ``d`` (module docstring) of
    gradients ``grad`` ``(n, R, T, d)`` and changes ``delta`` ``(n, S, T, d)``; ``by_position``:
    ``(n, R, S, T)``. ``weight`` ``(S, d_h, d)``: ``delta`` ``(n, S, T, d_h)`` is ``δ_s``, ``Δ_s
    = δ_s W_s``, summed as ``⟨g W_sᵀ, δ_s⟩`` (``grad``'s ``n`` may be 1). Both searches' screens
    end here; :meth:`.fold.Fold.first_order` is the fast path."""
    import torch

    if weight is not None:
        s, dh, d = weight.shape
        proj = (grad @ weight.reshape(s * dh, d).T).reshape(*grad.shape[:3], s, dh)
        return (proj * delta.transpose(1, 2)[:, None]).sum((2, 4))
    if by_position:
        return torch.einsum("nrtd,nstd->nrst", grad, delta)
    n = grad.shape[0]
    return torch.bmm(grad.reshape(n, grad.shape[1], -1),
                     delta.reshape(n, delta.shape[1], -1).transpose(1, 2))


def _grad(leaf):
    """A stage's ``∂m/∂x`` of the receivers that have one, and those receivers' rows (None:
    all; :class:`.stages.Rows`); the rows are the edge set's, the same at every point."""
    from .stages import Rows

    if not isinstance(leaf, Rows):
        return leaf.grad, None
    return (leaf.base.new_zeros((0, *leaf.base.shape)) if leaf.x is None else leaf.x.grad,
            leaf.rows)


def _expanded(grad, rows, count: int):
    """``(count, n, T, d)``: ``grad`` of ``rows`` (None: all), the other receivers' 0."""
    import torch

    if rows is None:
        return grad
    return grad.new_zeros((count, *grad.shape[1:])).index_copy_(0, torch.as_tensor(rows), grad)


def _batch(runner, lo, hi, alphas, sums, within=None, bar=None) -> None:
    """Add batch ``lo:hi``'s per-prompt scores and their squares to ``sums[0]``, ``sums[1]``."""
    import torch

    tm, g = runner.tm, runner.tm.graph
    b = runner.prepared(lo, hi)
    grads, clean = None, None
    for a in alphas:
        emb = b["emb"] if a == 1.0 else b["cf_emb"] + a * (b["emb"] - b["cf_emb"])
        res = tm.run(emb, grad=True) if within is None else \
            tm.run(emb, cf=b["cf"], kept=within, grad=True)
        runner.value(b, res["logits"]).sum().backward()
        gs = [_grad(leaf) for leaf in res["leaves"]]
        grads = gs if grads is None else [(x + y, rows) for (x, rows), (y, _) in
                                          zip(grads, gs, strict=True)]
        if a == 1.0:  # at the clean embeddings this run's outputs are the clean run's
            clean = [o.detach() for o in res["outs"]]
        del res
        if bar is not None:
            bar.update(hi - lo)
    n = hi - lo
    with torch.no_grad():
        if clean is None:
            clean = tm.run(b["emb"])["outs"]
        # Δ_s = o_s − c_s as (n, S, T·d), so that a stage's senders are a prefix (a view)
        delta = torch.stack([(o - c).reshape(n, -1) for c, o in zip(
            b["cf"], clean, strict=True)], 1)
        del clean
        for st, (gr, rows) in zip(g.stages, grads, strict=True):
            r_count = len(st.receivers)
            gr = _expanded(gr, rows, r_count).transpose(0, 1)  # (n, R, T, d)
            per = dots(gr, delta[:, :st.n_senders].reshape(n, st.n_senders, *gr.shape[2:]),
                       by_position=sums.ndim == 3)  # sums (2, E, T): per position
            per = per.double().reshape(n, -1, *per.shape[3:]).numpy() / len(alphas)
            sl = slice(st.offset, st.offset + st.size)
            sums[0, sl] += per.sum(0)
            sums[1, sl] += (per ** 2).sum(0)


__all__ = ["attribute", "default_steps", "dots"]
