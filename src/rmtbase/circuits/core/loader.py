"""The model a circuit search runs: the head search's base model by the probe's loader
(:func:`load_model`; a folder without a tokenizer loads), the task search's causal LM with its
unembedding (:func:`load_causal_lm`); float32, eager attention, CPU."""

from __future__ import annotations

from pathlib import Path

from ...errors import InputError, ModelError


def load_model(model, *, tokenizer: bool = False):
    """(net, tokenizer or None, name) of a transformers ``PreTrainedModel`` (switched to eager
    attention; no tokenizer), a ``Loaded``, a folder, a ``.gguf`` file or a hub id; the tokenizer
    is read only when ``tokenizer``. A TransformerLens ``TransformerBridge`` runs as the model it
    wraps (:func:`bridge_net`). One-line :class:`~rmtbase.errors.ModelError` when it cannot load."""
    from ...models.transformer_lens import is_transformer_lens
    from ...probe.loader import load

    if is_transformer_lens(model):
        model = bridge_net(model)
    got = load(model, tokenizer="optional" if tokenizer else "no")
    return got.net, got.tokenizer, got.name


def bridge_net(bridge):
    """The transformers model an unprocessed TransformerLens 4.x ``TransformerBridge`` wraps,
    rebuilt plain (its class and config, the ``_original_component`` weights): path patching hooks
    a transformers forward. A processed bridge or a 3.x ``HookedTransformer`` is refused in one
    line, as is a rebuild whose logits on 2 × 8 tokens differ from the bridge's by over 1e-4 of
    their scale."""
    import torch

    from ...models.transformer_lens import weights_processing

    name = type(bridge).__name__
    hf = getattr(bridge, "original_model", None)
    if hf is None or not hasattr(hf, "config"):
        raise ModelError(f"path patching runs a transformers model; a TransformerLens {name} "
                         f"holds none: pass the Hugging Face model it was made from")
    if weights_processing(bridge) != "unprocessed":
        raise ModelError(f"path patching runs the transformers model a {name} wraps, and "
                         f"this one's weights were processed: boot an unprocessed bridge or "
                         f"pass the Hugging Face model (docs/adapters.md)")
    net = type(hf)(hf.config)
    state = {k.replace("._original_component", ""): v for k, v in hf.state_dict().items()}
    missing = net.load_state_dict(state, strict=False).missing_keys
    if missing:
        raise ModelError(f"cannot rebuild the transformers model of this {name}: "
                         f"{len(missing)} weights not found (e.g. {missing[0]})")
    net.eval()
    x = torch.randint(0, int(hf.config.vocab_size), (2, 8),
                      generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = bridge(x)
        want = getattr(want, "logits", want).float()
        got = net(x).logits.float()
    if not torch.allclose(got, want, rtol=0, atol=1e-4 * float(want.abs().max()) + 1e-6):
        raise ModelError(f"the transformers model rebuilt from this {name} computes other "
                         f"logits than the bridge: pass the Hugging Face model it wraps")
    return net


def load_causal_lm(model, *, tokenizer: bool, before=None):
    """(net, tokenizer or None, name): a transformers causal LM (eager attention, float32,
    its unembedding kept) from a folder, a hub id, a ``.gguf`` file (:func:`_gguf_causal_lm`)
    or a loaded ``PreTrainedModel``; the tokenizer is read only when ``tokenizer``.
    ``before(config, tokenizer)``: called once, before the weights are read where they are
    read here (a folder, a hub id)."""
    before = before or (lambda config, tok: None)
    if hasattr(model, "config") and hasattr(model, "forward"):
        before(model.config, None)
        return model.eval(), None, str(model.config.model_type)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..._library_bars import no_library_bars
    from ...probe.loader import has_tokenizer_files, locate, one_line

    src, kw, name = locate(model, need_tokenizer=False)
    if "gguf_file" in kw:
        net, tok, name = _gguf_causal_lm(model, tokenizer=tokenizer)
        before(net.config, tok)
        return net, tok, name
    from transformers import AutoConfig

    from .families import check_family

    try:
        config = AutoConfig.from_pretrained(src, **kw)
    except Exception as exc:
        raise ModelError(f"cannot read the config of {name}: {one_line(exc)}") from exc
    check_family(config)  # before the weights are read
    tok = None
    if tokenizer:
        if Path(src).is_dir() and not has_tokenizer_files(Path(src)):
            raise InputError(f"the task gives text and {name} has no tokenizer (tokenizer.json, "
                             f"tokenizer.model or vocab.json + merges.txt); give token ids")
        try:
            tok = AutoTokenizer.from_pretrained(src, **kw)
        except Exception as exc:  # transformers raises many kinds
            raise ModelError(f"cannot load the tokenizer of {name}: {one_line(exc)}") from exc
    before(config, tok)
    try:
        with no_library_bars():  # transformers' "Loading weights" bar
            net = AutoModelForCausalLM.from_pretrained(src, attn_implementation="eager",
                                                       dtype=torch.float32, **kw)
    except Exception as exc:
        raise ModelError(f"cannot load {name} as a causal LM: {one_line(exc)}") from exc
    return net.eval(), tok, name


def _gguf_causal_lm(path, *, tokenizer: bool):
    """A GGUF file's causal LM: the probe's reader (de-quantised to float32, its tokenizer from
    the file) with the unembedding tied to the embeddings, as the file's config says; a GGUF of
    untied embeddings is refused (the reader does not keep its output matrix)."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.initialization import no_init_weights

    from ...probe.loader import load as probe_load

    got = probe_load(path, tokenizer="required" if tokenizer else "no")
    base = got.net
    if not getattr(base.config, "tie_word_embeddings", False):
        raise InputError(f"{got.name}: task circuits read GGUF files whose unembedding is "
                         f"the embedding matrix (tie_word_embeddings); give this model's folder")
    with no_init_weights(), torch.device("meta"):  # the shell only: its weights are base's
        net = AutoModelForCausalLM.from_config(base.config, attn_implementation="eager",
                                               dtype=base.dtype)
    setattr(net, net.base_model_prefix, base)
    net.get_output_embeddings().weight = base.get_input_embeddings().weight
    left = [n for n, t in [*net.named_parameters(), *net.named_buffers()] if t.is_meta]
    if left:
        raise ModelError(f"{got.name}: the causal LM around the GGUF's model lacks {left[0]}")
    return net.eval(), got.tokenizer, got.name


__all__ = ["bridge_net", "load_causal_lm", "load_model"]
