"""GPT-NeoX / Pythia adapter: the fused, per-head interleaved ``attention.query_key_value``.

Layout undone (Black et al. 2022; Biderman et al. 2023; ``transformers``
``GPTNeoXAttention``): ``query_key_value`` is an nn.Linear with weight ``(3d, d)`` whose output
rows are ordered ``(head, {q, k, v}, d_h)``: the forward pass views the output as
``(…, n_heads, 3·d_h)`` and chunks the last axis into q, k, v. A plain three-way chunk of the
rows (as for GPT-2's ``c_attn``) is **wrong** here: it would mix heads and projections.
So ``W.reshape(n_heads, 3, d_h, d)[:, 0]`` is W_Q and ``[:, 1]`` is W_K.

RoPE rotates the first ``rotary_pct · d_h`` dimensions of each head (``rotary_pct`` in old
configs, ``rope_parameters["partial_rotary_factor"]`` in transformers ≥ 5); it is recorded in
``rotary_fraction`` and not applied (W_QK is the relative-position-0 form). Tensor names
``layers.{i}.attention.query_key_value.weight`` with or without the ``gpt_neox.`` prefix.
"""

from __future__ import annotations

from ._adapter import Adapter, Dims, cfg_get, expect_shape, mha_dims


def rotary_fraction(cfg: dict, default: float) -> float:
    """Fraction of head dimensions under RoPE, from old or new config keys."""
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    value = cfg_get(cfg, "rotary_pct", "partial_rotary_factor", required=False)
    if value is None and isinstance(rope, dict):
        value = rope.get("partial_rotary_factor")
    return float(default if value is None else value)


class GPTNeoXAdapter(Adapter):
    model_types = ("gpt_neox",)
    probe = "layers.{i}.attention.query_key_value.weight"
    prefixes = ("gpt_neox.", "")

    def dims(self, cfg: dict) -> Dims:
        return mha_dims(cfg, "gpt_neox", rotary_fraction=rotary_fraction(cfg, 0.25))

    def read_layer(self, src, prefix: str, i: int, dims: Dims):
        d, n, d_h = dims.d, dims.n_heads, dims.d_h
        base = f"{prefix}layers.{i}.attention.query_key_value"
        w = expect_shape(src.get(base + ".weight"), (3 * d, d), base + ".weight")
        w = w.reshape(n, 3, d_h, d)  # rows interleaved per head: (head, {q,k,v}, d_h)
        b = self.optional(src, base + ".bias")
        bq = bk = None
        if b is not None:
            b = expect_shape(b, (3 * d,), base + ".bias").reshape(n, 3, d_h)
            bq, bk = b[:, 0], b[:, 1]
        return w[:, 0], w[:, 1], bq, bk
