"""Tiny random transformers models, one per adapter, shared by tests/test_models_*.py.

No network. The tests in this file only check the zoo itself (deterministic, sized as stated).

Each spec builds a small model from a ``transformers`` config with every parameter redrawn
(biases and LayerNorm weights included, so bias handling is exercised), and knows how to reach
the model's own projection modules and attention modules for an independent check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import transformers as T


def _split(y, n, d_h):  # (T, n*d_h) -> (T, n, d_h), as every forward pass here views it
    return y.reshape(y.shape[0], n, d_h)


def _lin(mod, x):  # nn.Linear without its bias
    return x @ mod.weight.T


def _proj_gpt2(m, i, x):
    attn = m.transformer.h[i].attn
    d, n = m.config.n_embd, m.config.n_head
    y = x @ attn.c_attn.weight  # Conv1D: y = x W + b; split into q, k, v along the last axis
    q, k, _ = y.split(d, dim=-1)
    return _split(q, n, d // n), _split(k, n, d // n)


def _proj_neox(m, i, x):
    attn = m.gpt_neox.layers[i].attention
    n, d_h = m.config.num_attention_heads, m.config.hidden_size // m.config.num_attention_heads
    y = _lin(attn.query_key_value, x).view(x.shape[0], n, 3 * d_h)  # as GPTNeoXAttention.forward
    q, k, _ = y.chunk(3, dim=-1)
    return q, k


def _proj_llama(m, i, x):
    attn = m.model.layers[i].self_attn
    c = m.config
    d_h = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return (_split(_lin(attn.q_proj, x), c.num_attention_heads, d_h),
            _split(_lin(attn.k_proj, x), c.num_key_value_heads, d_h))


def _proj_pair(get):
    def proj(m, i, x):
        q_mod, k_mod = get(m, i)
        c = m.config
        n = c.num_attention_heads
        d_h = c.hidden_size // n
        return _split(_lin(q_mod, x), n, d_h), _split(_lin(k_mod, x), n, d_h)
    return proj


@dataclass
class Spec:
    name: str
    make: Callable[[], T.PreTrainedModel]
    proj: Callable  # (model, layer, x (T, d)) -> q (T, n_heads, d_h), k (T, n_kv, d_h), no bias
    attn: Callable  # (model, layer) -> attention module (its input is the x of the logits)
    rotary: bool
    causal: bool
    d_h: int
    n_kv: int
    model_type: str = ""  # the HF model_type when the spec is a variant (default: name)
    # the model's own q/k norm: (model, layer, q (T, n, d_h), k (T, n_kv, d_h)) -> normed q, k
    norm: Callable | None = None
    # logit scale/cap applied to q·k: (model, s) -> logits (default s / √d_h)
    logits: Callable | None = None
    # additive logit bias seen by the attention module: (args, kwargs, d_h) -> (n, T|1, T)
    bias: Callable | None = None
    # forward inputs (model -> kwargs); default input_ids of 7 tokens
    inputs: Callable | None = None
    # RoPE made the identity by hooking the rotary modules (cos = 1, sin = 0) rather than by
    # zero position_ids (Gemma-3 multimodal builds its causal mask from position_ids)
    rope_hook: bool = False

    @property
    def arch(self) -> str:
        return self.model_type or self.name


_COMMON = dict(vocab_size=50, bos_token_id=0, eos_token_id=0, pad_token_id=0)


def _cfg(cls, **kw):
    cfg = cls(**kw, **_COMMON)
    cfg._attn_implementation = "eager"
    return cfg


SPECS = {
    "gpt2": Spec(
        "gpt2",
        lambda: T.GPT2LMHeadModel(_cfg(T.GPT2Config, n_embd=64, n_layer=2, n_head=4,
                                       n_positions=32)),
        _proj_gpt2, lambda m, i: m.transformer.h[i].attn, False, True, 16, 4),
    "gpt_neox": Spec(
        "gpt_neox",
        lambda: T.GPTNeoXForCausalLM(_cfg(T.GPTNeoXConfig, hidden_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=128,
                                          rotary_pct=0.25, max_position_embeddings=32)),
        _proj_neox, lambda m, i: m.gpt_neox.layers[i].attention, True, True, 16, 4),
    "llama": Spec(
        "llama",
        lambda: T.LlamaForCausalLM(_cfg(T.LlamaConfig, hidden_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2,
                                        head_dim=24, intermediate_size=128)),
        _proj_llama, lambda m, i: m.model.layers[i].self_attn, True, True, 24, 2),
    "mistral": Spec(
        "mistral",
        lambda: T.MistralForCausalLM(_cfg(T.MistralConfig, hidden_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2,
                                          intermediate_size=128, sliding_window=None)),
        _proj_llama, lambda m, i: m.model.layers[i].self_attn, True, True, 16, 2),
    "qwen2": Spec(
        "qwen2",
        lambda: T.Qwen2ForCausalLM(_cfg(T.Qwen2Config, hidden_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=1,
                                        intermediate_size=128)),
        _proj_llama, lambda m, i: m.model.layers[i].self_attn, True, True, 16, 1),
    "bert": Spec(
        "bert",
        lambda: T.BertModel(_cfg(T.BertConfig, hidden_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=128)),
        _proj_pair(lambda m, i: (m.encoder.layer[i].attention.self.query,
                                 m.encoder.layer[i].attention.self.key)),
        lambda m, i: m.encoder.layer[i].attention.self, False, False, 16, 4),
    "roberta": Spec(
        "roberta",
        lambda: T.RobertaForMaskedLM(_cfg(T.RobertaConfig, hidden_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=128)),
        _proj_pair(lambda m, i: (m.roberta.encoder.layer[i].attention.self.query,
                                 m.roberta.encoder.layer[i].attention.self.key)),
        lambda m, i: m.roberta.encoder.layer[i].attention.self, False, False, 16, 4),
    "opt": Spec(
        "opt",
        lambda: T.OPTForCausalLM(_cfg(T.OPTConfig, hidden_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, ffn_dim=128,
                                      word_embed_proj_dim=32, max_position_embeddings=32)),
        _proj_pair(lambda m, i: (m.model.decoder.layers[i].self_attn.q_proj,
                                 m.model.decoder.layers[i].self_attn.k_proj)),
        lambda m, i: m.model.decoder.layers[i].self_attn, False, True, 16, 4),
    "gptj": Spec(
        "gptj",
        lambda: T.GPTJForCausalLM(_cfg(T.GPTJConfig, n_embd=64, n_layer=2, n_head=4,
                                       rotary_dim=8, n_positions=32)),
        _proj_pair(lambda m, i: (m.transformer.h[i].attn.q_proj,
                                 m.transformer.h[i].attn.k_proj)),
        lambda m, i: m.transformer.h[i].attn, True, True, 16, 4),
}


def _is_norm(module) -> bool:
    kind = type(module).__name__
    return isinstance(module, torch.nn.LayerNorm) or "RMSNorm" in kind or "LayerNorm" in kind


def _zero_centred(module) -> bool:  # Gemma's RMSNorm multiplies by (1 + weight)
    return type(module).__name__.startswith("Gemma")


def _norm_weights(module):
    """Gain parameters of a norm module (its own ``weight``, not its submodules')."""
    w = module._parameters.get("weight")
    return [] if w is None else [w]


def forward_kwargs(spec: Spec, model, n_tokens: int = 7) -> dict:
    """Inputs of a forward pass: the spec's own, or ``n_tokens`` token ids (positions all 0
    when the model uses RoPE, so that RoPE is the identity)."""
    if spec.inputs is not None:
        return spec.inputs(model)
    kw = {"input_ids": torch.tensor([[3, 17, 5, 42, 8, 11, 29, 4, 9][:n_tokens]])}
    if spec.rotary:
        kw["position_ids"] = torch.zeros((1, n_tokens), dtype=torch.long)
    return kw


def rope_identity(module, args, out):
    """Forward hook on a rotary-embedding module: cos = 1, sin = 0 (RoPE the identity)."""
    cos, sin = out
    return torch.ones_like(cos), torch.zeros_like(sin)


_SAVED: dict[str, tuple] = {}


def saved(name: str, tmp_path_factory):
    """``(float32 model, folder)`` of spec ``name``, built and saved once per test process."""
    if name not in _SAVED:
        model = build(name)
        folder = tmp_path_factory.mktemp(name)
        model.save_pretrained(folder)
        _SAVED[name] = (model, folder)
    return _SAVED[name]


def all_specs() -> dict[str, Spec]:
    """The specs above and those of ``test_models_zoo_arch`` (imported lazily: it imports
    this module)."""
    from test_models_zoo_arch import ARCH_SPECS

    return {**SPECS, **ARCH_SPECS}


def build(name: str, seed: int = 0):
    """A float32 model of the spec with every parameter redrawn (seeded).

    Weights and biases N(0, 0.1²); norm gains 1 + N(0, 0.1²) (Gemma's zero-centred gains
    N(0, 0.1²)), so attention inputs are O(1) and attention logits O(1).
    """
    torch.manual_seed(seed)
    spec = SPECS[name] if name in SPECS else all_specs()[name]
    model = spec.make().eval()
    gen = torch.Generator().manual_seed(seed + 1)
    norm_gains = {id(p) for m in model.modules() if _is_norm(m) and not _zero_centred(m)
                  for p in _norm_weights(m)}
    with torch.no_grad():
        for p in model.parameters():
            noise = 0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype)
            p.copy_(noise + 1.0 if id(p) in norm_gains else noise)
    return model


def test_zoo_is_deterministic_and_sized():
    a, b = build("llama"), build("llama")
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (parameters
        #  of one model, saved and loaded)
        assert na == nb and torch.equal(pa, pb)
    x = torch.randn(5, 64, dtype=torch.float32)
    for name, spec in SPECS.items():
        model = build(name)
        q, k = spec.proj(model, 1, x)
        assert q.shape == (5, 4, spec.d_h), name
        assert k.shape == (5, spec.n_kv, spec.d_h), name
