"""A patched input of one receiver head without re-applying its norm to the whole residual:
the norm's statistics and the head's projection updated by the sources' low-rank terms. Equal
to :meth:`.receiver.Patcher.patched_input` to float32 rounding (tested to 1e-5 per family).

Receiver layer ``l``: residual ``x`` ``(N, T, d)``; input norm ``y = g ⊙ x̃ / s + b`` with
``x̃ = x − mean(x)`` (LayerNorm) or ``x̃ = x``, ``b = 0`` (RMSNorm; Gemma's gain ``1 + weight``),
``s² = mean(x̃²) + ε``; projection ``u = y W + c``. Source ``i`` writes ``o_i = (z_i r_i) O_i``
(``O_i`` ``(d_h, d)``: :meth:`.heads.HeadModel.source_weight`; ``r_i`` ``(N, T, 1)`` the clean
post-norm scale, 1 for pre-norm blocks); ``z_i ← z_i r_i`` below. ``Õ_i = O_i − rowmean(O_i)``
under LayerNorm, ``O_i`` under RMSNorm. With ``x' = x − Σ o_i``:

- ``(g ⊙ x̃') W = (g ⊙ x̃) W − Σ_i z_i (Õ_i diag(g) W)``: a ``(d_h × d_h)`` matrix per source;
- ``d (s'² − ε) = |x̃|² − 2 Σ_i z_i · (x̃ Õ_iᵀ) + Σ_ij z_i (Õ_i Õ_jᵀ) z_jᵀ``;
- ``u' = (g ⊙ x̃') W / s' + b W + c``, then :meth:`.heads.HeadModel.finish`.

The one product over ``d`` per source, ``x̃ Õ_iᵀ`` ``(N, T, d_h)``, is kept for the layer's
receivers and paths. OLMo-2/3 fold in projection space (:class:`_Whole`). Where no fold applies
(an unknown norm, or arithmetic not matching the module on the clean residual) the norm is
re-applied to the patched residual (``exact`` True)."""

from __future__ import annotations

#: Bytes of counterfactual changes ``Δ`` a fold keeps for its layer's receivers and kinds.
DELTA_CACHE_BYTES = 256 * 2**20


class Fold:
    """The fold for receiver ``layer`` of ``hm`` on ``resid`` ``(N, T, d)``, the captured
    per-head outputs ``z`` (per layer ``(N, T, H, d_h)``) and post-norm ``scales`` (per layer
    ``(N, T, 1)`` or None)."""

    def __init__(self, hm, layer: int, resid, z, scales=None):
        self.hm, self.layer, self.z = hm, int(layer), z
        self.scales = scales
        self._p: dict = {}
        self._num: dict = {}
        self._o: dict = {}
        self._dz: dict = {}
        self._dz_bytes = 0
        self.resid = resid
        self._whole = None
        if _Whole.applies(hm, self.layer):
            self._whole = _Whole(self)
            self.exact = not self._whole.matches_module()
            return
        spec = hm.norm_spec(self.layer) if hm.fold_applies(self.layer) else None
        self.exact = spec is None
        if not self.exact:
            kind, g, b, eps = spec
            self.ln, self.eps = kind == "ln", eps
            self.g = None if g is None else g.float()
            self.bias = None if b is None else b.float()
            x = resid.float()
            self.xc = x - x.mean(-1, keepdim=True) if self.ln else x
            self.xx = self.xc.double().pow(2).sum(-1)
            self.exact = not self._matches_module(x)

    def _matches_module(self, x) -> bool:
        """The norm module on a few positions equals the fold's arithmetic."""
        import torch

        with torch.inference_mode():
            part = x[:1, : min(8, x.shape[1])]
            want = self.hm.norm(self.layer)(part).float()
            xc = self.xc[:1, : part.shape[1]]
            y = xc * torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + self.eps)
            y = y if self.g is None else y * self.g
            y = y if self.bias is None else y + self.bias
            return bool(torch.allclose(y, want, rtol=1e-4, atol=1e-5 * (1 + float(
                want.abs().max()))))

    def _z(self, m: int, s: int, how=None):
        """``Δ`` of source (m, s) (:meth:`.counterfactual.Counterfactual.delta` of ``u = z r``
        for ``how`` = (counterfactual, pairing)); ``u`` itself (zero ablation) for None."""
        zi = self.z[m][:, :, s, :].float()
        r = None if self.scales is None else self.scales[m]
        if r is None and self.hm.post_norm(m) is not None:
            from ...errors import InputError

            raise InputError(f"{self.hm.family}: the fold needs the sources' clean "
                             f"post-norm scales (scales)")
        u = zi if r is None else zi * r
        if how is None:
            return u
        key = (m, s, how[0].kind, how[1] if how[0].kind == "resample" else 0)
        got = self._dz.get(key)
        if got is None:
            got = how[0].delta(u, how[1])
            if self._dz_bytes + got.numel() * 4 <= DELTA_CACHE_BYTES:  # kept for the layer
                self._dz[key] = got
                self._dz_bytes += got.numel() * 4
        return got

    def _centred(self, m: int, s: int):
        if (m, s) not in self._o:
            o = self.hm.source_weight(m, s).float()
            self._o[(m, s)] = o - o.mean(-1, keepdim=True) if self.ln else o
        return self._o[(m, s)]

    def _dot(self, m: int, s: int):
        """``x̃ Õᵀ`` ``(N, T, d_h)`` of source (m, s), kept."""
        if (m, s) not in self._p:
            self._p[(m, s)] = self.xc @ self._centred(m, s).T
        return self._p[(m, s)]

    def _gw(self, w):
        w = w.float()
        return w if self.g is None else self.g[:, None] * w

    def _clean_numerator(self, which: int, index: int):
        key = (which, index)
        if key not in self._num:
            w, _ = self.hm.head_weight(self.layer, which, index)
            self._num[key] = self.xc @ self._gw(w)
        return self._num[key]

    def _exact(self, head: int, sources, which: int, how=None):
        hm = self.hm
        x = self.resid.float()
        if sources:
            x = x.clone()
            for m, s in sources:
                x -= self._z(m, s, how) @ hm.source_weight(m, s).float()
        xn = hm.norm(self.layer)(x)
        return (hm.query, hm.key, hm.value)[which](self.layer, head, xn)

    @property
    def linearisable(self) -> bool:
        """Whether :meth:`first_order` applies (the low-rank fold, not the exact recompute
        nor the projection-space fold)."""
        return not self.exact and self._whole is None

    def clean_projection(self, head: int, which: int):
        """``u`` ``(N, T, d_h)``: the receiver head's clean q, k or v projection before
        :meth:`.heads.HeadModel.finish` (module docstring), a new tensor."""
        import torch

        hm = self.hm
        index = hm.index(which, head)
        w, c = hm.head_weight(self.layer, which, index)
        s2 = self.xx / hm.d + self.eps
        with torch.no_grad():
            u = self._clean_numerator(which, index) / s2.sqrt().float()[..., None]
            if self.bias is not None:
                u = u + self.bias @ w.float()
            if c is not None:
                u = u + c
        return u.clone()

    def first_order(self, head: int, which: int, grad_u, sources, how=None):
        """``(len(sources), ..., N)``: per source and sequence ``⟨∂f/∂x, o_i⟩`` for a function
        ``f`` of the projection ``u``, from ``grad_u = ∂f/∂u`` ``(..., N, T, d_h)``. With ``x' = x −
        α o_i``, ``∂u/∂α = −z_i (Õ_i diag(g) W)/s + num (z_i · x̃Õ_iᵀ)/(d s³)`` and ``⟨∂f/∂x, o_i⟩
        = −∂f/∂α``, ``o_i`` the change ``Δ`` of ``how`` (:meth:`_z`). :attr:`linearisable` folds
        only."""
        import torch

        with torch.no_grad():
            g = grad_u.float()
            return torch.stack([(g * du).sum((-1, -2))
                                for du in self.first_order_changes(head, which, sources, how)])

    def first_order_changes(self, head: int, which: int, sources, how=None):
        """Per source (a generator), the first-order change ``δu`` ``(N, T, d_h)`` of the projection
        when its output is added: ``z_i (Õ_i diag(g) W)/s − num (z_i · x̃Õ_iᵀ)/(d s³)``
        (``z_i`` the change ``Δ`` of ``how``, :meth:`_z`). :attr:`linearisable` folds only."""
        import torch

        if not self.linearisable:
            raise ValueError("first_order_changes needs the low-rank fold")
        hm = self.hm
        index = hm.index(which, head)
        w, _ = hm.head_weight(self.layer, which, index)
        gw = self._gw(w)
        s = (self.xx / hm.d + self.eps).sqrt().float()[..., None]
        num = self._clean_numerator(which, index) / (hm.d * s ** 3)
        with torch.no_grad():
            for m, src in sources:
                zi = self._z(m, src, how)
                yield zi @ (self._centred(m, src) @ gw) / s \
                    - num * (zi * self._dot(m, src)).sum(-1, keepdim=True)

    def patched(self, head: int, sources, which: int, how=None):
        """The receiver head's q (``which=0``), k (1) or v (2) with the sources' direct
        outputs removed from its input (module docstring), ``(N, T, d_h)``; ``how`` =
        (:class:`.counterfactual.Counterfactual`, pairing) replaces them by that counterfactual
        (``z_i`` → ``Δ_i`` below), None removes them (zero)."""
        if self.exact:
            return self._exact(head, sources, which, how)
        if self._whole is not None:
            return self._whole.patched(head, sources, which, how)
        hm = self.hm
        index = hm.index(which, head)
        w, c = hm.head_weight(self.layer, which, index)
        gw = self._gw(w)
        num = self._clean_numerator(which, index).clone()
        zs = [(self._z(m, s, how), self._centred(m, s)) for m, s in sources]
        dot = self.xx.clone()
        for (m, s), (zi, oi) in zip(sources, zs, strict=True):
            num -= zi @ (oi @ gw)
            dot -= 2.0 * (zi * self._dot(m, s)).sum(-1).double()
            for zj, oj in zs:
                dot += ((zi @ (oi @ oj.T)) * zj).sum(-1).double()
        s2 = dot / hm.d + self.eps
        u = num / s2.sqrt().float()[..., None]
        if self.bias is not None:
            u = u + self.bias @ w.float()
        if c is not None:
            u = u + c
        return hm.finish(self.layer, which, u, index)


class _Whole:
    """The fold in projection space (OLMo-2/3: no input norm, an RMSNorm over the whole q or k
    projection): ``u = x W + c`` over its ``P`` columns, source ``i`` writes ``z_i B_i``
    (``B_i = O_i W``), and ``P (s'² − ε) = |u'|²`` updates as in the module docstring with ``u``,
    ``B_i`` for ``x̃``, ``Õ_i``; then the head's columns of ``g ⊙ u' / s'`` and rotary. v is
    linear: ``v' = v − Σ z_i O_i W_v[h]``."""

    @staticmethod
    def applies(hm, layer: int) -> bool:
        from .norms import norm_spec

        if hm.spec["qk"] != "whole" or (hm.norm_spec(layer) or ("",))[0] != "none":
            return False
        a = hm.attention(layer)
        return all((norm_spec(getattr(a, n)) or ("",))[0] == "rms"
                   for n in hm.spec["qk_names"]) and hm._clip is None

    def __init__(self, fold):
        from .norms import norm_spec

        self.fold, hm = fold, fold.hm
        a = hm.attention(fold.layer)
        x = fold.resid.float()
        self.w, self.u, self.uu, self.g, self.eps = {}, {}, {}, {}, {}
        for which in (0, 1):
            proj = getattr(a, hm.spec["qkv_names"][which])
            _, g, _, eps = norm_spec(getattr(a, hm.spec["qk_names"][which]))
            self.w[which] = proj.weight.T.float()
            self.u[which] = proj(x).float()
            self.uu[which] = self.u[which].double().pow(2).sum(-1)
            self.g[which], self.eps[which] = g.float(), eps
        self._b: dict = {}
        self._ub: dict = {}
        self._v: dict = {}

    def matches_module(self) -> bool:
        """Head 0's clean query and key equal :meth:`.heads.HeadModel.query`/``key``."""
        import torch

        hm, layer, x = self.fold.hm, self.fold.layer, self.fold.resid.float()
        with torch.inference_mode():
            for which, fn in ((0, hm.query), (1, hm.key)):
                want = fn(layer, 0, x)
                got = self.patched(0, [], which)
                if not torch.allclose(got, want, rtol=1e-4,
                                      atol=1e-5 * (1 + float(want.abs().max()))):
                    return False
        return True

    def _bw(self, which: int, m: int, s: int):
        """``B_i = O_i W`` ``(d_h, P)`` of source (m, s) in projection ``which``, kept."""
        if (which, m, s) not in self._b:
            self._b[(which, m, s)] = self.fold.hm.source_weight(m, s).float() @ self.w[which]
        return self._b[(which, m, s)]

    def _ub_of(self, which: int, m: int, s: int):
        """``u B_iᵀ`` ``(N, T, d_h)``, kept."""
        if (which, m, s) not in self._ub:
            self._ub[(which, m, s)] = self.u[which] @ self._bw(which, m, s).T
        return self._ub[(which, m, s)]

    def patched(self, head: int, sources, which: int, how=None):
        hm, fold = self.fold.hm, self.fold
        index, dh = hm.index(which, head), hm.head_dim
        sl = slice(index * dh, (index + 1) * dh)
        zs = [fold._z(m, s, how) for m, s in sources]
        if which == 2:
            if index not in self._v:
                self._v[index] = hm._proj(fold.layer, 2, index, fold.resid.float())
            v = self._v[index]
            w, _ = hm.head_weight(fold.layer, 2, index)
            for (m, s), zi in zip(sources, zs, strict=True):
                v = v - zi @ (hm.source_weight(m, s).float() @ w.float())
            return v
        num = self.u[which][..., sl]
        dot = self.uu[which].clone()
        bs = [self._bw(which, m, s) for m, s in sources]
        for (m, s), zi, bi in zip(sources, zs, bs, strict=True):
            num = num - zi @ bi[:, sl]
            dot -= 2.0 * (zi * self._ub_of(which, m, s)).sum(-1).double()
            for zj, bj in zip(zs, bs, strict=True):
                dot += ((zi @ (bi @ bj.T)) * zj).sum(-1).double()
        p = self.u[which].shape[-1]
        s2 = dot / p + self.eps[which]
        u = self.g[which][sl] * (num / s2.sqrt().float()[..., None])
        return hm._rope(fold.layer, u)


__all__ = ["DELTA_CACHE_BYTES", "Fold"]
