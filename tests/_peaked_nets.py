"""Random-weight causal LMs from configs (no network) whose projections are scaled ×4, so that
attention is peaked: 3 layers, 4 heads, d = 32, a vocabulary of 40. :func:`peaked` builds one
family: ``gpt2`` (``gpt2_base``: its base model, the head tied to the embedding), ``llama``
(GQA, 2 key/value heads), ``gemma3``, ``gemma2`` (post-norm, final soft-cap 2), ``gpt_neox``
(parallel), ``opt`` (fc1/fc2 in the block), ``bloom`` (ALiBi, an MLP that adds a residual),
``granite`` (residual multiplier 0.5, logits scaled by 1/4, attention biases)."""

from __future__ import annotations

SIZE = dict(num_hidden_layers=3, num_attention_heads=4, hidden_size=32, intermediate_size=48,
            vocab_size=40, max_position_embeddings=64, attn_implementation="eager")


def _config(kind: str):
    import transformers as tf

    if kind in ("gpt2", "gpt2_base"):
        return tf.GPT2LMHeadModel, tf.GPT2Config(n_layer=3, n_head=4, n_embd=32, vocab_size=40,
                                                 n_positions=64, attn_implementation="eager")
    if kind == "llama":
        return tf.LlamaForCausalLM, tf.LlamaConfig(num_key_value_heads=2, **SIZE)
    if kind == "gemma3":
        return tf.Gemma3ForCausalLM, tf.Gemma3TextConfig(num_key_value_heads=2, head_dim=8,
                                                         **SIZE)
    if kind == "gemma2":
        return tf.Gemma2ForCausalLM, tf.Gemma2Config(num_key_value_heads=2, head_dim=8,
                                                     final_logit_softcapping=2.0, **SIZE)
    if kind == "opt":
        return tf.OPTForCausalLM, tf.OPTConfig(
            num_hidden_layers=3, num_attention_heads=4, hidden_size=32, ffn_dim=64,
            vocab_size=40, max_position_embeddings=64, word_embed_proj_dim=32,
            attn_implementation="eager")
    if kind == "bloom":
        return tf.BloomForCausalLM, tf.BloomConfig(n_layer=3, n_head=4, hidden_size=32,
                                                   vocab_size=40, attn_implementation="eager")
    if kind == "granite":
        return tf.GraniteForCausalLM, tf.GraniteConfig(
            num_key_value_heads=2, residual_multiplier=0.5, logits_scaling=4.0,
            attention_bias=True, **SIZE)
    return tf.GPTNeoXForCausalLM, tf.GPTNeoXConfig(**SIZE)


def peaked(kind: str, seed: int = 3):
    """The model of ``kind`` (module docstring) from ``seed``, in eval mode."""
    import torch

    torch.manual_seed(seed)
    cls, cfg = _config(kind)
    net = cls(cfg)
    with torch.no_grad():
        for name, p in net.named_parameters():
            if p.ndim == 2 and not any(e in name for e in ("emb", "wte", "wpe")):
                p.mul_(4.0)
    net = net.eval()
    return net.transformer if kind == "gpt2_base" else net
