"""Tiny random models of the architectures added after the first six (no network).

Each spec is built from a ``transformers`` config (d = 64, 2 layers, 4 query heads; GQA/MQA,
head_dim ≠ d / n_heads, biases and QK-norms switched on where the architecture has them) and
knows, besides the projection and attention modules, what the model does between the
projections and the logit: its own q/k norm modules (``norm``), its logit scale and cap
(``logits``), additive position biases (``bias``: MPNet's relative buckets, Falcon-RW's ALiBi)
and the inputs it takes (``inputs``: pixels for ViT). ``test_models_adapters`` checks every
adapter against them; the zoo test here only checks the zoo itself.
"""

from __future__ import annotations

import math

import torch
import transformers as T
from test_models_zoo import Spec, _cfg, _lin, _proj_llama, _split, build

# -- projections as the forward passes compute them (no bias, no norm, no RoPE) -----------


def _heads_of(m, n_kv=None):
    c = getattr(m.config, "text_config", None) or m.config
    n = c.num_attention_heads
    d_h = getattr(c, "head_dim", None) or c.hidden_size // n
    return n, (n_kv or getattr(c, "num_key_value_heads", None) or n), d_h


def _proj_pair(get, n_kv=None):
    def proj(m, i, x):
        q_mod, k_mod = get(m, i)
        n, kv, d_h = _heads_of(m, n_kv)
        return _split(_lin(q_mod, x), n, d_h), _split(_lin(k_mod, x), kv, d_h)
    return proj


def _proj_phi3(m, i, x):
    attn = m.model.layers[i].self_attn
    n, kv, d_h = _heads_of(m)
    y = _lin(attn.qkv_proj, x)  # Phi3Attention.forward: slices at query_pos = n·d_h
    return _split(y[:, :n * d_h], n, d_h), _split(y[:, n * d_h:(n + kv) * d_h], kv, d_h)


def _proj_falcon(m, i, x):
    attn = m.transformer.h[i].self_attention
    q, k, _ = attn._split_heads(_lin(attn.query_key_value, x)[None])  # the model's own split
    q, k = q[0], k[0]
    c = m.config
    if c.new_decoder_architecture:  # the split broadcasts each key over its query group
        k = k[:, ::c.num_attention_heads // c.num_kv_heads]
    return q, k


def _proj_bloom(m, i, x):
    attn = m.transformer.h[i].self_attention
    q, k, _ = attn._reshape(_lin(attn.query_key_value, x)[None])  # the model's own split
    return q[0].transpose(0, 1), k[0].transpose(0, 1)  # (n, T, d_h) -> (T, n, d_h)


def _proj_bigcode(m, i, x):
    attn = m.transformer.h[i].attn
    n, d, d_h = attn.num_heads, attn.embed_dim, attn.head_dim
    y = _lin(attn.c_attn, x)
    if attn.multi_query:  # GPTBigCodeAttention.forward: split((d, kv_dim, kv_dim))
        q, k, _ = y.split((d, d_h, d_h), dim=-1)
        return _split(q, n, d_h), k[:, None, :]
    q, k, _ = y.view(x.shape[0], n, 3 * d_h).split(d_h, dim=-1)
    return q, k


def _proj_modernbert(m, i, x):
    attn = m.layers[i].attn
    n, _, d_h = _heads_of(m)
    q, k, _ = _lin(attn.Wqkv, x).view(x.shape[0], 3, n, d_h).unbind(dim=1)
    return q, k


# -- the models' own q/k norms, applied to (T, heads, d_h) projections ----------------------


def _norm_olmo2(m, i, q, k):  # one RMSNorm over all heads of a token
    attn = m.model.layers[i].self_attn
    return (attn.q_norm(q.reshape(q.shape[0], -1)).reshape(q.shape),
            attn.k_norm(k.reshape(k.shape[0], -1)).reshape(k.shape))


def _norm_per_head(path):
    def norm(m, i, q, k):
        attn = path(m, i)
        qn, kn = (attn.q_norm, attn.k_norm) if hasattr(attn, "q_norm") else \
            (attn.q_layernorm, attn.k_layernorm)
        return qn(q), kn(k)
    return norm


def _norm_stablelm(m, i, q, k):  # StableLmLayerNormPerHead takes (batch, heads, T, d_h)
    attn = m.model.layers[i].self_attn
    return (attn.q_layernorm(q.transpose(0, 1)[None])[0].transpose(0, 1),
            attn.k_layernorm(k.transpose(0, 1)[None])[0].transpose(0, 1))


# -- logit scale / cap, additive biases, inputs ----------------------------------------------


def _scaled(factor):
    return lambda m, s: s * factor(m)


def _gemma_logits(m, s):
    c = getattr(m.config, "text_config", None) or m.config
    s = s * c.query_pre_attn_scalar ** -0.5
    cap = getattr(c, "attn_logit_softcapping", None)
    return s if cap is None else cap * torch.tanh(s / cap)


def _mpnet_bias(args, kwargs, d_h):
    pb = args[2] if len(args) > 2 else kwargs.get("position_bias")
    return pb[0]  # (heads, T, T), added after the 1/√d_h scale


def _alibi_bias(args, kwargs, d_h):
    """FalconAttention's ALiBi branch: softmax((qk + alibi)/√d_h + mask), and FalconModel
    has already put alibi/√d_h into the mask (transformers 5.23 adds ALiBi twice; the test
    follows the model, since only the content term is W_QK's)."""
    alibi, mask = kwargs["alibi"], kwargs["attention_mask"]
    return alibi[0].reshape(-1, 1, alibi.shape[-1]) / math.sqrt(d_h) + mask[0]


def _bloom_bias(args, kwargs, d_h):
    """BloomAttention: baddbmm(alibi, q, kᵀ, alpha=1/√d_h) + mask (ALiBi is not scaled)."""
    alibi = kwargs["alibi"] if "alibi" in kwargs else args[2]
    mask = kwargs.get("attention_mask")
    out = alibi.reshape(-1, 1, alibi.shape[-1])
    return out if mask is None else out + mask[0]


def _pixels(m):
    c = m.config
    g = torch.Generator().manual_seed(5)
    return {"pixel_values": torch.randn(1, c.num_channels, c.image_size, c.image_size,
                                        generator=g, dtype=torch.float64)}


_LL = lambda m, i: m.model.layers[i].self_attn  # noqa: E731
_LLAMA_KW = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, intermediate_size=96)


def _llama_like(name, cls, cfg_cls, *, d_h=16, n_kv=2, norm=None, logits=None, **kw):
    cfg = {**_LLAMA_KW, "num_key_value_heads": n_kv, **kw}

    def make():
        c = _cfg(cfg_cls, **cfg)
        c._experts_implementation = "eager"  # MoE: grouped_mm has no float64 kernel
        return cls(c)

    return Spec(name, make, _proj_llama, _LL, True, True, d_h, n_kv, norm=norm, logits=logits)


def _gemma3_multimodal():
    text = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, head_dim=24, intermediate_size=96, vocab_size=300,
                query_pre_attn_scalar=20)
    vision = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=48, image_size=16, patch_size=8)
    cfg = T.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4)
    cfg._attn_implementation = "eager"
    cfg.text_config._attn_implementation = "eager"
    return T.Gemma3ForConditionalGeneration(cfg)


def _lm3(m, i):
    return m.model.language_model.layers[i].self_attn


ARCH_SPECS = {
    "olmo": _llama_like("olmo", T.OlmoForCausalLM, T.OlmoConfig, attention_bias=True),
    "olmo2": _llama_like("olmo2", T.Olmo2ForCausalLM, T.Olmo2Config, norm=_norm_olmo2,
                         attention_bias=True),
    "olmo3": _llama_like("olmo3", T.Olmo3ForCausalLM, T.Olmo3Config, norm=_norm_olmo2,
                         sliding_window=16),
    "qwen3": _llama_like("qwen3", T.Qwen3ForCausalLM, T.Qwen3Config, d_h=24, head_dim=24,
                         norm=_norm_per_head(_LL), attention_bias=True),
    "qwen3_moe": _llama_like("qwen3_moe", T.Qwen3MoeForCausalLM, T.Qwen3MoeConfig, d_h=24,
                             head_dim=24, norm=_norm_per_head(_LL), moe_intermediate_size=32,
                             num_experts=4, num_experts_per_tok=2, mlp_only_layers=[1]),
    "gemma": _llama_like("gemma", T.GemmaForCausalLM, T.GemmaConfig, d_h=24, n_kv=1,
                         head_dim=24),
    "gemma2": _llama_like("gemma2", T.Gemma2ForCausalLM, T.Gemma2Config, d_h=24, head_dim=24,
                          query_pre_attn_scalar=20, attn_logit_softcapping=3.0,
                          logits=_gemma_logits),
    "gemma3_text": _llama_like("gemma3_text", T.Gemma3ForCausalLM, T.Gemma3TextConfig, d_h=24,
                               head_dim=24, query_pre_attn_scalar=20, logits=_gemma_logits,
                               norm=_norm_per_head(_LL)),
    "gemma3": Spec("gemma3", _gemma3_multimodal,
                   _proj_pair(lambda m, i: (_lm3(m, i).q_proj, _lm3(m, i).k_proj)), _lm3, False,
                   True, 24, 2, norm=_norm_per_head(_lm3), logits=_gemma_logits,
                   rope_hook=True),
    "phi3": Spec("phi3", lambda: T.Phi3ForCausalLM(_cfg(T.Phi3Config, **_LLAMA_KW)), _proj_phi3,
                 _LL, True, True, 16, 2),
    "phi": _llama_like("phi", T.PhiForCausalLM, T.PhiConfig, qk_layernorm=True,
                       partial_rotary_factor=0.5, norm=_norm_per_head(_LL)),
    "falcon": Spec(
        "falcon", lambda: T.FalconForCausalLM(_cfg(
            T.FalconConfig, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_kv_heads=2, new_decoder_architecture=True, bias=True)),
        _proj_falcon, lambda m, i: m.transformer.h[i].self_attention, True, True, 16, 2,
        model_type="falcon"),
    "falcon_mq": Spec(
        "falcon_mq", lambda: T.FalconForCausalLM(_cfg(
            T.FalconConfig, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            multi_query=True)),
        _proj_falcon, lambda m, i: m.transformer.h[i].self_attention, True, True, 16, 1,
        model_type="falcon"),
    "falcon_rw": Spec(
        "falcon_rw", lambda: T.FalconForCausalLM(_cfg(
            T.FalconConfig, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            multi_query=False, parallel_attn=False, alibi=True, bias=True)),
        _proj_falcon, lambda m, i: m.transformer.h[i].self_attention, False, True, 16, 4,
        model_type="falcon", bias=_alibi_bias),
    "bloom": Spec(
        "bloom", lambda: T.BloomForCausalLM(_cfg(T.BloomConfig, hidden_size=64, n_layer=2,
                                                  n_head=4)),
        _proj_bloom, lambda m, i: m.transformer.h[i].self_attention, False, True, 16, 4,
        bias=_bloom_bias),
    "gpt_bigcode": Spec(
        "gpt_bigcode", lambda: T.GPTBigCodeForCausalLM(_cfg(
            T.GPTBigCodeConfig, n_embd=64, n_layer=2, n_head=4, n_positions=32)),
        _proj_bigcode, lambda m, i: m.transformer.h[i].attn, False, True, 16, 1),
    "gpt_bigcode_mha": Spec(
        "gpt_bigcode_mha", lambda: T.GPTBigCodeForCausalLM(_cfg(
            T.GPTBigCodeConfig, n_embd=64, n_layer=2, n_head=4, n_positions=32,
            multi_query=False)),
        _proj_bigcode, lambda m, i: m.transformer.h[i].attn, False, True, 16, 4,
        model_type="gpt_bigcode"),
    "mixtral": _llama_like("mixtral", T.MixtralForCausalLM, T.MixtralConfig, num_local_experts=4,
                           num_experts_per_tok=2, sliding_window=None),
    "stablelm": _llama_like("stablelm", T.StableLmForCausalLM, T.StableLmConfig,
                            qk_layernorm=True, use_qkv_bias=True, norm=_norm_stablelm),
    "starcoder2": _llama_like("starcoder2", T.Starcoder2ForCausalLM, T.Starcoder2Config,
                              sliding_window=None),
    "cohere": _llama_like("cohere", T.CohereForCausalLM, T.CohereConfig, use_qk_norm=True,
                          norm=_norm_per_head(_LL)),
    "granite": _llama_like("granite", T.GraniteForCausalLM, T.GraniteConfig,
                           attention_multiplier=0.3,
                           logits=_scaled(lambda m: m.config.attention_multiplier)),
    "smollm3": _llama_like("smollm3", T.SmolLM3ForCausalLM, T.SmolLM3Config),
    "mpnet": Spec(
        "mpnet", lambda: T.MPNetModel(_cfg(T.MPNetConfig, hidden_size=64, num_hidden_layers=2,
                                           num_attention_heads=4, intermediate_size=96)),
        _proj_pair(lambda m, i: (m.encoder.layer[i].attention.attn.q,
                                 m.encoder.layer[i].attention.attn.k)),
        lambda m, i: m.encoder.layer[i].attention.attn, False, False, 16, 4, bias=_mpnet_bias),
    "distilbert": Spec(
        "distilbert", lambda: T.DistilBertModel(_cfg(T.DistilBertConfig, dim=64, n_layers=2,
                                                     n_heads=4, hidden_dim=96)),
        _proj_pair(lambda m, i: (m.transformer.layer[i].attention.q_lin,
                                 m.transformer.layer[i].attention.k_lin)),
        lambda m, i: m.transformer.layer[i].attention, False, False, 16, 4),
    "modernbert": Spec(
        "modernbert", lambda: T.ModernBertModel(_cfg(
            T.ModernBertConfig, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=96, attention_bias=True, cls_token_id=1, sep_token_id=2)),
        _proj_modernbert, lambda m, i: m.layers[i].attn, True, False, 16, 4),
    "vit": Spec(
        "vit", lambda: T.ViTModel(_cfg(T.ViTConfig, hidden_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, intermediate_size=96,
                                       image_size=16, patch_size=8)),
        _proj_pair(lambda m, i: (m.layers[i].attention.q_proj, m.layers[i].attention.k_proj)),
        lambda m, i: m.layers[i].attention, False, False, 16, 4, inputs=_pixels),
}


def test_arch_zoo_is_deterministic_and_sized():
    x = torch.randn(5, 64, dtype=torch.float32)
    for name, spec in ARCH_SPECS.items():
        a, b = build(name), build(name)
        for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
            # exact: copies of stored values (slices, reshapes, transposes; no arithmetic)
            #  (parameters of one model, saved and loaded)
            assert na == nb and torch.equal(pa, pb), name
        q, k = spec.proj(a, 1, x)
        assert q.shape == (5, 4, spec.d_h), name
        assert k.shape == (5, spec.n_kv, spec.d_h), name
