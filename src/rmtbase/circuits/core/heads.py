"""One attention head of a transformers model recomputed from a residual stream with the
model's own modules (norms, rotary, QK-norms, ``scaling``, ALiBi, soft-cap), for
:data:`.families.SUPPORTED` (layouts: :data:`.families.SPECS`); tested against eager
``output_attentions`` per family. Head ``h`` of layer ``l`` from a residual ``x`` ``(N, T, d)``:

- ``xn = norm_l(x)`` (identity for OLMo-2/3); ``u = xn W[h] + b[h]``
  (:meth:`HeadModel.head_weight`), then :meth:`HeadModel.finish`: OLMo's clip, the QK-norm
  (per head, or over the whole projection for OLMo-2/3), OPT's query scale, rotary (full or
  partial) at positions ``0 … T−1``;
- ``A = softmax(cap · tanh(S / cap) + mask)``, ``S = q kᵀ · scaling`` (Bloom: ``alibi_h +
  q kᵀ/√d_h``; ``cap``: Gemma-2 only); the mask is causal, banded by a sliding window ``w``
  (query ``i`` sees key ``j`` when ``i − w < j ≤ i``);
- GQA/MQA: query head ``h`` reads key/value group ``g = h // (H / H_kv)``; a patched k or v
  input recomputes that group's projection for ``h`` only (the group's other heads stay clean);
- source head ``s`` of layer ``m`` writes ``(z_s · r_m) O_s`` (:meth:`~HeadModel.source_output`):
  ``O_s`` its slice of the output projection (no bias) times the post-norm gain (Gemma-2/3,
  OLMo-2/3) and Granite's ``residual_multiplier``; ``r_m`` ``(N, T, 1)`` is 1, or for post-norm
  blocks the norm's clean ``1/rms`` (:meth:`~HeadModel.source_scale`): a per-position linear map."""

from __future__ import annotations

import inspect
import math
import sys

from ...errors import InputError
from .families import ENCODERS, LLAMA_FAMILY, SPECS, SUPPORTED, check_family, parallel, text_config
from .norms import norm_spec


def _rotate_half(x):
    import torch

    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def _owner(base, attr: str):
    for cand in (base, getattr(base, "decoder", None), getattr(base, "language_model", None),
                 getattr(base, "model", None), getattr(base, "transformer", None)):
        if cand is not None and hasattr(cand, attr):
            return cand
    raise InputError(f"cannot find the decoder layers ({attr}) of this "
                     f"{type(base).__name__}")


class HeadModel:
    """Every attention head of ``net`` (a transformers model) as the module docstring says;
    ``n_layers``, ``n_heads``, ``n_kv``, ``head_dim``, ``d``, ``family`` (= ``kind``, the
    model_type), ``layers``. An unsupported family is refused in one line."""

    def __init__(self, net):
        import torch

        cfg = net.config
        check_family(cfg)
        mt = cfg.model_type
        tc = text_config(cfg)
        spec = dict(SPECS[mt])
        base = getattr(net, "base_model", net)
        owner = _owner(base, spec["layers"])
        self.net, self.config, self.family, self.kind, self.spec = net, tc, mt, mt, spec
        self.decoder = owner  # the module holding the layers (and the final norm)
        self.layers = list(getattr(owner, spec["layers"]))
        self.n_layers = len(self.layers)
        self.n_heads = int(tc.num_attention_heads)
        self.d = int(tc.hidden_size)
        a0 = self.attention(0)
        self.head_dim = int(getattr(a0, "head_dim", None) or getattr(a0, "head_size", None)
                            or self.d // self.n_heads)
        mq = bool(getattr(tc, "multi_query", False))
        if mt == "falcon":
            new = bool(getattr(tc, "new_decoder_architecture", False))
            self.n_kv = int(tc.num_kv_heads) if new else 1 if mq else self.n_heads
            spec["qkv"] = "falcon" if new else "concat" if mq else "per_head"
        elif mt == "gpt_bigcode":
            self.n_kv = 1 if mq else self.n_heads
            spec["qkv"] = "concat" if mq else "per_head"
        elif spec["qkv"] in ("gpt2", "per_head") or mt in ("gptj", "opt"):
            self.n_kv = self.n_heads
        else:
            self.n_kv = int(getattr(tc, "num_key_value_heads", None) or self.n_heads)
        self.rotary = getattr(owner, "rotary_emb", None) if spec["rope"] else None
        self._typed = self.rotary is not None and "layer_type" in inspect.signature(
            self.rotary.forward).parameters
        self._mod = sys.modules[type(a0).__module__]
        self._clip = getattr(tc, "clip_qkv", None) if mt == "olmo" else None
        self._mult = float(getattr(tc, "residual_multiplier", 1.0)) if mt == "granite" else 1.0
        self._parallel = parallel(tc, spec)
        self._identity = torch.nn.Identity()
        self._pos: dict = {}
        self._alibi: dict = {}
        for li in range(self.n_layers):
            post = self.post_norm(li)
            if post is not None and (norm_spec(post) or ("",))[0] != "rms":
                raise InputError(f"{mt}: unknown post-attention norm {type(post).__name__}")

    # modules ---------------------------------------------------------------------------
    def attention(self, layer: int):
        return getattr(self.layers[layer], self.spec["attn"])

    def norm(self, layer: int):
        """The attention's input norm (identity where the block has none: OLMo-2/3)."""
        for name in self.spec["norm"] or ():
            mod = getattr(self.layers[layer], name, None)
            if mod is not None:
                return mod
        return self._identity

    def norm_spec(self, layer: int):
        """:func:`norm_spec` of :meth:`norm`."""
        return norm_spec(self.norm(layer))

    def output_projection(self, layer: int):
        """The module whose input is the layer's ``z`` ``(N, T, H d_h)``."""
        return getattr(self.attention(layer), self.spec["out"])

    def post_norm(self, layer: int):
        """The norm applied to the attention's output before the residual add (Gemma-2/3,
        OLMo-2/3), else None."""
        name = self.spec["post"]
        return None if name is None else getattr(self.layers[layer], name)

    def contribution_module(self, layer: int):
        """The module whose output, times :meth:`contribution_factor`, is what the layer's attention
        adds to the residual: the post-norm of a post-norm block, else the output projection."""
        post = self.post_norm(layer)
        return post if post is not None else self.output_projection(layer)

    def contribution_factor(self, layer: int) -> float:
        """What the block multiplies :meth:`contribution_module`'s output by before adding it
        (Granite's ``residual_multiplier``; 1 otherwise)."""
        return self._mult

    def parallel(self, layer: int) -> bool:
        """Whether attention and MLP read the same residual (GPT-J, Phi, Cohere, parallel
        GPT-NeoX / StableLM / Falcon): then a via-MLP path starts at the next layer's MLP."""
        return self._parallel

    # projections -----------------------------------------------------------------------
    def head_weight(self, layer: int, which: int, index: int):
        """(W ``(d, d_h)``, bias ``(d_h,)`` or None) of projection ``which`` (0 q, 1 k, 2 v)
        of query head / key-value group ``index``: the head's part is ``xn @ W + bias``."""
        import torch

        a, dh, lay = self.attention(layer), self.head_dim, self.spec["qkv"]
        names = self.spec["qkv_names"]
        if lay == "separate":
            mod, lo = getattr(a, names[which]), index * dh
        else:
            mod = getattr(a, names[0])
            h, kv = self.n_heads, self.n_kv
            if lay == "gpt2":
                lo = which * self.d + index * dh
            elif lay == "concat":
                lo = (0, h * dh, (h + kv) * dh)[which] + index * dh
            elif lay == "per_head":
                lo = (3 * index + which) * dh
            else:  # falcon: per key/value group [q_1 … q_r, k, v]
                r = h // kv
                g, j = (index // r, index % r) if which == 0 else (index, r + which - 1)
                lo = (g * (r + 2) + j) * dh
        b = None if mod.bias is None else mod.bias[lo:lo + dh]
        if isinstance(mod, torch.nn.Linear):
            return mod.weight[lo:lo + dh].T, b
        return mod.weight[:, lo:lo + dh], b  # Conv1D: (in, out)

    def _proj(self, layer: int, which: int, index: int, xn):
        """Projection ``which`` of head/group ``index``: ``(N, T, d_h)``."""
        w, b = self.head_weight(layer, which, index)
        out = xn @ w
        return out if b is None else out + b

    def _positions(self, layer: int, x):
        import torch

        lt = self.config.layer_types[layer] if self._typed else None
        t = x.shape[-2]
        if (lt, t, x.dtype) not in self._pos:  # plain tensors, kept for autograd callers too
            with torch.inference_mode(False), torch.no_grad():
                like = torch.zeros(1, dtype=x.dtype, device=x.device)
                pos = torch.arange(t, device=x.device)[None]
                self._pos[(lt, t, x.dtype)] = (self.rotary(like, pos, lt) if self._typed
                                               else self.rotary(like, pos))
        return self._pos[(lt, t, x.dtype)]

    def _rope(self, layer: int, x):
        import torch

        if self.rotary is None or not getattr(self.attention(layer), "use_rope", 1):
            return x
        if self.spec["rope"] == "gptj":
            sin, cos = self._positions(layer, x)
            r = self.attention(layer).rotary_dim or self.head_dim
            rot = self._mod.apply_rotary_pos_emb(x[..., None, :r], sin, cos)[..., 0, :]
        else:
            cos, sin = self._positions(layer, x)
            r = cos.shape[-1]
            half = getattr(self._mod, "rotate_half", _rotate_half)
            rot = x[..., :r] * cos + half(x[..., :r]) * sin
        return rot if r == x.shape[-1] else torch.cat((rot, x[..., r:]), dim=-1)

    def _qk_norm(self, layer: int, which: int, index, u):
        import torch

        kind = self.spec["qk"]
        mod = getattr(self.attention(layer), self.spec["qk_names"][which], None)
        if kind is None or mod is None:
            return u
        if kind == "shared":
            return mod(u)
        if kind == "whole":
            raise InputError(f"{self.family}: the QK-norm spans every head; use query()/key()")
        if index is None:
            raise InputError(f"{self.family}: the QK-norm is per head; finish needs the index")
        if kind == "stablelm":
            return mod.norms[int(index)](u)
        v = u.float()  # cohere: LayerNorm without bias, weight (H, d_h)
        v = v - v.mean(-1, keepdim=True)
        v = v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + mod.variance_epsilon)
        return (mod.weight[int(index)].float() * v).to(u.dtype)

    def finish(self, layer: int, which: int, u, index: int | None = None):
        """What follows projection ``u`` of head/group ``index``: OLMo's clip; for q (``which=0``)
        and k (1) the QK-norm (per-head norms need ``index``), OPT's query scale, rotary."""
        if self._clip is not None:
            u = u.clamp(min=-self._clip, max=self._clip)
        if which == 2:
            return u
        u = self._qk_norm(layer, which, index, u)
        if which == 0 and self.family == "opt":
            u = u * self.attention(layer).scaling
        return self._rope(layer, u)

    def group(self, head: int) -> int:
        """The key/value head that query head ``head`` reads (GQA)."""
        return int(head) // (self.n_heads // self.n_kv)

    def index(self, which: int, head: int) -> int:
        """The projection's head index: the query head, or its key/value group."""
        return int(head) if which == 0 else self.group(head)

    def _input(self, layer: int, which: int, head: int, xn):
        index = self.index(which, head)
        if self.spec["qk"] == "whole" and which < 2:  # OLMo-2/3: norm over all heads
            a, dh = self.attention(layer), self.head_dim
            full = getattr(a, self.spec["qk_names"][which])(
                getattr(a, self.spec["qkv_names"][which])(xn))
            return self._rope(layer, full[..., index * dh:(index + 1) * dh])
        return self.finish(layer, which, self._proj(layer, which, index, xn), index)

    def query(self, layer: int, head: int, xn):
        return self._input(layer, 0, head, xn)

    def key(self, layer: int, head: int, xn):
        return self._input(layer, 1, head, xn)

    def value(self, layer: int, head: int, xn):
        return self._input(layer, 2, head, xn)

    # attention -------------------------------------------------------------------------
    def sliding_window(self, layer: int) -> int | None:
        a = self.attention(layer)
        if hasattr(a, "sliding_window"):
            return a.sliding_window
        if self.spec["rope"] != "half" or getattr(self.config, "use_sliding_window",
                                                  True) is False:
            return None
        return getattr(self.config, "sliding_window", None)

    def alibi(self, layer: int, head: int, t: int):
        """The ALiBi bias ``(t,)`` of ``head`` over key positions (Bloom), by the model's own
        ``build_alibi_tensor``; None for other families."""
        if self.spec["alibi"] is None:
            return None
        import torch

        if t not in self._alibi:
            with torch.inference_mode(False), torch.no_grad():
                mask = torch.ones(1, t, dtype=torch.long)
                self._alibi[t] = self._mod.build_alibi_tensor(mask, self.n_heads, torch.float32)
        return self._alibi[t][int(head), 0]

    def pattern(self, layer: int, q, k, head: int | None = None):
        """``softmax(cap · tanh(S / cap) + mask)`` ``(N, T, T)`` float32 (module docstring);
        ``head`` (the query head) is needed for ALiBi (Bloom)."""
        import torch

        a, t = self.attention(layer), q.shape[-2]
        s = q @ k.transpose(-1, -2)
        if self.spec["alibi"] is not None:
            if head is None:
                raise InputError(f"{self.family}: ALiBi attention needs the head for its "
                                 f"pattern")
            s = self.alibi(layer, head, t).to(s.dtype) + s * a.inv_norm_factor  # Bloom
        elif self.family == "falcon":
            s = s / math.sqrt(self.head_dim)
        elif self.family != "opt":  # OPT scales the query (finish)
            s = s * float(a.scaling)
        # Gemma-2 only: Gemma-3 keeps the attribute but its attention does not cap
        cap = getattr(a, "attn_logit_softcapping", None) if self.family == "gemma2" else None
        if cap:
            s = torch.tanh(s / cap) * cap
        i = torch.arange(t, device=q.device)
        allowed = i[None, :] <= i[:, None]
        w = self.sliding_window(layer)
        if w is not None:
            allowed &= i[None, :] > i[:, None] - int(w)
        s = s.masked_fill(~allowed, float("-inf"))
        return torch.softmax(s.float(), dim=-1)

    # sources ---------------------------------------------------------------------------
    def _o(self, layer: int, head: int):
        """The head's rows of the output projection ``(d_h, d)``, times the post-norm gain."""
        import torch

        dh, lo = self.head_dim, int(head) * self.head_dim
        proj = self.output_projection(layer)
        if isinstance(proj, torch.nn.Linear):
            w = proj.weight[:, lo:lo + dh].T
        else:
            w = proj.weight[lo:lo + dh]
        post = self.post_norm(layer)
        if post is not None:
            g = norm_spec(post)[1]
            w = w if g is None else w * g.to(w.dtype)
        return w

    def source_weight(self, layer: int, head: int):
        """``(d_h, d)``: ``O_s`` of the module docstring; what head ``head`` of ``layer``
        writes into the residual is ``(z · source_scale) @ source_weight``."""
        w = self._o(layer, head)
        return w if self._mult == 1.0 else w * self._mult

    def source_scale(self, layer: int, clean):
        """``r`` ``(N, T, 1)`` of a post-norm block: ``1/rms`` of ``clean``, layer ``layer``'s clean
        attention output ``(N, T, d)``; None for pre-norm blocks."""
        post = self.post_norm(layer)
        if post is None:
            return None
        import torch

        eps = norm_spec(post)[3]
        return torch.rsqrt(clean.float().pow(2).mean(-1, keepdim=True) + eps)

    def source_output(self, layer: int, head: int, z, scale=None):
        """What head ``head`` of ``layer`` writes into the residual, ``(N, T, d)``, from its slice
        ``z`` ``(N, T, d_h)``; ``scale`` = :meth:`source_scale` (post-norm blocks)."""
        out = z @ self.source_weight(layer, head)
        if scale is None:
            if self.post_norm(layer) is not None:
                raise InputError(f"{self.family}: a head's output through the post-attention "
                                 f"norm needs the layer's clean scale (source_scale)")
            return out
        return out * scale

    def _scale(self, layer: int, clean, scale):
        if scale is None and self.post_norm(layer) is not None:
            if clean is None:
                raise InputError(f"{self.family}: a head's share through the post-attention "
                                 f"norm needs the layer's clean attention output or scale")
            scale = self.source_scale(layer, clean)
        return scale

    def source_contribution(self, layer: int, head: int, z, clean=None, *, scale=None):
        """Head ``head``'s share ``(N, T, d)`` of :meth:`contribution_module`'s output from ``z``;
        ``clean`` (or its ``scale``, :meth:`source_scale`) for post-norm blocks. Equals
        :meth:`source_output` but for :meth:`contribution_factor`; all heads' shares plus
        :meth:`contribution_bias` sum to the module's output."""
        out = z @ self._o(layer, head)
        scale = self._scale(layer, clean, scale)
        return out if scale is None else out * scale

    def contribution_bias(self, layer: int, clean=None, *, scale=None):
        """The part of :meth:`contribution_module`'s output no head writes (the output
        projection's bias, through the post-norm's gain and clean scale), or None."""
        b = self.output_projection(layer).bias
        post = self.post_norm(layer)
        if b is None or post is None:
            return b
        g = norm_spec(post)[1]
        b = b if g is None else b * g.to(b.dtype)
        return b * self._scale(layer, clean, scale)

    def fold_applies(self, layer: int) -> bool:
        """Whether :class:`.fold.Fold` can fold the input norm of receiver layer ``layer`` (a
        known norm and a per-head QK-norm); OLMo-2/3 fold in projection space instead."""
        spec = self.norm_spec(layer)
        return spec is not None and spec[0] != "none" and self.spec["qk"] != "whole"


__all__ = ["ENCODERS", "LLAMA_FAMILY", "SUPPORTED", "HeadModel", "check_family", "norm_spec"]
