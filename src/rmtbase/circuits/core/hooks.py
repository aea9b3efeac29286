"""Hooks on a transformers forward pass (:func:`hooked`), the pass (:func:`forward`) and
:class:`Stop`: the one way the circuit code hooks a model."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np


class Stop(Exception):
    """Raised by a hook: ends the forward pass (:func:`forward` returns None)."""


@contextmanager
def hooked(hooks):
    """``hooks`` ``(module, fn, kind "pre" | "pre_kwargs" | "post")``, removed on exit."""
    handles = []
    try:
        for mod, fn, kind in hooks:
            if kind == "post":
                handles.append(mod.register_forward_hook(fn))
            else:
                handles.append(mod.register_forward_pre_hook(fn,
                                                             with_kwargs=kind == "pre_kwargs"))
        yield
    finally:
        for h in handles:
            h.remove()


def forward(net, ids, **kwargs):
    """``net``'s output on ids ``(n, T)``, mask all ones; None where a hook raised Stop."""
    import torch

    x = torch.as_tensor(np.ascontiguousarray(ids))
    try:
        return net(input_ids=x, attention_mask=torch.ones_like(x), **kwargs)
    except Stop:
        return None


__all__ = ["Stop", "forward", "hooked"]
