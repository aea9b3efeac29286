"""GPT-2 adapter: the fused Conv1D ``attn.c_attn``.

Layout undone (Radford et al. 2019; ``transformers`` ``GPT2Attention``): ``c_attn`` is a
Conv1D, i.e. an *input-major* linear map ``y = x W + b`` with ``W`` of shape ``(d, 3d)``.
Columns ``[0:d]`` give the query, ``[d:2d]`` the key, ``[2d:3d]`` the value; inside each block,
column ``h·d_h + r`` is feature r of head h. So head h's W_Q (rmtbase shape ``(d_h, d)``) is
``W[:, h·d_h:(h+1)·d_h]ᵀ``. Tensor names ``h.{i}.attn.c_attn.weight`` with or without the
``transformer.`` prefix. The model's logit scale (1/√d_h, optionally also 1/(layer+1) with
``scale_attn_by_inverse_layer_idx``) is not applied.
"""

from __future__ import annotations

from ._adapter import Adapter, Dims, expect_shape, mha_dims


class GPT2Adapter(Adapter):
    model_types = ("gpt2",)
    probe = "h.{i}.attn.c_attn.weight"
    prefixes = ("transformer.", "")

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "gpt2", width=("n_embd", "hidden_size"),
                        heads=("n_head", "num_attention_heads"),
                        layers=("n_layer", "num_hidden_layers"))

    def read_layer(self, src, prefix: str, i: int, dims: Dims):
        d, n, d_h = dims.d, dims.n_heads, dims.d_h
        name = f"{prefix}h.{i}.attn.c_attn.weight"
        w = expect_shape(src.get(name), (d, 3 * d), name)
        # (d, 3d) input-major -> per-head (n, d_h, d): transpose each column block.
        wq = w[:, :d].T.reshape(n, d_h, d)
        wk = w[:, d:2 * d].T.reshape(n, d_h, d)
        b = self.optional(src, f"{prefix}h.{i}.attn.c_attn.bias")
        bq = bk = None
        if b is not None:
            b = expect_shape(b, (3 * d,), f"{prefix}h.{i}.attn.c_attn.bias")
            bq, bk = b[:d].reshape(n, d_h), b[d:2 * d].reshape(n, d_h)
        return wq, wk, bq, bk
