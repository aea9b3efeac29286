"""GGUF architectures read by rmtbase: sizes, tensor names and llama.cpp's conversions undone.

Per ``general.architecture``: the Hugging Face adapter that reads it, and how
``convert_hf_to_gguf.py`` changed the tensors:

- **names**: each adapter's tensor names go through ``gguf.get_tensor_name_map``
  (``model.layers.{i}.self_attn.q_proj`` → ``blk.{i}.attn_q``);
- **sizes**: from ``gguf.Keys`` metadata (``.attention.key_length`` is d_h);
- **conversions** (:class:`ArchSpec`): ``permute`` undoes ``LlamaModel.permute`` of q/k rows;
  ``norm_shift`` subtracts the 1 Gemma's converter adds to norm weights (exact); ``conv1d``
  transposes GPT-2 back; ``falcon_qkv`` / ``qkv_regroup`` regroup fused ``[q | k | v]`` rows;
  ``per_head_norm`` splits StableLM's stacked per-head norms. Others are refused from the metadata."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelError


@dataclass(frozen=True)
class ArchSpec:
    """How one GGUF architecture maps onto a Hugging Face ``model_type`` (see module doc)."""

    model_type: str
    hf_class: str
    permute: bool = False
    norm_shift: float = 0.0
    conv1d: bool = False
    qkv_regroup: bool = False
    per_head_norm: bool = False
    #: config flag switched on when the file holds ``blk.0.attn_q_norm.weight``
    qk_norm_flag: str = ""
    #: config key names the adapter reads: width, heads, kv heads, layers
    names: tuple[str, str, str, str] = ("hidden_size", "num_attention_heads",
                                        "num_key_value_heads", "num_hidden_layers")
    extra: dict = field(default_factory=dict)


#: GGUF architecture -> spec. The order is the documentation's.
SPECS = {
    "llama": ArchSpec("llama", "LlamaForCausalLM", permute=True),
    "qwen2": ArchSpec("qwen2", "Qwen2ForCausalLM"),
    "qwen3": ArchSpec("qwen3", "Qwen3ForCausalLM"),
    "gemma": ArchSpec("gemma", "GemmaForCausalLM", norm_shift=1.0),
    "gemma2": ArchSpec("gemma2", "Gemma2ForCausalLM", norm_shift=1.0),
    "gemma3": ArchSpec("gemma3_text", "Gemma3ForCausalLM", norm_shift=1.0),
    "phi3": ArchSpec("phi3", "Phi3ForCausalLM"),
    "phi2": ArchSpec("phi", "PhiForCausalLM"),
    "starcoder2": ArchSpec("starcoder2", "Starcoder2ForCausalLM"),
    "stablelm": ArchSpec("stablelm", "StableLmForCausalLM", per_head_norm=True,
                         qk_norm_flag="qk_layernorm"),
    "olmo": ArchSpec("olmo", "OlmoForCausalLM", permute=True),
    "olmo2": ArchSpec("olmo2", "Olmo2ForCausalLM"),
    "command-r": ArchSpec("cohere", "CohereForCausalLM", qk_norm_flag="use_qk_norm"),
    "gptneox": ArchSpec("gpt_neox", "GPTNeoXForCausalLM", qkv_regroup=True),
    "falcon": ArchSpec("falcon", "FalconForCausalLM", qkv_regroup=True,
                       names=("hidden_size", "num_attention_heads", "num_kv_heads",
                              "num_hidden_layers"),
                       extra={"new_decoder_architecture": True, "multi_query": False}),
    # BloomModel reorders query_key_value from (head, {q, k, v}, d_h) to [q | k | v], as
    # GPTNeoXModel does; head_count_kv = head_count
    "bloom": ArchSpec("bloom", "BloomForCausalLM", qkv_regroup=True,
                      names=("hidden_size", "n_head", "", "n_layer")),
    "gpt2": ArchSpec("gpt2", "GPT2LMHeadModel", conv1d=True,
                     names=("n_embd", "n_head", "", "n_layer")),
    # StarCoderModel writes GPT-BigCode's c_attn as is, with head_count_kv = 1 (multi-query)
    "starcoder": ArchSpec("gpt_bigcode", "GPTBigCodeForCausalLM",
                          names=("n_embd", "n_head", "", "n_layer"),
                          extra={"multi_query": True}),
}


def spec_of(arch, path) -> ArchSpec:
    """The spec of GGUF architecture ``arch`` (ModelError naming the supported ones)."""
    if arch not in SPECS:
        raise ModelError(f"unsupported GGUF architecture {arch!r} in {path}; rmtbase reads "
                         f"{', '.join(SPECS)} (a GGUF file is refused before its tensors are "
                         "read)")
    return SPECS[arch]


def _int(meta: dict, key: str, path, required: bool = True):
    v = meta.get(key)
    if v is None:
        if required:
            raise ModelError(f"GGUF file {path} lacks metadata {key!r}")
        return None
    if isinstance(v, list):  # per-layer counts (e.g. head_count_kv of hybrid models)
        vals = set(v)
        if len(vals) != 1:
            raise ModelError(f"GGUF metadata {key!r} of {path} varies by layer ({sorted(vals)}); "
                             "rmtbase reads one value for all layers")
        v = vals.pop()
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ModelError(f"GGUF metadata {key!r} of {path} is {v!r}, not a positive integer")
    return v


def hf_config(meta: dict, path) -> dict:
    """A Hugging Face style config dict from GGUF metadata (``gguf.Keys`` names), under the
    key names the architecture's adapter reads; ModelError for an unsupported architecture."""
    from gguf import Keys

    arch = meta.get(Keys.General.ARCHITECTURE)
    spec = spec_of(arch, path)

    def key(template: str) -> str:
        return template.format(arch=arch)

    d = _int(meta, key(Keys.LLM.EMBEDDING_LENGTH), path)
    heads = _int(meta, key(Keys.Attention.HEAD_COUNT), path)
    kv = _int(meta, key(Keys.Attention.HEAD_COUNT_KV), path, required=False) or heads
    layers = _int(meta, key(Keys.LLM.BLOCK_COUNT), path)
    d_h = _int(meta, key(Keys.Attention.KEY_LENGTH), path, required=False)
    width, n_head, n_kv, n_layer = spec.names
    cfg = {"model_type": spec.model_type, "architectures": [spec.hf_class],
           "gguf_architecture": arch, width: d, n_head: heads, n_layer: layers, **spec.extra}
    if n_kv:
        cfg[n_kv] = kv
    elif cfg.get("multi_query") and kv != 1:
        raise ModelError(f"GGUF file {path}: {arch} is multi-query, but head_count_kv = {kv}")
    elif kv != heads and not cfg.get("multi_query"):
        raise ModelError(f"GGUF file {path}: {arch} has no grouped keys, but head_count_kv = "
                         f"{kv} ≠ head_count = {heads}")
    if d_h is not None and d_h != d // heads:
        cfg["head_dim"] = d_h
    elif d_h is None:
        d_h = d // heads
    ff = _int(meta, key(Keys.LLM.FEED_FORWARD_LENGTH), path, required=False)
    if ff is not None:
        cfg["n_inner" if spec.conv1d else "intermediate_size"] = ff
    rot = meta.get(key(Keys.Rope.DIMENSION_COUNT))
    if isinstance(rot, int) and not isinstance(rot, bool) and rot > 0 and d_h:
        cfg["partial_rotary_factor"] = min(1.0, rot / d_h)
    if spec.qk_norm_flag:
        cfg[spec.qk_norm_flag] = False  # set from the tensor directory by gguf_config
    name = meta.get(Keys.General.NAME)
    cfg["_name_or_path"] = str(name or path)
    return cfg


def name_map(cfg: dict, adapter, n_layers: int) -> dict[str, str]:
    """``{Hugging Face tensor name: GGUF tensor name}`` for every weight and bias the adapter
    may read (its layout's parts and QK-norm), found through ``gguf.get_tensor_name_map``."""
    import gguf

    arch_id = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}[cfg["gguf_architecture"]]
    tmap = gguf.get_tensor_name_map(arch_id, n_layers)
    layout = adapter.layouts_for(cfg)[0]
    names = [part.tensor() for part in layout.parts.values()]
    norm = adapter.qk_norm({**cfg, "qk_layernorm": True, "use_qk_norm": True})
    if norm is not None:
        names += [norm.q.replace(".norms.{h}", ""), norm.k.replace(".norms.{h}", "")]
    out = {}
    for template in dict.fromkeys(names):
        base = template.removesuffix(".weight")
        for i in range(n_layers):
            for prefix in layout.prefixes:
                hf = prefix + base.format(i=i)
                gg = tmap.get_name(hf)
                if gg is not None:
                    out[hf + ".weight"] = gg + ".weight"
                    out[hf + ".bias"] = gg + ".bias"
                    break
    return out


def regroup_falcon(w: np.ndarray, n_heads: int, n_kv: int) -> np.ndarray:
    """llama.cpp's Falcon ``[q | k | v]`` rows (weight or bias) back to Hugging Face's grouped
    ``(kv, {q_1…q_g, k, v}, d_h)`` order (``FalconModel.modify_tensors`` inverted)."""
    d_h = w.shape[0] // (n_heads + 2 * n_kv)
    if d_h * (n_heads + 2 * n_kv) != w.shape[0] or n_heads % n_kv:
        raise ModelError(f"cannot regroup a Falcon query_key_value with {w.shape[0]} rows for "
                         f"{n_heads} query and {n_kv} key/value heads")
    rest = w.shape[1:]
    g = n_heads // n_kv
    q = w[:n_heads * d_h].reshape(n_kv, g, d_h, *rest)
    k = w[n_heads * d_h:(n_heads + n_kv) * d_h].reshape(n_kv, 1, d_h, *rest)
    v = w[(n_heads + n_kv) * d_h:].reshape(n_kv, 1, d_h, *rest)
    return np.concatenate([q, k, v], axis=1).reshape(w.shape)


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's rotary row permutation (``LlamaModel.permute``: rotate-half rows →
    interleaved pairs within each head) of a q/k weight ``(n_head·d_h, …)`` or bias."""
    d_h = w.shape[0] // n_head if n_head > 0 else 0
    if n_head < 1 or d_h * n_head != w.shape[0] or d_h % 2:
        raise ModelError(f"cannot undo llama.cpp's q/k row permutation of a tensor with "
                         f"{w.shape[0]} rows for {n_head} heads")
    return w.reshape(n_head, d_h // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
