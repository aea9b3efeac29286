"""Small GGUF files written with the ``gguf`` package's GGUFWriter (no llama.cpp needed).

:func:`write_llama` stores LLaMA-layout matrices (Hugging Face names and row order) as a
``llama`` GGUF file the way llama.cpp's ``convert_hf_to_gguf.py`` does: q/k rows permuted for
rotary (``LlamaModel.permute``), tensors quantised by ``gguf.quants.quantize`` or passed in as
already-encoded blocks.
"""

from __future__ import annotations

import numpy as np


def permute(w, n_head):
    """llama.cpp's ``LlamaModel.permute`` (HF rotate-half rows → interleaved pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


def write_llama(path, layers, *, d, n_heads, n_kv_heads, qtype="F32", arch="llama",
                encoded=None):
    """Write ``layers`` (a list of ``{"q": (n_heads·d_h, d), "k": …, "v", "o", "gate", "up",
    "down"}`` float arrays; missing ones are omitted) to GGUF ``path``. ``qtype``: GGML type
    name for every matrix, quantised with ``gguf.quants.quantize``; ``encoded``: optional
    ``{(layer, part): (bytes_array, type_name)}`` written as they are (already permuted)."""
    import gguf

    names = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output",
             "gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(len(layers))
    w.add_embedding_length(d)
    w.add_head_count(n_heads)
    w.add_head_count_kv(n_kv_heads)
    w.add_context_length(64)
    w.add_rope_dimension_count(d // n_heads)
    encoded = encoded or {}
    for i, layer in enumerate(layers):
        for part, m in layer.items():
            name = f"blk.{i}.{names[part]}.weight"
            if (i, part) in encoded:
                data, kind = encoded[(i, part)]
                w.add_tensor(name, data, raw_dtype=gguf.GGMLQuantizationType[kind])
                continue
            m = np.asarray(m, dtype=np.float32)
            if arch == "llama" and part in ("q", "k"):
                m = permute(m, n_heads if part == "q" else n_kv_heads)
            t = gguf.GGMLQuantizationType[qtype]
            if qtype == "F32":
                w.add_tensor(name, m)
            else:
                w.add_tensor(name, gguf.quants.quantize(m, t), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


# -- K-quant blocks packed as ggml stores them (block_q2_K … block_q6_K) ---------------------
# Byte layouts from ggml-common.h and the packing loops of quantize_row_q{2,3,4,5,6}_K_ref in
# ggml-quants.c; the gguf package's dequantize reads them back (it has no K-quant quantiser).

def _scales_k4(ls, lm):
    """The 12 bytes holding 8 six-bit scales and mins (get_scale_min_k4's inverse)."""
    ls, lm = ls.astype(np.uint8), lm.astype(np.uint8)
    out = np.zeros((*ls.shape[:-1], 12), np.uint8)
    out[..., 0:4] = ls[..., 0:4]
    out[..., 4:8] = lm[..., 0:4]
    out[..., 8:12] = (ls[..., 4:8] & 0xF) | ((lm[..., 4:8] & 0xF) << 4)
    out[..., 0:4] |= (ls[..., 4:8] >> 4) << 6
    out[..., 4:8] |= (lm[..., 4:8] >> 4) << 6
    return out


def _f16_bytes(x):
    return np.asarray(x, np.float32).astype(np.float16)[..., None].view(np.uint8)


def _qs_2bit(L):
    """The 64 bytes of 2-bit codes of block_q2_K / block_q3_K: qs[j/4 + l] = L[j+l] |
    L[j+l+32] << 2 | L[j+l+64] << 4 | L[j+l+96] << 6 for j = 0, 128 (quantize_row_q2_K_ref)."""
    qs = np.zeros((*L.shape[:-1], 64), np.uint8)
    for j in (0, 128):
        qs[..., j // 4:j // 4 + 32] = L[..., j:j + 32] | (L[..., j + 32:j + 64] << 2) \
            | (L[..., j + 64:j + 96] << 4) | (L[..., j + 96:j + 128] << 6)
    return qs


def _pack_low(c, storage):
    """block_q2_K: scales[16] (ls | lm << 4), qs[64], d, dmin; block_q3_K: hmask[32] (bit
    j/32 of hmask[j % 32] set when L[j] = q + 4 > 3), qs[64] (L & 3), scales[12] (6-bit
    sc + 32: low nibbles in bytes 0-7, 2-bit high parts in bytes 8-11), d."""
    if storage == "q2_k":
        L = c["q"].reshape(*c["q"].shape[:-2], 256).astype(np.uint8)
        scales = (c["ls"].astype(np.uint8) | (c["lm"].astype(np.uint8) << 4))
        return np.concatenate([scales, _qs_2bit(L), _f16_bytes(c["d"]),
                               _f16_bytes(c["dmin"])], axis=-1)
    L = (c["q"].reshape(*c["q"].shape[:-2], 256) + 4).astype(np.uint8)
    hmask = np.zeros((*L.shape[:-1], 32), np.uint8)
    for b in range(8):
        hmask |= ((L[..., 32 * b:32 * b + 32] > 3).astype(np.uint8) << b)
    l6 = (c["sc"] + 32).astype(np.uint8)
    scales = np.zeros((*l6.shape[:-1], 12), np.uint8)
    scales[..., 0:8] = (l6[..., 0:8] & 0xF) | ((l6[..., 8:16] & 0xF) << 4)
    for j in range(16):
        scales[..., 8 + j % 4] |= (l6[..., j] >> 4) << (2 * (j // 4))
    return np.concatenate([hmask, _qs_2bit(L & 3), scales, _f16_bytes(c["d"])], axis=-1)


def pack_k(codes, storage):
    """Bytes ``(..., bytes_per_block)`` of :func:`rmtbase.stats.kquants.k_codes` output."""
    c = {k: np.asarray(v) for k, v in codes.items()}
    if storage in ("q2_k", "q3_k"):
        return _pack_low(c, storage)
    if storage == "q6_k":
        L = (c["q"].reshape(*c["q"].shape[:-2], 256) + 32).astype(np.uint8)
        ql = np.zeros((*L.shape[:-1], 128), np.uint8)
        qh = np.zeros((*L.shape[:-1], 64), np.uint8)
        for j in (0, 128):
            a, b, cc, dd = (L[..., j + o:j + o + 32] for o in (0, 32, 64, 96))
            ql[..., j // 2:j // 2 + 32] = (a & 0xF) | ((cc & 0xF) << 4)
            ql[..., j // 2 + 32:j // 2 + 64] = (b & 0xF) | ((dd & 0xF) << 4)
            qh[..., j // 4:j // 4 + 32] = (a >> 4) | ((b >> 4) << 2) | ((cc >> 4) << 4) \
                | ((dd >> 4) << 6)
        sc = c["sc"].astype(np.int8).view(np.uint8)
        return np.concatenate([ql, qh, sc, _f16_bytes(c["d"])], axis=-1)
    L = c["q"].reshape(*c["q"].shape[:-2], 256).astype(np.uint8)
    head = [_f16_bytes(c["d"]), _f16_bytes(c["dmin"]), _scales_k4(c["ls"], c["lm"])]
    qs = np.zeros((*L.shape[:-1], 128), np.uint8)
    if storage == "q4_k":
        for j in range(0, 256, 64):
            qs[..., j // 2:j // 2 + 32] = L[..., j:j + 32] | (L[..., j + 32:j + 64] << 4)
        return np.concatenate(head + [qs], axis=-1)
    qh = np.zeros((*L.shape[:-1], 32), np.uint8)
    for k, n in enumerate(range(0, 256, 64)):
        l1, l2 = L[..., n:n + 32].copy(), L[..., n + 32:n + 64].copy()
        qh |= np.where(l1 > 15, 1 << (2 * k), 0).astype(np.uint8)
        qh |= np.where(l2 > 15, 2 << (2 * k), 0).astype(np.uint8)
        qs[..., n // 2:n // 2 + 32] = (l1 & 0xF) | ((l2 & 0xF) << 4)
    return np.concatenate(head + [qh, qs], axis=-1)


def encode_k(w, storage):
    """A float matrix ``(rows, cols)`` (cols a multiple of 256) quantised by rmtbase's K-quant
    round trip, as GGUF tensor bytes ``(rows, cols/256 · bytes_per_block)`` and the type name."""
    import jax.numpy as jnp

    from rmtbase.stats.kquants import k_codes

    w = np.asarray(w, np.float32)
    blocks = w.reshape(w.shape[0], -1, 256)
    packed = pack_k(k_codes(jnp.asarray(blocks), storage), storage)
    return packed.reshape(w.shape[0], -1), storage.upper()


# -- a Hugging Face model written as llama.cpp's convert_hf_to_gguf.py would ------------------

#: GGUF architecture -> (transformers model_type, ggml rope: llama's permutation applies)
PERMUTED = {"llama", "olmo"}
NORM_SHIFT = {"gemma", "gemma2", "gemma3"}


def _falcon_kv(cfg):
    """The converter's n_head_kv: ``num_kv_heads`` (the hub's Falcon-7B config has none: 1;
    Falcon-RW's HF config says n_head)."""
    if cfg.new_decoder_architecture:
        return cfg.num_kv_heads
    return 1 if cfg.multi_query else cfg.num_attention_heads


def _falcon_qkv(w, cfg):
    """``FalconModel.modify_tensors``: groups (kv, {q_1..q_g, k, v}, d_h) → [q | k | v]
    (multi-query's [q | k | v] and Falcon-RW's per-head (q, k, v) are the cases kv = 1, n)."""
    n_head, n_kv = cfg.num_attention_heads, _falcon_kv(cfg)
    d_h = cfg.hidden_size // n_head
    qkv = w.reshape(n_kv, n_head // n_kv + 2, d_h, *w.shape[1:])
    q = qkv[:, :-2].reshape(n_head * d_h, *w.shape[1:])
    k = qkv[:, [-2]].reshape(n_kv * d_h, *w.shape[1:])
    v = qkv[:, [-1]].reshape(n_kv * d_h, *w.shape[1:])
    return np.concatenate([q, k, v])


def write_hf(model, path, arch, qtype="F32", qtypes=None, file_type=None):
    """Write a ``transformers`` causal LM ``model`` to GGUF ``path`` as llama.cpp's converter
    does for GGUF architecture ``arch``: tensor names through ``gguf.get_tensor_name_map``,
    q/k rows permuted for the llama family, Gemma norms + 1, GPT-2's Conv1D transposed,
    Falcon's q/k/v regrouped to [q | k | v], StableLM's per-head norms stacked; 2-D tensors
    whose rows are a multiple of the block quantised to ``qtype``, the rest F32. ``qtypes``:
    optional ``{GGUF tensor stem, e.g. "attn_q": type}`` overriding ``qtype`` for those tensors
    (a llama.cpp mix such as Q4_K_M's q/k in Q5_0); ``file_type``: a ``gguf.LlamaFileType``
    name written as ``general.file_type``."""
    import gguf

    cfg = model.config
    arch_id = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}[arch]
    n_layers = cfg.num_hidden_layers
    tmap = gguf.get_tensor_name_map(arch_id, n_layers)
    n_head = cfg.num_attention_heads
    n_kv = getattr(cfg, "num_key_value_heads", None) or n_head
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    if arch == "stablelm":  # _stack_qk_norm
        for i in range(n_layers):
            for which, n in (("q_layernorm", n_head), ("k_layernorm", n_kv)):
                stem = f"model.layers.{i}.self_attn.{which}"
                if f"{stem}.norms.0.weight" in sd:
                    sd[f"{stem}.weight"] = np.stack([sd.pop(f"{stem}.norms.{h}.weight")
                                                     for h in range(n)])
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{arch}")
    if file_type is not None:
        w.add_file_type(gguf.LlamaFileType[file_type])
    w.add_block_count(n_layers)
    width = getattr(cfg, "hidden_size", None) or cfg.n_embd
    w.add_embedding_length(width)
    w.add_context_length(64)
    w.add_head_count(n_head)
    d_h = getattr(cfg, "head_dim", None) or width // n_head
    if arch == "falcon":
        w.add_head_count_kv(_falcon_kv(cfg))
    elif arch == "starcoder":  # StarCoderModel: always one k/v head
        w.add_head_count_kv(1)
    elif arch not in ("gpt2", "gptneox"):
        w.add_head_count_kv(n_kv)
    if getattr(cfg, "head_dim", None) is not None and arch not in ("stablelm",):
        w.add_key_length(cfg.head_dim)
        w.add_value_length(cfg.head_dim)
    if arch in PERMUTED:
        w.add_rope_dimension_count(d_h)
    if arch in ("stablelm", "phi3", "gptneox", "phi2"):  # find_hparam(["partial_rotary_factor"])
        rope = cfg.to_dict().get("rope_parameters") or {}
        frac = getattr(cfg, "partial_rotary_factor", None) or rope.get("partial_rotary_factor")
        w.add_rope_dimension_count(int((frac or 1.0) * d_h))
    ff = getattr(cfg, "intermediate_size", None) or getattr(cfg, "n_inner", None) or 4 * width
    w.add_feed_forward_length(ff)
    w.add_vocab_size(cfg.vocab_size)
    for name, t in sd.items():
        if name.endswith((".attn.bias", ".attn.masked_bias")) or "rotary_emb" in name:
            continue
        base, _, suffix = name.rpartition(".")
        # BloomModel.modify_tensors maps names with the "transformer." prefix removed
        gname = tmap.get_name(base.removeprefix("transformer.") if arch == "bloom" else base)
        if gname is None:
            continue
        if arch in PERMUTED and base.endswith(("q_proj", "k_proj")):
            n = n_head if base.endswith("q_proj") else n_kv
            t = permute(t, n)
        if arch in NORM_SHIFT and name.endswith("norm.weight"):
            t = t + 1
        if arch == "gpt2" and suffix == "weight" and base.endswith(("c_attn", "c_proj", "c_fc")):
            t = t.T
        if arch == "falcon" and base.endswith("query_key_value"):
            t = _falcon_qkv(t, cfg)
        if arch in ("gptneox", "bloom") and base.endswith("query_key_value"):  # GPTNeoX/BloomModel
            d_h = width // n_head
            t = t.reshape(n_head, 3, d_h, *t.shape[1:]).swapaxes(0, 1).reshape(t.shape)
        t = np.ascontiguousarray(t, dtype=np.float32)
        qt = next((v for k, v in (qtypes or {}).items() if gname.endswith(f".{k}")), qtype)
        kind = gguf.GGMLQuantizationType[qt]
        block = gguf.GGML_QUANT_SIZES[kind][0]
        if qt != "F32" and t.ndim == 2 and t.shape[-1] % block == 0 and "norm" not in gname:
            if qt.endswith("_K"):  # gguf-py has no K-quant encoder: rmtbase's, packed
                data, _ = encode_k(t, qt.lower())
            else:
                data = gguf.quants.quantize(t, kind)
            w.add_tensor(f"{gname}.{suffix}", data, raw_dtype=kind)
        else:
            w.add_tensor(f"{gname}.{suffix}", t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
