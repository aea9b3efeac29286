"""The hooked forward the task graph's forward is tested against (an independent engine on the
transformers forward, used by tests only).

:class:`MLPPaths`: the head search's via-MLP paths by forward hooks. Source ``S`` in layer
``m``, receiver layer ``l > m``: ``S``'s counterfactual change is subtracted from layer ``m``'s
attention contribution, the model runs on with every layer's attention contribution held clean
(a forward hook on :meth:`rmtbase.circuits.core.heads.HeadModel.contribution_module`) and its
MLPs recomputed, and the residual entering ``l`` is read; the via-MLP change is that residual
minus the clean one plus ``S``'s direct change. :func:`hooked_rows`: ``replace -> rows(n, at)``
with the heads' ``z`` set by a pre-hook on each layer's output projection."""

from __future__ import annotations

import numpy as np

from rmtbase.circuits.core.hooks import Stop, forward, hooked
from rmtbase.circuits.core.paths import BATCH_TOKENS, input_gradients
from rmtbase.circuits.core.readout import unembed
from rmtbase.circuits.core.via_mlp import ViaMLP


def _module(hm, layer):
    f = getattr(hm, "contribution_module", None)
    return f(layer) if f is not None else hm.attention(layer)


class MLPPaths(ViaMLP):
    """:class:`rmtbase.circuits.core.via_mlp.ViaMLP` by hooked forward passes of ``hm.net`` (module docstring)."""

    def __init__(self, hm, seqs, cap):
        super().__init__(hm, seqs, cap)
        self.contrib = None   # clean attention contributions per layer (N, T, d)
        self._base_at: dict = {}  # the hooked clean run's residuals, per layer read

    # the hooked forward ----------------------------------------------------------------
    def _run(self, ids, deltas, read, stop, grad=False):
        """{l: residual entering l} for l in ``read``, layer j's attention contribution replaced
        by ``clean[j] + deltas[j]`` (``deltas``: j -> tensor or None; ``self.contrib`` None:
        recorded instead)."""
        import torch

        hm, rec, out = self.hm, self.contrib is None, {}
        got = [None] * hm.n_layers

        def contrib_hook(j):
            def hook(_mod, _args, output):
                first = output[0] if isinstance(output, tuple) else output
                if rec:
                    got[j] = first.detach()
                    return None
                new = self._clean_rows[j]
                d = deltas(j)
                if d is not None:
                    new = new + d
                new = new.to(first.dtype)
                return (new, *output[1:]) if isinstance(output, tuple) else new
            return hook

        def read_hook(j):
            def hook(_mod, args, kwargs):
                x = args[0] if args else kwargs["hidden_states"]
                if j in read:
                    out[j] = x
                if j >= stop:
                    raise Stop
            return hook

        hooks = [(_module(hm, j), contrib_hook(j), "post") for j in range(min(stop, hm.n_layers))]
        hooks += [(hm.layers[j], read_hook(j), "pre_kwargs") for j in sorted(set(read) | {stop})
                  if j < hm.n_layers]
        with hooked(hooks), (torch.enable_grad() if grad else torch.inference_mode()):
            forward(hm.net, ids)
        return (got if rec else out)

    def _ensure_clean(self, stop):
        import torch

        if self.contrib is not None:
            return
        parts = []
        step = max(1, BATCH_TOKENS // self.seqs.length)
        for lo in range(0, self.seqs.n, step):
            parts.append(self._run(self.seqs.ids[lo:lo + step], None, (), self.hm.n_layers))
        self.contrib = [torch.cat([p[j] for p in parts]).float() if parts[0][j] is not None
                        else None for j in range(self.hm.n_layers)]

    # exact ------------------------------------------------------------------------------
    def _changes(self, sources, layers, how=None) -> dict:
        """:meth:`changes` computed (the hooked runs, sources stacked)."""
        import torch

        stop = max(layers)
        self._ensure_clean(stop)
        n, t = self.seqs.n, self.seqs.length
        per = max(1, BATCH_TOKENS // (n * t))  # sources stacked per forward
        base = self._clean_at(layers, stop)
        out = {}
        for lo in range(0, len(sources), per):
            chunk = sources[lo:lo + per]
            with torch.no_grad():
                shares = [self._share(m, s, how) for m, s in chunk]
            m_of = [m for m, _ in chunk]

            def deltas(j, m_of=m_of, shares=shares):
                if j not in m_of:
                    return None
                return torch.cat([-sh if m == j else torch.zeros_like(sh)
                                  for m, sh in zip(m_of, shares, strict=True)])

            got = self._stacked(len(chunk), deltas, layers, stop)
            with torch.no_grad():
                for i, (m, s) in enumerate(chunk):
                    back = self._direct(m, shares[i])
                    out[(m, s)] = {l: got[l][i * n:(i + 1) * n] - base[l] + back
                                   for l in layers if l > m}
        return out

    def _stacked(self, copies, deltas, layers, stop):
        """The hooked run of ``copies`` stacked copies of the sequences."""
        import torch

        ids = np.concatenate([self.seqs.ids] * copies)
        self._clean_rows = [None if c is None else torch.cat([c] * copies) for c in self.contrib]
        got = self._run(ids, deltas if deltas is not None else (lambda j: None),
                        set(layers), stop)
        return {l: got[l].float() for l in layers}

    def _clean_at(self, layers, stop):
        """The hooked run without a change (its residuals at ``layers``), kept per request."""
        key = (tuple(sorted(layers)), stop)
        if key not in self._base_at:
            self._base_at = {key: self._stacked(1, None, layers, stop)}
        return self._base_at[key]

    def kept(self, layer: int, keep, how=None, *, direct: bool = True):
        import torch

        keep = {(int(m), int(s)) for m, s in keep}
        self._ensure_clean(layer)
        with torch.no_grad():
            shares = {}
            for m in range(layer):
                gone = [s for s in range(self.hm.n_heads) if (m, s) not in keep]
                if gone:
                    shares[m] = sum(self._share(m, s, how) for s in gone)
            base = self._clean_at([layer], layer)[layer]
            got = self._stacked(1, lambda j: -shares[j] if j in shares else None,
                                [layer], layer)[layer]
            if direct:
                return got - base
            return got - base + sum(self._direct(m, v) for m, v in shares.items())

    # first order ------------------------------------------------------------------------
    def gradients(self, layer: int, fs):
        import torch

        self._ensure_clean(layer)
        self._clean_rows = [None if c is None else c.clone() for c in self.contrib]
        deltas = [torch.zeros_like(self.contrib[m], requires_grad=True) for m in range(layer)]
        got = self._run(self.seqs.ids, lambda j: deltas[j] if j < layer else None, {layer},
                        layer, grad=True)
        return input_gradients(got[layer], deltas, fs)


def hooked_rows(hm, ids, replace):
    import torch

    def hook(j):
        def run(_mod, args):
            z = args[0]
            zz = z.reshape(*z.shape[:-1], hm.n_heads, hm.head_dim).clone()
            for h, new in replace[j].items():
                zz[..., h, :] = new.to(zz.dtype)
            return (zz.reshape(z.shape), *args[1:])
        return run

    with hooked([(hm.output_projection(j), hook(j), "pre") for j in replace]), \
            torch.inference_mode():
        out = forward(hm.net, ids)
    return lambda n, at: logits_at(hm.net, out, n, at)


def logits_at(net, out, n: int, at):
    """Sequence ``n``'s logits at positions ``at`` of a transformers output ``out``: its own,
    or a base model's :func:`unembed` (one sequence's positions: ``(N, T, V)`` is gigabytes)."""
    logits = getattr(out, "logits", None)
    if logits is not None:
        return logits[n, at].float()
    hidden = getattr(out, "last_hidden_state", None)
    return None if hidden is None else unembed(net, hidden[n, at])
