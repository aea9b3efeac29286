"""First-order (attribution) estimates of every earlier source's effect on a receiver; they
rank sources for exact patching (:mod:`.receiver`) and are never the reported effect.

Attribution patching (Syed, Rager & Conmy 2023, arXiv:2310.10348; Nanda 2023): replacing a
source's output ``o_S`` by its counterfactual ``o_cf`` (:mod:`.counterfactual`) in the residual
``x`` feeding one of R's inputs changes R's metric ``f`` (mean over sequences) by ``f(x) −
f(x − Δ_S) ≈ ⟨∇_x f, Δ_S⟩``, ``Δ_S = o_S − o_cf``: one backward pass, then one inner product
per source. Linearised around the counterfactual's change, not around zero, so a source with a
large constant output (``Δ_S ≈ 0`` under mean or resample) is not sent to the exact patches.
Below ``o_S`` stands for ``Δ_S``; resample uses its pairings' mean ``Δ``.

- ``q``, ``k``: ``f`` is R's behaviour statistic, linear in R's pattern:
  ``f_n = Σ_ij A_n[i, j] W_n[i, j] / c_n`` (:func:`statistic_weights`).
- ``v``: the output change ``‖z' − z‖/‖z‖`` has no gradient at ``z' = z``; its first-order
  value ``‖J_n o_S‖ / ‖z_n‖`` (``J``: Jacobian of R's output on the content queries) is
  estimated with :data:`PROBES` Gaussian probes ``ρ`` (``E[(ρ·u)²] = ‖u‖²``; Hutchinson 1989)
  as ``mean_n sqrt(mean_ρ ⟨∇f_ρ, o_S⟩_n²)``, ``f_ρ = Σ_n ρ_n · z'_n / ‖z_n‖`` (relative error
  about ``sqrt(2 / PROBES)``).

Computed through the receiver's fold (:class:`.fold.Fold`) where it applies (v then without
probes: ``mean_n ‖A δv_S‖/‖z‖``), else by one GEMM per source layer."""

from __future__ import annotations

import numpy as np

#: Gaussian probes of the v screen (module docstring); their generator's seed.
PROBES = 8
PROBE_SEED = 0
#: The statistics :func:`statistic_weights` covers (those linear in the attention pattern).
LINEAR = ("prev_token", "first_token", "self", "duplicate_token", "induction")


def statistic_weights(statistic: str, seqs):
    """``(W (N, T, T) float64, counts (N,))``: per sequence, ``statistic`` of a pattern ``A`` is
    ``Σ_ij A[i, j] W[i, j] / count`` over the probe's queries (content ``i ≥ 1``); count 0 where
    no query counts."""
    from ...probe.behaviour import token_patterns

    if statistic not in LINEAR:
        raise ValueError(f"{statistic!r} is not linear in the attention pattern")
    n, t = seqs.ids.shape
    c = np.asarray(seqs.content, dtype=bool)
    qi = np.flatnonzero(c & (np.arange(t) >= 1))
    w = np.zeros((n, t, t))
    counts = np.zeros(n)
    for s in range(n):
        if statistic == "prev_token":
            rows = qi[c[qi - 1]]
            w[s, rows, rows - 1] = 1.0
            counts[s] = rows.size
        elif statistic == "first_token":
            w[s, qi, 0] = 1.0
            counts[s] = qi.size
        elif statistic == "self":
            w[s, qi, qi] = 1.0
            counts[s] = qi.size
        else:
            dup, ind = token_patterns(seqs.ids[s])
            m = (dup if statistic == "duplicate_token" else ind)[qi]
            has = m.any(axis=1)
            w[s, qi[has]] = m[has]
            counts[s] = int(has.sum())
    return w, counts


def _score(hm, layer, head, kind, c, u, weights):
    """R's behaviour statistic (a scalar tensor: the sum over sequences of the per-sequence
    statistic, weighted as ``weights`` says) with its q or k input ``u``."""
    w, cnt = weights
    a = (hm.pattern(layer, u, c["k"].clone(), head=head) if kind == "q"
         else hm.pattern(layer, c["q"].clone(), u, head=head))
    return ((a.double() * w).sum((-1, -2)) / cnt).sum()


def _probe(c, v, queries, rho):
    """``Σ_n ρ_n · z'_n / ‖z_n‖`` over the content queries (module docstring, v), ``z' = A v``."""
    z = c["A"].clone() @ v
    z0 = c["z"][:, queries].clone()
    norm = z0.pow(2).sum((-1, -2)).sqrt().clamp_min(1e-30)
    return ((z[:, queries] * rho).sum((-1, -2)) / norm).sum()


def input_metrics(pt, layer: int, head: int, kind: str, statistic: str | None):
    """``(fs, combine)``: scalar functions of R's ``kind`` input (others clean) and
    ``combine(dots)`` turning per-sequence ``⟨∇_x f, o_S⟩`` ``(len(fs), N)`` into the estimate;
    None where the metric has no linear form (an unlabelled receiver's q or k)."""
    import torch

    hm, seqs = pt.hm, pt.seqs
    c = pt.clean(layer, head)
    if kind == "v":
        q = pt._queries
        gen = torch.Generator().manual_seed(PROBE_SEED)
        shape = (seqs.n, q.size, hm.head_dim)
        rhos = [torch.randn(shape, generator=gen) for _ in range(PROBES)]
        fs = [lambda u, r=r: _probe(c, u, q, r) for r in rhos]
        return fs, lambda d: float(np.sqrt((np.asarray(d) ** 2).mean(0)).mean())
    if statistic not in LINEAR:
        return None
    w, cnt = statistic_weights(statistic, seqs)
    ok = cnt > 0
    if not ok.any():
        return None
    weights = (torch.from_numpy(w * ok[:, None, None]),
               torch.from_numpy(np.where(ok, cnt, 1.0) * ok.sum()))
    return [lambda u: _score(hm, layer, head, kind, c, u, weights)], \
        lambda d: float(np.asarray(d)[0].sum())


def metrics(pt, layer: int, head: int, kind: str, statistic: str | None):
    """:func:`input_metrics` as functions of the residual ``x`` entering R's layer (R's
    ``kind`` input computed from it, norm applied)."""
    got = input_metrics(pt, layer, head, kind, statistic)
    if got is None:
        return None
    hm = pt.hm
    fn = {"q": hm.query, "k": hm.key, "v": hm.value}[kind]
    fs, combine = got
    return [lambda x, f=f: f(fn(layer, head, hm.norm(layer)(x))) for f in fs], combine


def gradients(pt, layer: int, fs):
    """``[∇_x f]`` ``(N, T, d)`` float32 of each function of ``fs`` at the residual entering
    R's layer."""
    import torch

    out = []
    with torch.enable_grad():
        x = pt.cap.resid[layer].detach().clone().float().requires_grad_(True)
        for f in fs:
            (g,) = torch.autograd.grad(f(x), x)
            out.append(g.detach())
    return out


def first_order_how(pt):
    """The first-order ``how`` of ``pt``'s counterfactual (:meth:`.fold.Fold.patched`): None
    for zero, else the counterfactual with its pairings' mean change."""
    cf = pt.counterfactual()
    return None if cf.kind == "zero" else (cf, None)


def sequence_dots(pt, gs, n_layers: int, how, dtype=None) -> np.ndarray:
    """``(P, N, n_layers, H)``: per sequence ``⟨g, Δ(r z_S) W_O[S]⟩`` (:func:`.attribution.dots`;
    ``r``: post-norm scale; ``Δ``: of ``how``) for ``gs`` ``(P, N or 1, T, d)``, in ``dtype``."""
    import torch

    from .attribution import dots

    hm, cap = pt.hm, pt.cap
    h = hm.n_heads
    dtype = torch.float32 if dtype is None else dtype
    gs = gs.to(dtype).transpose(0, 1)  # (N or 1, P, T, d)
    out = np.zeros((gs.shape[1], cap.z[0].shape[0], n_layers, h))
    with torch.no_grad():
        for m in range(n_layers):
            w = torch.stack([hm.source_weight(m, s).to(dtype) for s in range(h)])  # (H, dh, d)
            scale = pt.scale(m)
            u = cap.z[m].to(dtype)
            u = u if scale is None else u * scale.to(dtype)[..., None]  # (N, T, H, dh)
            u = u if how is None else how[0].delta(u, how[1])
            per = dots(gs, u.transpose(1, 2), weight=w)  # (N, P, H)
            out[:, :, m] = per.double().numpy().transpose(1, 0, 2)
    return out


def source_dots(pt, grads, n_layers: int, combine) -> np.ndarray:
    """``(n_layers, H)``: ``combine`` of :func:`sequence_dots` ``(P, N)`` under ``pt``'s change."""
    import torch

    d = sequence_dots(pt, torch.stack([g.float() for g in grads]), n_layers,
                      first_order_how(pt))
    return np.array([[combine(d[:, :, m, s]) for s in range(d.shape[3])]
                     for m in range(n_layers)]).reshape(n_layers, d.shape[3])


def fold_dots(pt, layer: int, head: int, kind: str, fs, combine) -> np.ndarray:
    """:func:`source_dots` through the receiver's fold: ``∂f/∂u`` by one backward pass per
    function, then :meth:`.fold.Fold.first_order` (``d_h × d_h`` work per source)."""
    import torch

    hm = pt.hm
    fold = pt.fold(layer)
    which = "qkv".index(kind)
    index = hm.index(which, head)
    srcs = [(m, s) for m in range(layer) for s in range(hm.n_heads)]
    grads = []
    with torch.enable_grad():
        u = fold.clean_projection(head, which).requires_grad_(True)
        q = hm.finish(layer, which, u, index)
        for i, f in enumerate(fs):
            (g,) = torch.autograd.grad(f(q), u, retain_graph=i < len(fs) - 1)
            grads.append(g)
    d = fold.first_order(head, which, torch.stack(grads), srcs,
                         first_order_how(pt)).double().numpy()  # (S, P, N)
    out = np.array([combine(d[i]) for i in range(len(srcs))])
    return out.reshape(layer, hm.n_heads)


def fold_value_changes(pt, layer: int, head: int) -> np.ndarray:
    """``(layer, H)``: the v screen through the fold, deterministic: ``mean_n ‖A δv‖_n / ‖z‖_n``
    over the content queries, ``δv`` from :meth:`.fold.Fold.first_order_changes`."""
    import torch

    hm = pt.hm
    c = pt.clean(layer, head)
    q = pt._queries
    z0 = c["z"][:, q]
    norm = z0.pow(2).sum((-1, -2)).sqrt().clamp_min(1e-30)
    srcs = [(m, s) for m in range(layer) for s in range(hm.n_heads)]
    out = np.zeros(len(srcs))
    with torch.no_grad():
        changes = pt.fold(layer).first_order_changes(head, 2, srcs, first_order_how(pt))
        for i, dv in enumerate(changes):
            dz = (c["A"] @ dv)[:, q]
            out[i] = float((dz.pow(2).sum((-1, -2)).sqrt() / norm).double().mean())
    return out.reshape(layer, hm.n_heads)


def attribution(pt, layer: int, head: int, kind: str, statistic: str | None) -> np.ndarray:
    """``(layer, H)`` first-order estimates of every earlier source's direct effect on R through
    ``kind``: by :func:`fold_dots` where the fold applies, else :func:`source_dots`; NaN where the
    metric has no linear form."""
    got = input_metrics(pt, layer, head, kind, statistic)
    if got is None:
        return np.full((layer, pt.hm.n_heads), np.nan)
    if pt.fold(layer).linearisable:
        if kind == "v":
            return fold_value_changes(pt, layer, head)
        return fold_dots(pt, layer, head, kind, *got)
    fs, combine = metrics(pt, layer, head, kind, statistic)
    return source_dots(pt, gradients(pt, layer, fs), layer, combine)


def spearman(a, b) -> float:
    """Spearman's rank correlation (average ranks for ties; NaN pairs dropped; NaN with fewer
    than 3 pairs or a constant side)."""
    from scipy.stats import spearmanr

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.ptp(a[ok]) == 0 or np.ptp(b[ok]) == 0:
        return float("nan")
    return float(spearmanr(a[ok], b[ok]).statistic)


__all__ = ["LINEAR", "PROBES", "attribution", "first_order_how", "fold_dots",
           "fold_value_changes", "gradients", "input_metrics", "metrics", "sequence_dots",
           "source_dots", "spearman", "statistic_weights"]
