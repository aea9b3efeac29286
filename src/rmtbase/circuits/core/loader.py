"""The model a circuit search runs, by the probe's loader (:func:`rmtbase.probe.loader.load`:
float32, eager attention, CPU); a folder without a tokenizer loads (the search uses repeated
random tokens)."""

from __future__ import annotations


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

    from ...errors import ModelError
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


__all__ = ["bridge_net", "load_model"]
