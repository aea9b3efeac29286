"""Which model families both circuit searches run (:data:`SUPPORTED`), decided from the config
alone (:func:`check_family`, before any loading), and how each lays out one attention layer
(:data:`SPECS`, read by :class:`.heads.HeadModel`). A spec names, per ``model_type``:

- ``layers`` (the decoder stack: ``layers`` or ``h``), ``attn`` (the attention module),
  ``norm`` (the input norm, the first attribute present; None: none, OLMo-2/3), ``out`` (the
  output projection), ``post`` (the post-attention norm of post-norm blocks: Gemma-2/3,
  OLMo-2/3), ``parallel`` (attention and MLP read the same residual);
- ``qkv``, the q/k/v layout: ``separate`` (``q_proj``/``k_proj``/``v_proj`` or
  ``qkv_names``); ``gpt2`` (one ``Conv1D`` ``c_attn``, columns ``[Q | K | V]``); ``concat``
  (one Linear, rows ``[Q (H d_h) | K (H_kv d_h) | V (H_kv d_h)]``: Phi-3, multi-query
  GPT-BigCode and Falcon); ``per_head`` (rows ``[q_h k_h v_h]`` per head: GPT-NeoX, Bloom,
  GPT-BigCode and old Falcon without multi-query); ``falcon`` (rows per key/value group
  ``[q_{g,1} … q_{g,r} k_g v_g]``, ``new_decoder_architecture``);
- ``qk``, the QK-norm: ``shared`` (one module per projection, per head), ``stablelm`` (a
  LayerNorm per head), ``cohere`` (a ``(H, d_h)`` weight), ``whole`` (an RMSNorm over the whole
  projection, OLMo-2/3);
- ``rope``: ``half`` (rotary with the model's ``rotate_half``, partial from the rotary width),
  ``gptj`` (interleaved), ``alibi`` (Bloom)."""

from __future__ import annotations

from ...errors import InputError

_LLAMA = dict(layers="layers", attn="self_attn", norm=("input_layernorm",), qkv="separate",
              qkv_names=("q_proj", "k_proj", "v_proj"), out="o_proj", qk=None,
              qk_names=("q_norm", "k_norm"), rope="half", alibi=None, post=None,
              parallel=False)


def _spec(**kw) -> dict:
    return {**_LLAMA, **kw}


#: model_type -> layout of one attention layer (module docstring).
SPECS: dict[str, dict] = {
    "gpt2": _spec(layers="h", attn="attn", norm=("ln_1",), qkv="gpt2", qkv_names=("c_attn",),
                  out="c_proj", rope=None),
    **{mt: _spec() for mt in ("llama", "mistral", "qwen2", "mixtral", "granite", "smollm3",
                              "starcoder2", "gemma", "olmo")},
    **{mt: _spec(qk="shared") for mt in ("qwen3", "qwen3_moe")},
    "phi3": _spec(qkv="concat", qkv_names=("qkv_proj",)),
    "gemma2": _spec(post="post_attention_layernorm"),
    "gemma3_text": _spec(qk="shared", post="post_attention_layernorm"),
    "gemma3": _spec(qk="shared", post="post_attention_layernorm"),
    "olmo2": _spec(norm=None, qk="whole", post="post_attention_layernorm"),
    "olmo3": _spec(norm=None, qk="whole", post="post_attention_layernorm"),
    "phi": _spec(out="dense", qk="shared", qk_names=("q_layernorm", "k_layernorm"),
                 parallel=True),
    "stablelm": _spec(qk="stablelm", qk_names=("q_layernorm", "k_layernorm"),
                      parallel="use_parallel_residual"),
    "cohere": _spec(qk="cohere", parallel=True),
    "gpt_neox": _spec(attn="attention", qkv="per_head", qkv_names=("query_key_value",),
                      out="dense", parallel="use_parallel_residual"),
    "gptj": _spec(layers="h", attn="attn", norm=("ln_1",), out="out_proj", rope="gptj",
                  parallel=True),
    "opt": _spec(norm=("self_attn_layer_norm",), out="out_proj", rope=None),
    "gpt_bigcode": _spec(layers="h", attn="attn", norm=("ln_1",), qkv="per_head",
                         qkv_names=("c_attn",), out="c_proj", rope=None),
    "falcon": _spec(layers="h", attn="self_attention", norm=("ln_attn", "input_layernorm"),
                    qkv="per_head", qkv_names=("query_key_value",), out="dense",
                    parallel="parallel_attn"),
    "bloom": _spec(layers="h", attn="self_attention", qkv="per_head",
                   qkv_names=("query_key_value",), out="dense", rope=None, alibi="bloom"),
}

#: model_type values path patching runs (:class:`.heads.HeadModel`).
SUPPORTED = tuple(SPECS)
#: The LLaMA layout (q/k/v/o_proj, input_layernorm, rotary_emb, nothing else).
LLAMA_FAMILY = ("llama", "mistral", "qwen2", "qwen3")
#: model_type values ``score`` reads that are not causal language models.
ENCODERS = ("bert", "roberta", "distilbert", "mpnet", "modernbert", "vit")


def _get(config, name, default=None):
    if isinstance(config, dict):
        return config.get(name, default)
    return getattr(config, name, default)


def text_config(config):
    """The language model's config: ``text_config`` of a multimodal Gemma-3, else ``config``."""
    if _get(config, "model_type") == "gemma3" and _get(config, "text_config") is not None:
        return _get(config, "text_config")
    return config


def check_family(config) -> None:
    """Refuse in one line, from the config alone (a ``config.json`` dict or a transformers
    config), a model path patching cannot run: an encoder, a type outside :data:`SUPPORTED`, or
    an unfollowed variant (OPT with post-attention norm, Bloom with the residual after the norm
    or its projection bypassed, Falcon with ALiBi, bidirectional Gemma)."""
    mt = _get(config, "model_type")
    if mt in ENCODERS:
        raise InputError(f"path patching supports {', '.join(SUPPORTED)} models (causal "
                         f"language models), not the encoder {mt!r}")
    if mt not in SPECS:
        raise InputError(f"path patching supports {', '.join(SUPPORTED)} models, not {mt!r}")
    tc = text_config(config)
    if mt == "opt" and _get(tc, "do_layer_norm_before", True) is False:
        raise InputError("path patching runs pre-norm OPT models; this one normalises after "
                         "attention (do_layer_norm_before false)")
    if mt == "bloom" and _get(tc, "apply_residual_connection_post_layernorm", False):
        raise InputError("path patching runs Bloom models whose residual is the layer's input; "
                         "this one sets apply_residual_connection_post_layernorm")
    if mt == "bloom" and (_get(tc, "pretraining_tp", 1) or 1) > 1 and _get(tc, "slow_but_exact"):
        raise InputError("path patching hooks Bloom's output projection, which slow_but_exact "
                         "with pretraining_tp > 1 bypasses")
    if mt == "falcon" and _get(tc, "alibi", False):
        raise InputError("path patching runs Falcon with rotary positions; with alibi, "
                         "transformers' eager attention adds the bias twice (sdpa once)")
    if _get(tc, "use_bidirectional_attention", False):
        raise InputError(f"path patching runs causal attention; this {mt} model's attention is "
                         f"bidirectional (use_bidirectional_attention)")


def parallel(config, spec: dict) -> bool:
    """Whether attention and MLP read the same residual (a parallel block)."""
    p = spec["parallel"]
    if isinstance(p, str):
        if _get(config, "model_type") == "falcon":
            return bool(_get(config, "parallel_attn") or _get(config, "new_decoder_architecture"))
        return bool(_get(config, p, False))
    return bool(p)


__all__ = ["ENCODERS", "LLAMA_FAMILY", "SPECS", "SUPPORTED", "check_family", "parallel",
           "text_config"]
