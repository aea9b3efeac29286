"""Path patching of one receiver head from the residual captured once (:mod:`.capture`).

Receiver R (layer ``l``), sources S_i (layers ``m_i < l``): each source's direct output
``o_i = z_{S_i} W_O[S_i]`` (no bias; :meth:`.heads.HeadModel.source_output`) is replaced by its
counterfactual ``o_cf`` (:mod:`.counterfactual`: the mean over the other sequences at each position,
another sequence's output, or zero) in the residual entering layer ``l`` — ``x − Σ_i (o_i −
o_cf,i)`` —, the layer norm is re-applied, and the result feeds **only one** of R's inputs,
``q``, ``k`` or ``v`` (the others clean): only the direct path S → R is changed. Wang et al. 2022
(arXiv:2211.00593) path patching. A resample effect is the mean over its pairings of the
per-sequence effects.

Effect per sequence, then mean and ``se = sd / √N`` (``ddof=1``) over the ``N`` sequences
(:meth:`Patcher.influence`'s under ``mean`` for q or k with a statistic):

- ``q``, ``k`` with R's label's statistic (:mod:`rmtbase.probe.behaviour`): ``score(A) −
  score(A')``, the drop, in the statistic's units;
- ``q``, ``k`` without one (:data:`TV`): the mean over content queries ``i ≥ 1`` of
  ``½ Σ_j |A'[i, j] − A[i, j]|``;
- ``v`` (:data:`OUTPUT_CHANGE`; A does not depend on v): ``‖z'_R − z_R‖_F / ‖z_R‖_F`` over
  the content queries and the ``d_h`` dimensions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InputError
from ...probe import behaviour as bh
from .capture import Captured
from .counterfactual import DEFAULT_ABLATION, Counterfactual
from .heads import HeadModel
from .prompts import Sequences
from .se import finite_mean_se

KINDS = ("q", "k", "v")
TV = "attention_tv"
OUTPUT_CHANGE = "output_change"


@dataclass(frozen=True)
class Effect:
    """``effect`` (mean over sequences), ``se``, ``base`` (the unpatched score; 0 for the change
    metrics), ``metric``, ``per_sequence`` ``(N,)``."""

    effect: float
    se: float
    base: float
    metric: str
    per_sequence: np.ndarray


def sequence_scores(attn, seqs: Sequences, statistic: str) -> np.ndarray:
    """One head's ``statistic`` per sequence from its patterns ``attn`` ``(N, T, T)`` → ``(N,)``,
    or ``(P, N, T, T)`` → ``(P, N)``; NaN where no query counts."""
    a = np.asarray(attn, dtype=np.float64)
    one = a.ndim == 3
    a = a[None] if one else a
    out = np.full(a.shape[:2], np.nan)
    for i in range(a.shape[1]):
        s, n = bh.window_sums(a[:, i], seqs.content, causal=True, ids=seqs.ids[i])[statistic]
        if n:
            out[:, i] = s / n
    return out[0] if one else out


def average(per_pairing: list[list[Effect]]) -> list[Effect]:
    """Per set, the mean over pairings of the per-sequence effects, then mean and se."""
    if len(per_pairing) == 1:
        return per_pairing[0]
    out = []
    for effs in zip(*per_pairing, strict=True):
        x = np.mean([e.per_sequence for e in effs], axis=0)
        out.append(Effect(*finite_mean_se(x), effs[0].base, effs[0].metric, x))
    return out


class Patcher:
    """Path patches of receivers of ``hm`` on the capture ``cap`` of ``seqs`` (module docstring)
    under the counterfactual ``ablation`` (:data:`.counterfactual.ABLATIONS`; each call may name
    another); the last receiver's clean q, k, v and pattern are kept for its candidates."""

    def __init__(self, hm: HeadModel, cap: Captured, seqs: Sequences,
                 ablation: str = DEFAULT_ABLATION):
        self.hm, self.cap, self.seqs = hm, cap, seqs
        self.ablation = Counterfactual(ablation, seqs.n).kind
        self._clean = None
        self._fold = None
        self._removed: dict = {}
        self._influence: tuple = (None, None)
        self._queries = np.flatnonzero(seqs.content & (np.arange(seqs.length) >= 1))

    def counterfactual(self, ablation: str | None = None) -> Counterfactual:
        """The :class:`.counterfactual.Counterfactual` named (None: the patcher's own)."""
        return Counterfactual(self.ablation if ablation is None else ablation, self.seqs.n)

    def hows(self, ablation: str | None = None) -> list:
        """The ``how`` of each patch an effect under ``ablation`` averages: (counterfactual,
        pairing) per pairing, ``[None]`` for zero (:meth:`.fold.Fold.patched`)."""
        cf = self.counterfactual(ablation)
        return [None] if cf.kind == "zero" else [(cf, p) for p in range(cf.pairings)]

    def clean(self, layer: int, head: int) -> dict:
        """The receiver's unpatched ``q``, ``k``, ``v``, ``A``, ``z``, computed as a patch without
        sources, so a source writing exact zeros has effect exactly 0."""
        if self._clean is not None and self._clean["id"] == (layer, head):
            return self._clean
        import torch

        hm = self.hm
        with torch.inference_mode():
            fold = self.fold(layer)  # the same arithmetic as a patch, without sources
            q, k, v = (fold.patched(head, [], which) for which in range(3))
            a = hm.pattern(layer, q, k, head=head)
            self._clean = {"id": (layer, head), "q": q, "k": k, "v": v, "A": a, "z": a @ v,
                           "scores": {}}
        return self._clean

    def base_scores(self, layer: int, head: int, statistic: str) -> np.ndarray:
        """``(N,)`` the receiver's unpatched ``statistic`` per sequence."""
        c = self.clean(layer, head)
        if statistic not in c["scores"]:
            c["scores"][statistic] = sequence_scores(c["A"].numpy(), self.seqs, statistic)
        return c["scores"][statistic]

    def patched_input(self, layer: int, head: int, sources, kind: str, how=None):
        """R's ``kind`` input from the residual with the sources' direct outputs replaced as
        ``how`` says (:meth:`hows`; None: removed), the norm re-applied: the reference the
        :class:`.fold.Fold` of :meth:`effect` equals."""
        import torch

        hm, cap = self.hm, self.cap
        for m, _ in sources:
            if not 0 <= int(m) < layer:
                raise InputError(f"source layer {m} is not before the receiver's layer {layer}")
        with torch.inference_mode():
            x = cap.resid[layer].clone()
            for m, s in sources:
                x -= self.source_delta(int(m), int(s), how)
            xn = hm.norm(layer)(x)
            return {"q": hm.query, "k": hm.key, "v": hm.value}[kind](layer, head, xn)

    def scale(self, layer: int):
        """The captured post-norm scale of ``layer`` (None for pre-norm blocks)."""
        return None if self.cap.scale is None else self.cap.scale[layer]

    def source_output(self, layer: int, head: int):
        """What source head ``head`` of ``layer`` writes into the residual, ``(N, T, d)``."""
        import torch

        with torch.no_grad():
            return self.hm.source_output(layer, head, self.cap.z[layer][:, :, head, :].float(),
                                         self.scale(layer))

    def source_delta(self, layer: int, head: int, how=None):
        """``o − o_cf`` ``(N, T, d)`` of source head ``head`` of ``layer``: what replacing its
        output by the counterfactual of ``how`` (:meth:`hows`) subtracts from the residual;
        its output itself for None (zero)."""
        import torch

        if how is None:
            return self.source_output(layer, head)
        z = self.cap.z[layer][:, :, head, :].float()
        r = self.scale(layer)
        u = z if r is None else z * r.float()
        with torch.no_grad():
            return how[0].delta(u, how[1]) @ self.hm.source_weight(layer, head).float()

    def without_sources(self, layer: int, how=None):
        """The residual entering ``layer`` with every earlier head's direct output replaced as
        ``how`` says (:meth:`source_delta`; biases kept), ``(N, T, d)``; the running sum is kept
        per ``how``, so layers asked in order cost one product each."""
        import torch

        key = None if how is None else (how[0].kind, how[1])
        run = self._removed.get(key)
        if run is None or run[0] > layer:
            run = (0, torch.zeros_like(self.cap.resid[0]).float())
        m, total = run
        with torch.no_grad():
            while m < layer:
                total = total + sum(self.source_delta(m, s, how) for s in range(self.hm.n_heads))
                m += 1
        self._removed[key] = (m, total)
        return self.cap.resid[layer].float() - total

    def fold(self, layer: int):
        """The :class:`.fold.Fold` of receiver layer ``layer`` (kept for the last layer)."""
        from .fold import Fold

        if self._fold is None or self._fold.layer != layer:
            self._fold = Fold(self.hm, layer, self.cap.resid[layer], self.cap.z, self.cap.scale)
        return self._fold

    def influence(self, layer: int, head: int, kind: str, statistic: str | None,
                  ablation: str | None = None):
        """``(layer, H, N)``: ``⟨ḡ, Δ_{n,S}⟩`` per earlier source S (``ḡ``: the statistic's mean
        gradient at the clean residual), None where the se is ``sd/√N``. Under ``mean`` ``Σ_n
        Δ_n = 0``: ``ḡ·Δ_n`` cancels in ``ē`` but inflates ``sd``; the se is ``sd(ψ)/√(N − 1)``
        of ``ψ_n = e_n − ⟨ḡ, Δ_n⟩`` (influence values, Hampel 1974; the jackknife's to first
        order; ``N − 1``: a linear change makes ``ē`` a sample covariance)."""
        from .screen import LINEAR

        cf = self.counterfactual(ablation)
        if cf.kind != "mean" or kind == "v" or statistic not in LINEAR or self.seqs.n < 3:
            return None
        key = (layer, head, kind, statistic)
        if self._influence[0] != key:  # kept for the receiver's next call
            self._influence = (key, self._mean_influence(layer, head, kind, statistic, cf))
        return self._influence[1]

    def _mean_influence(self, layer, head, kind, statistic, cf):
        import torch

        from .screen import gradients, metrics, sequence_dots

        got = metrics(self, layer, head, kind, statistic)
        if got is None:
            return None
        (g,) = gradients(self, layer, got[0][:1])  # per sequence ∇f_n / N_ok: their sum is ḡ
        gbar = g.double().sum(0)[None, None]  # (1, 1, T, d): one gradient for every sequence
        d = sequence_dots(self, gbar, layer, (cf, 0), torch.float64)  # (1, N, layer, H)
        return d[0].transpose(1, 2, 0)

    def _influenced(self, effects: list[Effect], infl, source_sets) -> list[Effect]:
        """``effects`` with the se of ``e_n − Σ_S ⟨ḡ, Δ_{n,S}⟩`` (:meth:`influence`)."""
        if infl is None:
            return effects
        out = []
        for e, src in zip(effects, source_sets, strict=True):
            psi = e.per_sequence - sum((infl[int(m), int(s)] for m, s in src),
                                       np.zeros(infl.shape[-1]))
            n = int(np.isfinite(psi).sum())
            se = finite_mean_se(psi)[1] * np.sqrt(n / (n - 1)) if n > 1 else np.nan
            out.append(Effect(e.effect, se, e.base, e.metric, e.per_sequence))
        return out

    def effect(self, layer: int, head: int, sources, kind: str, statistic: str | None,
               ablation: str | None = None) -> Effect:
        """The effect of replacing ``sources``' ([(layer, head), …]) outputs by the counterfactual
        ``ablation`` (None: the patcher's) in R's ``kind`` input (module docstring);
        ``statistic=None`` measures q/k by :data:`TV`."""
        return self.effects(layer, head, [sources], kind, statistic, ablation)[0]

    def _check(self, layer: int, source_sets, kind: str, statistic) -> None:
        if kind not in KINDS:
            raise InputError(f"kind must be one of q, k, v, got {kind!r}")
        if statistic is not None and statistic not in bh.BEHAVIOURS:
            raise InputError(f"unknown behaviour statistic {statistic!r}")
        for sources in source_sets:
            for m, _ in sources:
                if not 0 <= int(m) < layer:
                    raise InputError(f"source layer {m} is not before the receiver's layer "
                                     f"{layer}")

    def effects(self, layer: int, head: int, source_sets, kind: str, statistic: str | None,
                ablation: str | None = None) -> list[Effect]:
        """:meth:`effect` of each set in ``source_sets`` on one receiver and input."""
        import torch

        self._check(layer, source_sets, kind, statistic)
        c = self.clean(layer, head)
        fold, which = self.fold(layer), KINDS.index(kind)
        per = []
        for how in self.hows(ablation):
            with torch.inference_mode():
                new = [fold.patched(head, [(int(m), int(s)) for m, s in src], which, how)
                       for src in source_sets]
            per.append(self._measure(layer, head, c, new, kind, statistic))
        return self._influenced(average(per), self.influence(layer, head, kind, statistic,
                                                             ablation), source_sets)

    def joint(self, layer: int, head: int, kind: str, statistic: str | None,
              ablation: str | None = None) -> Effect:
        """Every earlier head's direct output replaced at once (the residual recomputed)."""
        per = [self.effects_from_residuals(layer, head, [self.without_sources(layer, how)],
                                           kind, statistic)
               for how in self.hows(ablation)]
        every = [(m, s) for m in range(layer) for s in range(self.hm.n_heads)]
        return self._influenced(average(per), self.influence(layer, head, kind, statistic,
                                                             ablation), [every])[0]

    def effects_from_residuals(self, layer: int, head: int, residuals, kind: str,
                               statistic: str | None) -> list[Effect]:
        """The effect of feeding R's ``kind`` input from each ``(N, T, d)`` residual in
        ``residuals`` (the layer's input with something removed), norm re-applied, others clean."""
        import torch

        self._check(layer, [], kind, statistic)
        c = self.clean(layer, head)
        hm = self.hm
        fn = {"q": hm.query, "k": hm.key, "v": hm.value}[kind]
        with torch.inference_mode():
            new = [fn(layer, head, hm.norm(layer)(x.float())) for x in residuals]
        return self._measure(layer, head, c, new, kind, statistic)

    def _measure(self, layer, head, c, new, kind, statistic) -> list[Effect]:
        import torch

        with torch.inference_mode():
            if kind == "v":
                return [self._output_change(c, c["A"] @ v) for v in new]
            a = torch.stack([self.hm.pattern(layer, n, c["k"], head=head) if kind == "q"
                             else self.hm.pattern(layer, c["q"], n, head=head) for n in new])
        if statistic is None:
            d = 0.5 * (a - c["A"]).abs().sum(-1)[:, :, self._queries].mean(-1).double().numpy()
            return [Effect(*finite_mean_se(x), 0.0, TV, x) for x in d]
        base = self.base_scores(layer, head, statistic)
        d = base[None] - sequence_scores(a.numpy(), self.seqs, statistic)
        b = finite_mean_se(base)[0]
        return [Effect(*finite_mean_se(x), b, statistic, x) for x in d]

    def _output_change(self, c, z_new) -> Effect:
        qi = self._queries
        z = c["z"][:, qi]
        num = (z_new[:, qi] - z).pow(2).sum((-1, -2)).sqrt()
        den = z.pow(2).sum((-1, -2)).sqrt()
        r = (num / den).double().numpy()
        return Effect(*finite_mean_se(r), 0.0, OUTPUT_CHANGE, r)


__all__ = ["KINDS", "OUTPUT_CHANGE", "TV", "Effect", "Patcher", "average", "sequence_scores"]
