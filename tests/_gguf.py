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
