"""One attention head of a transformers model recomputed from a residual stream: the
per-architecture part of path patching (:mod:`.patching`).

Why our own forward: a path patch needs a head's query, key and value computed from three
different residual streams. TransformerLens' ``hook_q_input``/``hook_k_input``/
``hook_v_input`` (``use_split_qkv_input``) and nnsight do this by running the whole model
again per patch; here only the receiver head is recomputed, from the residual input of its
layer captured once (:mod:`.capture`), which makes a patch cost one head's projections instead
of a forward pass. The recompute uses the model's own modules and parameters (its layer norm,
its rotary embedding module, its QK-norm, its ``scaling``) so it is exact, not a
re-derivation; the tests compare it to transformers' eager ``output_attentions``.

Per head ``h`` of layer ``l`` from a residual ``x`` ``(N, T, d)``:

- ``xn = norm_l(x)`` (GPT-2 ``ln_1``; LLaMA family ``input_layernorm``), re-applied to a
  patched residual, so a patch changes the norm's statistics as it would in the model;
- ``q = xn W_Q[h] + b_Q[h]``, ``k``, ``v`` likewise with the head's key/value group
  ``g = h // (H / H_kv)`` (GQA); Qwen3's per-head ``q_norm``/``k_norm`` (QK-norm), then RoPE
  (``q cos + rotate_half(q) sin`` with cos, sin from the model's ``rotary_emb`` at positions
  ``0 … T−1``, transformers' own convention) for the LLaMA family;
- ``A = softmax(q kᵀ · scaling + mask)``: ``scaling`` is the attention module's own
  (``d_h^−½``; GPT-2 with ``scale_attn_by_inverse_layer_idx`` also ``/(l + 1)``); the mask is
  causal, banded by the layer's sliding window where it has one (key ``j`` seen by query ``i``
  when ``i − w < j ≤ i``, transformers' convention); no padding.
- A source head ``s`` of layer ``m`` writes ``z_s W_O[s]`` into the residual (its slice of the
  output projection, no bias): :meth:`HeadModel.source_output`.

Supported: ``gpt2`` and the LLaMA family (:data:`LLAMA_FAMILY`); others are refused with a
one-line :class:`InputError`.
"""

from __future__ import annotations

from ..errors import InputError

#: model_type values read as the LLaMA family (q/k/v/o_proj, input_layernorm, rotary_emb).
LLAMA_FAMILY = ("llama", "mistral", "qwen2", "qwen3")
SUPPORTED = ("gpt2", *LLAMA_FAMILY)


def _rotate_half(x):
    import torch

    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class HeadModel:
    """Access to every attention head of ``net`` (a transformers model, base or with a head)
    as the module docstring describes. Attributes: ``n_layers``, ``n_heads``, ``n_kv``,
    ``head_dim``, ``d``, ``kind`` ("gpt2" or "llama"), ``layers`` (the decoder blocks)."""

    def __init__(self, net):
        cfg = net.config
        mt = getattr(cfg, "model_type", "?")
        if mt not in SUPPORTED:
            raise InputError(f"path patching supports {', '.join(SUPPORTED)} models, not "
                             f"{mt!r}")
        base = getattr(net, "base_model", net)
        self.net, self.config = net, cfg
        if mt == "gpt2":
            self.kind, self.layers = "gpt2", list(base.h)
            self.n_heads = int(cfg.n_head)
            self.d = int(cfg.n_embd)
            self.head_dim, self.n_kv = self.d // self.n_heads, self.n_heads
            self.rotary = None
        else:
            self.kind, self.layers = "llama", list(base.layers)
            self.n_heads = int(cfg.num_attention_heads)
            self.d = int(cfg.hidden_size)
            self.head_dim = int(self.layers[0].self_attn.head_dim)
            self.n_kv = int(getattr(cfg, "num_key_value_heads", None) or self.n_heads)
            self.rotary = base.rotary_emb
        self.n_layers = len(self.layers)
        self._pos = {}

    # modules ---------------------------------------------------------------------------
    def attention(self, layer: int):
        blk = self.layers[layer]
        return blk.attn if self.kind == "gpt2" else blk.self_attn

    def norm(self, layer: int):
        blk = self.layers[layer]
        return blk.ln_1 if self.kind == "gpt2" else blk.input_layernorm

    def output_projection(self, layer: int):
        """The module whose input is the layer's ``z`` ``(N, T, H d_h)``."""
        a = self.attention(layer)
        return a.c_proj if self.kind == "gpt2" else a.o_proj

    # projections -----------------------------------------------------------------------
    def head_weight(self, layer: int, which: int, index: int):
        """(W ``(d, d_h)``, bias ``(d_h,)`` or None) of projection ``which`` (0 q, 1 k, 2 v)
        of query head / key-value group ``index``: the head's part is ``xn @ W + bias``."""
        a, dh = self.attention(layer), self.head_dim
        lo = index * dh
        if self.kind == "gpt2":
            lo += which * self.d
            return a.c_attn.weight[:, lo:lo + dh], a.c_attn.bias[lo:lo + dh]
        mod = (a.q_proj, a.k_proj, a.v_proj)[which]
        b = None if mod.bias is None else mod.bias[lo:lo + dh]
        return mod.weight[lo:lo + dh].T, b

    def _proj(self, layer: int, which: int, index: int, xn):
        """Projection ``which`` of head/group ``index``: ``(N, T, d_h)``."""
        w, b = self.head_weight(layer, which, index)
        out = xn @ w
        return out if b is None else out + b

    def _rope(self, x):
        if self.rotary is None:
            return x
        import torch

        t = x.shape[-2]
        if t not in self._pos:
            pos = torch.arange(t, device=x.device)[None]
            self._pos[t] = self.rotary(x, pos)
        cos, sin = self._pos[t]
        return x * cos + _rotate_half(x) * sin

    def finish(self, layer: int, which: int, u):
        """What follows the projection ``u``: QK-norm (Qwen3) and RoPE for q (``which=0``)
        and k (1); nothing for v (2)."""
        if which == 2:
            return u
        qk = getattr(self.attention(layer), ("q_norm", "k_norm")[which], None)
        return self._rope(qk(u) if qk is not None else u)

    def group(self, head: int) -> int:
        """The key/value head that query head ``head`` reads (GQA)."""
        return int(head) // (self.n_heads // self.n_kv)

    def index(self, which: int, head: int) -> int:
        """The projection's head index: the query head, or its key/value group."""
        return int(head) if which == 0 else self.group(head)

    def query(self, layer: int, head: int, xn):
        return self.finish(layer, 0, self._proj(layer, 0, head, xn))

    def key(self, layer: int, head: int, xn):
        return self.finish(layer, 1, self._proj(layer, 1, self.group(head), xn))

    def value(self, layer: int, head: int, xn):
        return self._proj(layer, 2, self.group(head), xn)

    # attention -------------------------------------------------------------------------
    def sliding_window(self, layer: int) -> int | None:
        a = self.attention(layer)
        if hasattr(a, "sliding_window"):
            return a.sliding_window
        return getattr(self.config, "sliding_window", None) if self.kind == "llama" else None

    def pattern(self, layer: int, q, k):
        """``softmax(q kᵀ · scaling + mask)`` ``(N, T, T)`` float32 (module docstring)."""
        import torch

        t = q.shape[-2]
        s = (q @ k.transpose(-1, -2)) * float(self.attention(layer).scaling)
        i = torch.arange(t, device=q.device)
        allowed = i[None, :] <= i[:, None]
        w = self.sliding_window(layer)
        if w is not None:
            allowed &= i[None, :] > i[:, None] - int(w)
        s = s.masked_fill(~allowed, float("-inf"))
        return torch.softmax(s.float(), dim=-1)

    def source_weight(self, layer: int, head: int):
        """``(d_h, d)``: the rows of the output projection that head ``head`` of ``layer``
        writes through (``z_s @ source_weight`` is its output, no bias)."""
        dh, lo = self.head_dim, int(head) * self.head_dim
        proj = self.output_projection(layer)
        if self.kind == "gpt2":
            return proj.weight[lo:lo + dh]
        return proj.weight[:, lo:lo + dh].T

    def source_output(self, layer: int, head: int, z):
        """What head ``head`` of ``layer`` writes into the residual, ``(N, T, d)``, from its
        slice ``z`` ``(N, T, d_h)`` of the output projection's input (no bias)."""
        return z @ self.source_weight(layer, head)


__all__ = ["LLAMA_FAMILY", "SUPPORTED", "HeadModel"]
