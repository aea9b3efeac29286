"""Logits at chosen positions with some heads' outputs given, on the graph forward
(:class:`.forward.TaskModel`, :class:`.stages.Frozen`): ``replace`` {layer: {head: z (N, T,
d_h)}} -> ``rows(n, at)``, sequence ``n``'s logits at positions ``at`` (None: none), those ``z``
set where the layer's output projection reads them. A base model's logits: its final hidden
state times its output head (the tied embedding, else the head's weight from its file)."""

from __future__ import annotations


def head_forward(tm, ids):
    """``replace -> rows`` on token ids ``ids`` ``(N, T)`` (module docstring) on ``tm``'s graph
    forward (:class:`.forward.TaskModel`)."""
    from functools import partial

    return partial(_graph_rows, tm, tm.embed(ids))


def _graph_rows(tm, emb, replace):
    import torch

    from .stages import Frozen, Pass

    if tm.final is None:  # no final norm found: no logits, nothing to run
        return lambda n, at: None
    stop = next(i for i, st in enumerate(tm.graph.stages) if st.kind == "logits")
    run = Pass(tm, emb, None, None, None, False, Frozen(heads=replace, sum_only=True))
    with torch.inference_mode():
        run.through(run.start(None), stop, keep=False)
    x = run.resid

    def rows(n: int, at):
        with torch.inference_mode():
            if tm.head is not None:
                return tm.unembed(x[n, at]).float()
            return unembed(tm.net, tm.final(x[n, at]))
    return rows


def unembed(net, hidden):
    """A base model's logits of its final hidden states ``hidden`` ``(P, d)``: times its
    output head (:data:`OUTPUT_HEAD`) or the input embedding where the head is tied to it
    (``tie_word_embeddings``); None for an untied head that was not loaded."""
    head = getattr(net, OUTPUT_HEAD, None)
    if head is None:
        if not _tied(net):
            return None
        head = net.get_input_embeddings().weight
    return hidden.float() @ head.float().T


def _tied(net) -> bool:
    """Whether ``net``'s (text) config ties its output head to the input embedding."""
    cfg = getattr(net, "config", None)
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return bool(getattr(text, "tie_word_embeddings", False))


#: Attribute of a base model holding its untied output head's weight ``(V, d)``, read from
#: its files (:func:`attach_output_head`; the GGUF reader sets it too).
OUTPUT_HEAD = "rmtbase_output_head"
#: Names of an untied output head's weight in a folder's safetensors.
HEAD_NAMES = ("lm_head.weight", "embed_out.weight")


def attach_output_head(net, model) -> None:
    """Give a base model loaded from the folder ``model`` its untied output head's weight
    (:data:`HEAD_NAMES` in its safetensors files) as :data:`OUTPUT_HEAD`; nothing where the
    model has logits, a tied head, the attribute already, or no such tensor."""
    from pathlib import Path

    if hasattr(net, "lm_head") or getattr(net, OUTPUT_HEAD, None) is not None:
        return
    if _tied(net) or not isinstance(model, (str, Path)):
        return
    folder = Path(model).expanduser()
    if not folder.is_dir():
        return
    from safetensors import safe_open

    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), framework="pt") as st:
            for name in HEAD_NAMES:
                if name in st.keys():
                    setattr(net, OUTPUT_HEAD, st.get_tensor(name).float())
                    return


__all__ = ["HEAD_NAMES", "OUTPUT_HEAD", "attach_output_head", "head_forward", "unembed"]
