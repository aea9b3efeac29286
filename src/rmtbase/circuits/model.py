"""The model a circuit search runs, by the probe's one loader (:func:`rmtbase.probe.loader.load`:
float32, eager attention so that ``output_attentions`` returns the softmax weights, CPU): a
loaded transformers model, a :class:`~rmtbase.probe.loader.Loaded` (the CLI's, loaded once for
the text probe and the patching), or a folder / ``.gguf`` file / hub id. A folder without a
tokenizer loads (the circuit search uses repeated random tokens, :mod:`.sequences`); the
probe proper needs one."""

from __future__ import annotations


def load_model(model, *, tokenizer: bool = False):
    """(net, tokenizer or None, name). ``model``: a transformers ``PreTrainedModel`` (used as
    given, switched to eager attention, its tokenizer None), a ``Loaded`` (its net and
    tokenizer), a folder (config.json, weights, tokenizer optional), a ``.gguf`` file or a hub
    id; the tokenizer is read only when ``tokenizer`` (reading a GGUF's costs seconds).
    One-line :class:`~rmtbase.errors.ModelError` when it cannot be loaded, and for a
    TransformerLens model (path patching runs a transformers forward with pre-hooks; a bridge's
    forward takes other arguments and its wrapped modules return no attention weights): the
    Hugging Face model the bridge was booted from serves, with the bridge's composition
    (docs/adapters.md)."""
    from ..errors import ModelError
    from ..models.transformer_lens import is_transformer_lens
    from ..probe.loader import load

    if is_transformer_lens(model):
        raise ModelError(f"path patching runs a transformers model, not a TransformerLens "
                         f"{type(model).__name__}: pass the Hugging Face model it was booted "
                         f"from (with the bridge's composition; docs/adapters.md)")

    got = load(model, tokenizer="optional" if tokenizer else "no")
    return got.net, got.tokenizer, got.name


__all__ = ["load_model"]
