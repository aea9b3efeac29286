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
