"""Direct path patching of a LLaMA-family model (LLaMA, SmolLM2, Qwen2) computed independently of
rmtbase's circuits code and of transformers' attention forward: plain torch from the state
dict, float64.

- :func:`run`: the forward — token embedding, then per layer: RMSNorm (``w · x / √(mean x² +
  ε)``), q/k/v projections (biases where the state dict has them, Qwen2), RoPE with the config's
  ``rope_theta`` (``inv_freq_i = θ^{−2i/d_h}``, ``x cos + rotate_half(x) sin`` with
  ``rotate_half(x) = [−x₂, x₁]``, transformers' convention) on q and k, GQA (query head ``h``
  reads key/value head ``h // (H / H_kv)``), causal softmax with scale ``1/√d_h``, ``o_proj``,
  residual, post-attention RMSNorm, SwiGLU MLP ``down(silu(gate x) · up x)``, residual; the
  final RMSNorm and logits (``lm_head``, or the tied embedding). Kept: each layer's residual
  input and each head's ``z = A v`` (B, H, T, d_h).
- Direct patch (:func:`direct_effect`): for receiver R = (l, h) and source S = (m, s), m < l,
  ``z_S W_O[:, s-slice]^T`` (no bias) is subtracted from the residual entering layer l, the
  input RMSNorm re-applied, and only R's ``q``, ``k`` or ``v`` recomputed from it. Effect per
  sequence: q/k with a statistic, the drop of R's score (``_circuit_truth.scores``: the
  ``rmtbase.probe.behaviour`` definitions on the BOS + n + n layout); q/k without one
  (``attention_tv``), the mean over queries ``i ≥ 1`` of ``½ Σ_j |A' − A|``; v,
  ``‖z' − z‖_F / ‖z‖_F`` over queries ``i ≥ 1``. Mean and se with ``_circuit_truth.mean_se``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from _circuit_truth import mean_se, scores

KINDS = ("q", "k", "v")


def state_dict(net) -> dict:
    """The float64 state dict of a transformers LLaMA-family model (base or causal LM), keys
    without the ``model.`` prefix."""
    out = {}
    for k, v in net.state_dict().items():
        out[k[len("model."):] if k.startswith("model.") else k] = v.detach().double()
    return out


def spec(config) -> dict:
    """The sizes the forward needs, read from a transformers config (no rope scaling)."""
    rp = getattr(config, "rope_parameters", None) or {}
    theta = rp.get("rope_theta", getattr(config, "rope_theta", None))
    assert rp.get("rope_type", "default") == "default", rp
    n_h = config.num_attention_heads
    return {"H": n_h, "H_kv": config.num_key_value_heads,
            "d_h": getattr(config, "head_dim", None) or config.hidden_size // n_h,
            "eps": config.rms_norm_eps, "theta": float(theta), "L": config.num_hidden_layers}


def _rms(x, w, eps):
    return w * (x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _w(sd, i):
    p = f"layers.{i}."
    return {k[len(p):]: v for k, v in sd.items() if k.startswith(p)}


def _proj(w, name, x, n, d_h):
    """(B, n, T, d_h) of ``name``_proj on normed x (its bias when present)."""
    y = x @ w[f"self_attn.{name}_proj.weight"].T
    b = w.get(f"self_attn.{name}_proj.bias")
    if b is not None:
        y = y + b
    return y.reshape(*y.shape[:2], n, d_h).transpose(1, 2)


def _rope(x, theta):
    """transformers' rotary embedding of x (B, n, T, d_h) at positions 0 … T−1."""
    d_h, t = x.shape[-1], x.shape[-2]
    inv = 1.0 / theta ** (torch.arange(0, d_h, 2, dtype=torch.float64) / d_h)
    f = torch.arange(t, dtype=torch.float64)[:, None] * inv[None]
    emb = torch.cat([f, f], -1)
    x1, x2 = x[..., : d_h // 2], x[..., d_h // 2:]
    return x * emb.cos() + torch.cat([-x2, x1], -1) * emb.sin()


def _pattern(q, k):
    t = q.shape[-2]
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
    return s.softmax(-1)


def qkv(sd, sp, layer, x):
    """Rotated q (B, H, T, d_h) and k, and v, each key/value head repeated to its query
    heads, of layer ``layer`` reading residual x (input RMSNorm applied here)."""
    w = _w(sd, layer)
    xn = _rms(x, w["input_layernorm.weight"], sp["eps"])
    rep = sp["H"] // sp["H_kv"]
    q = _rope(_proj(w, "q", xn, sp["H"], sp["d_h"]), sp["theta"])
    k = _rope(_proj(w, "k", xn, sp["H_kv"], sp["d_h"]), sp["theta"])
    v = _proj(w, "v", xn, sp["H_kv"], sp["d_h"])
    return q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)


def run(sd, sp, ids) -> dict:
    """The forward (module docstring): ``resid`` (layer inputs), ``z``, ``logits``."""
    x = sd["embed_tokens.weight"][torch.as_tensor(ids)]
    out = {"resid": [], "z": []}
    for i in range(sp["L"]):
        w = _w(sd, i)
        out["resid"].append(x)
        q, k, v = qkv(sd, sp, i, x)
        z = _pattern(q, k) @ v
        attn = z.transpose(1, 2).reshape(*x.shape[:2], -1) @ w["self_attn.o_proj.weight"].T
        if "self_attn.o_proj.bias" in w:
            attn = attn + w["self_attn.o_proj.bias"]
        x = x + attn
        h = _rms(x, w["post_attention_layernorm.weight"], sp["eps"])
        g = torch.nn.functional.silu(h @ w["mlp.gate_proj.weight"].T) * (h @ w["mlp.up_proj.weight"].T)
        x = x + g @ w["mlp.down_proj.weight"].T
        out["z"].append(z)
    out["hidden"] = _rms(x, sd["norm.weight"], sp["eps"])
    out["logits"] = out["hidden"] @ sd.get("lm_head.weight", sd["embed_tokens.weight"]).T
    return out


def source_output(sd, sp, r, layer, head):
    """(B, T, d) the direct output ``z_S W_O[:, s-slice]^T`` of head (layer, head), no bias."""
    d_h = sp["d_h"]
    wo = sd[f"layers.{layer}.self_attn.o_proj.weight"][:, head * d_h:(head + 1) * d_h]
    return r["z"][layer][:, head] @ wo.T


def check_layout(ids, n: int) -> None:
    """Sequences BOS + n + n (the layout ``_circuit_truth.scores`` reads)."""
    ids = np.asarray(ids)
    assert ids.shape[1] == 2 * n + 1 and (ids[:, 0] == ids[0, 0]).all(), ids.shape
    assert (ids[:, 1:n + 1] == ids[:, n + 1:]).all()
    assert (ids[:, 1:] != ids[0, 0]).all()


def direct_effect(sd, sp, r, receiver, source, kind: str, statistic: str | None, n: int):
    """(B,) per-sequence effect of removing ``source``'s direct output from ``receiver``'s
    ``kind`` input (module docstring); ``statistic`` None or ``"attention_tv"`` for the TV
    metric of q/k."""
    (lr, hr), (ls, hs) = receiver, source
    assert ls < lr, (source, receiver)
    x = r["resid"][lr]
    clean = [t[:, hr] for t in qkv(sd, sp, lr, x)]
    new = [t[:, hr] for t in qkv(sd, sp, lr, x - source_output(sd, sp, r, ls, hs))]
    j = KINDS.index(kind)
    a0 = _pattern(clean[0], clean[1])
    if kind == "v":
        z0, z1 = (a0 @ clean[2])[:, 1:], (a0 @ new[2])[:, 1:]
        return ((z1 - z0).pow(2).sum((-1, -2)).sqrt() / z0.pow(2).sum((-1, -2)).sqrt()).numpy()
    qk = [new[i] if i == j else clean[i] for i in range(2)]
    a1 = _pattern(*qk)
    if statistic in (None, "attention_tv"):
        return (0.5 * (a1 - a0).abs().sum(-1)[:, 1:].mean(-1)).numpy()
    s0 = scores(a0[:, None], n)[statistic][:, 0]
    s1 = scores(a1[:, None], n)[statistic][:, 0]
    return (s0 - s1).numpy()


__all__ = ["KINDS", "check_layout", "direct_effect", "mean_se", "qkv", "run", "source_output",
           "spec", "state_dict"]
