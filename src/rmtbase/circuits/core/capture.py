"""One forward pass per batch of sequences capturing what path patching needs: each layer's
residual input and per-head attention output ``z`` (the output projection's input), by
pre-hooks on every decoder block and output projection (removed after the pass), and every
head's probe sums (:mod:`rmtbase.probe.behaviour`) from the eager attention weights.

A Ctrl-C is raised between batches, never inside torch. The capture holds ``2 · L · N · T · d``
float32 (:func:`capture_bytes`); :func:`capture` refuses, before the forward, what does not
fit the memory available."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ..._version import __version__
from ...errors import InputError, ModelError
from ...files.interrupts import deferred, fault_point
from ...probe import behaviour as bh
from .heads import HeadModel
from .hooks import forward, hooked
from .prompts import Sequences

#: Sequences per forward pass (the attention weights of one batch are reduced, then freed).
BATCH = 8


@dataclass
class Captured:
    """Float32 tensors per layer ``l``: ``resid[l]`` ``(N, T, d)`` the residual entering it,
    ``z[l]`` ``(N, T, H, d_h)`` its per-head attention outputs, ``scale[l]`` its clean post-norm
    scale ``(N, T, 1)`` (:meth:`.heads.HeadModel.source_scale`; None for pre-norm blocks)."""

    resid: list
    z: list
    scale: list | None = None


def capture_bytes(hm: HeadModel, n: int, t: int) -> int:
    """Bytes the capture of ``n`` sequences of ``t`` tokens holds (module docstring)."""
    return 4 * hm.n_layers * int(n) * int(t) * (hm.d + hm.n_heads * hm.head_dim)


def _check_memory(hm: HeadModel, seqs: Sequences) -> None:
    from ...files.memory import available_memory, fmt_bytes

    need = capture_bytes(hm, seqs.n, seqs.length)
    avail, source = available_memory("cpu")
    if avail is not None and need > avail // 2:
        raise InputError(f"capturing {seqs.n} sequences of {seqs.length} tokens needs "
                         f"{fmt_bytes(need)}, more than half the {fmt_bytes(avail)} available "
                         f"({source}); use fewer sequences")


def _hooks(hm: HeadModel, store: dict):
    def layer_hook(li):
        def hook(_mod, args, kwargs):
            store["resid"][li].append((args[0] if args else kwargs["hidden_states"]).detach())
        return hook

    def z_hook(li):
        def hook(_mod, args):
            z = args[0].detach()
            store["z"][li].append(z.reshape(*z.shape[:-1], hm.n_heads, hm.head_dim))
        return hook

    def scale_hook(li):
        def hook(_mod, args):
            store["scale"][li].append(hm.source_scale(li, args[0].detach()))
        return hook

    hooks = []
    for li in range(hm.n_layers):
        post = hm.post_norm(li)
        if post is not None:
            hooks.append((post, scale_hook(li), "pre"))
        hooks.append((hm.layers[li], layer_hook(li), "pre_kwargs"))
        hooks.append((hm.output_projection(li), z_hook(li), "pre"))
    return hooks


def _probe_batch(att, ids, content, totals):
    for li, a in enumerate(att):
        if not bool(a.isfinite().all()):
            raise ModelError(f"attention weights of layer {li} are not finite")
        for b in range(a.shape[0]):
            part = bh.window_sums(a[b].float().numpy(), content, causal=True, ids=ids[b])
            totals[li] = bh.add_sums(totals[li], part)


def capture(hm: HeadModel, seqs: Sequences, *, progress: bool = True):
    """(:class:`Captured`, per layer a dict of :func:`rmtbase.probe.behaviour.add_sums` totals)
    of ``seqs`` through ``hm.net``, in batches of :data:`BATCH`."""
    import torch

    from ...progress import progress_bar

    _check_memory(hm, seqs)
    store = {k: [[] for _ in range(hm.n_layers)] for k in ("resid", "z", "scale")}
    totals: list = [None] * hm.n_layers
    with hooked(_hooks(hm, store)), torch.inference_mode(), \
            progress_bar(seqs.n, desc="rmtbase circuits: forward", unit="sequence",
                         enabled=progress) as bar:
        for lo in range(0, seqs.n, BATCH):
            fault_point("circuits:capture")
            with deferred():  # Ctrl-C between batches, never inside torch
                ids = seqs.ids[lo:lo + BATCH]
                out = forward(hm.net, ids, output_attentions=True)
                att = getattr(out, "attentions", None)
                if not att or att[0] is None:
                    raise ModelError("the model returned no attention weights (eager "
                                     "attention needed)")
                _probe_batch(att, ids, seqs.content, totals)
                del out, att
            bar.update(len(ids))
    cap = Captured([torch.cat(r).float() for r in store["resid"]],
                   [torch.cat(z).float() for z in store["z"]],
                   [torch.cat(s) if s else None for s in store["scale"]])
    return cap, totals


def probe_dataset(totals, seqs: Sequences, name: str) -> xr.Dataset:
    """The probe Dataset (as :func:`rmtbase.probe.probe_model` writes it) of :func:`capture`'s
    totals, with ``probe_source`` and the sequences' description in its attrs."""
    means = [bh.finish(t) for t in totals]
    n_l, n_h = len(means), means[0]["entropy"].size
    ds = xr.Dataset(coords={"layer": np.arange(n_l), "head": np.arange(n_h)})
    for k in bh.BEHAVIOURS:
        units, meaning = bh.DESCRIPTIONS[k]
        ds[k] = (("layer", "head"), np.stack([m[k] for m in means]),
                 {"units": units, "long_name": meaning})
    ds.attrs.update(
        Conventions="CF-1.8", title="rmtbase probe: attention behaviour per head",
        model=name, probe_source=seqs.source, sequences=seqs.description,
        n_tokens=int(seqs.n * seqs.content.sum()), n_windows=seqs.n, window=seqs.length,
        attention="causal",
        queries="text-token positions i >= 1; keys: all positions, special tokens included",
        source=f"rmtbase {__version__}", rmtbase_version=__version__,
        created=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    return ds


__all__ = ["BATCH", "Captured", "capture", "capture_bytes", "probe_dataset"]
