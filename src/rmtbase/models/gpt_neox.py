"""GPT-NeoX / Pythia adapter: the fused, per-head interleaved ``attention.query_key_value``.

Layout undone (Black et al. 2022; Biderman et al. 2023; ``GPTNeoXAttention``): ``query_key_value``
``(3d, d)`` has rows ``(head, {q, k, v}, d_h)`` (a plain three-way chunk would mix heads): W_Q is
``W.reshape(n_heads, 3, d_h, d)[:, 0]``, W_K ``[:, 1]`` (``"per_head"``). RoPE on the first
``rotary_pct · d_h`` dims is recorded in ``rotary_fraction``, not applied."""

from __future__ import annotations

from ._adapter import Adapter
from ._config import Dims, mha_dims, rotary_fraction
from ._layout import Layout, fused_attention, plain_ffn


class GPTNeoXAdapter(Adapter):
    model_types = ("gpt_neox",)
    layouts = (Layout({**fused_attention("layers.{i}.attention.query_key_value",
                                         "layers.{i}.attention.dense", "per_head"),
                       **plain_ffn("layers.{i}.mlp.dense_h_to_4h", "layers.{i}.mlp.dense_4h_to_h")},
                      prefixes=("gpt_neox.", "")),)

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "gpt_neox", rotary_fraction=rotary_fraction(cfg, 0.25))
