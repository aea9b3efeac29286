"""GPT-NeoX / Pythia adapter: the fused, per-head interleaved ``attention.query_key_value``.

Layout undone (Black et al. 2022; Biderman et al. 2023; ``transformers``
``GPTNeoXAttention``): ``query_key_value`` is an nn.Linear with weight ``(3d, d)`` whose output
rows are ordered ``(head, {q, k, v}, d_h)``: the forward pass views the output as
``(…, n_heads, 3·d_h)`` and chunks the last axis into q, k, v. A plain three-way chunk of the
rows (as for GPT-2's ``c_attn``) is **wrong** here: it would mix heads and projections.
So ``W.reshape(n_heads, 3, d_h, d)[:, 0]`` is W_Q and ``[:, 1]`` is W_K (order
``"per_head"`` of :func:`~rmtbase.models._layout.split_qkv`). Output ``attention.dense``,
MLP ``dense_h_to_4h`` / ``dense_4h_to_h``.

RoPE rotates the first ``rotary_pct · d_h`` dimensions of each head (``rotary_pct`` in old
configs, ``rope_parameters["partial_rotary_factor"]`` in transformers ≥ 5); it is recorded in
``rotary_fraction`` and not applied (W_QK is the relative-position-0 form). Tensor names
``layers.{i}.attention.query_key_value.weight`` with or without the ``gpt_neox.`` prefix.
"""

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
