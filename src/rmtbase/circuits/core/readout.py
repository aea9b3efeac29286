"""A model's logits at chosen positions with some heads' outputs given: ``replace`` {layer:
{head: z (N, T, d_h)}} -> ``rows(n, at)``, sequence ``n``'s logits at positions ``at`` (None:
none), those ``z`` set where the layer's output projection reads them (a later head reads the
set value). On the graph forward (:class:`.forward.TaskModel`, :class:`.stages.Frozen`) for the
task graph's families, else by a pre-hook on the projection. Logits: the model's own, or for a
base model the final hidden state times its output head (the input embedding where tied, else
the head's weight from the safetensors or GGUF file, without a final soft-cap)."""

from __future__ import annotations

from .hooks import forward, hooked


def head_forward(tm, hm, ids):
    """``replace -> rows`` on token ids ``ids`` ``(N, T)`` (module docstring): on ``tm``, the
    graph forward (:class:`.forward.TaskModel`), or where None on ``hm``'s model, hooked."""
    from functools import partial

    if tm is None:
        return partial(_hooked_rows, hm, ids)
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


def _hooked_rows(hm, ids, replace):
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


__all__ = ["HEAD_NAMES", "OUTPUT_HEAD", "attach_output_head", "head_forward", "logits_at",
           "unembed"]
