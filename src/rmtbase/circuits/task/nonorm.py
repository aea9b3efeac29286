"""A transformer without norms, given as plain weights, on the task graph (:mod:`..core.graph`).

Compiled transformers (tracr, Lindner et al. 2023, arXiv:2301.05062) have no layer norms, ReLU
MLPs, learned token and position embeddings and a linear unembedding. :class:`NoNormWeights`
holds such a model as arrays in TransformerLens's layout (:meth:`NoNormWeights
.from_state_dict` reads a ``HookedTransformer`` state dict saved as plain arrays, e.g. an
``.npz``; rmtbase does not import TransformerLens), and :class:`NoNormModel` runs it through
:meth:`..core.forward.TaskModel.run`, so the search (attribution, exact patching,
faithfulness) takes it as it takes a transformers model. The forward, for ids ``t`` ``(n, T)``:

    x⁰ = W_E[t] + W_pos[:T]
    z_h = softmax(q_h k_hᵀ / √d_h + mask) v_h,  q_h = x W_Q[l, h] + b_Q[l, h]  (k, v alike)
    x ← x + Σ_h z_h W_O[l, h] + b_O[l]
    x ← x + ReLU(x W_in[l] + b_in[l]) W_out[l] + b_out[l]
    logits = x W_U + b_U

``mask`` is ``−∞`` above the diagonal when ``causal``, else 0 (tracr compiles bidirectional
attention by default). :meth:`NoNormModel.model_logits` is this forward written out on its own
(no graph), and :meth:`NoNormModel.check` compares the graph forward with it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import InputError
from ..core.forward import TaskModel
from ..core.graph import Graph

#: Per-layer TransformerLens names (``blocks.{l}.…``) and the field each fills.
_LAYER = {"attn.W_Q": "w_q", "attn.b_Q": "b_q", "attn.W_K": "w_k", "attn.b_K": "b_k",
          "attn.W_V": "w_v", "attn.b_V": "b_v", "attn.W_O": "w_o", "attn.b_O": "b_o",
          "mlp.W_in": "w_in", "mlp.b_in": "b_in", "mlp.W_out": "w_out", "mlp.b_out": "b_out"}


@dataclass(frozen=True)
class NoNormWeights:
    """A no-norm transformer (module docstring), float64 arrays: ``embed`` ``(V_in, d)``,
    ``pos_embed`` ``(n_ctx, d)``; per layer, stacked over ``L`` layers of ``H`` heads of width
    ``d_h`` and MLP width ``m``: ``w_q``, ``w_k``, ``w_v`` ``(L, H, d, d_h)``, ``b_q``, ``b_k``,
    ``b_v`` ``(L, H, d_h)``, ``w_o`` ``(L, H, d_h, d)``, ``b_o`` ``(L, d)``, ``w_in`` ``(L, d,
    m)``, ``b_in`` ``(L, m)``, ``w_out`` ``(L, m, d)``, ``b_out`` ``(L, d)``; ``unembed`` ``(d,
    V)``, ``b_u`` ``(V,)``; ``causal`` attention or not."""

    embed: np.ndarray
    pos_embed: np.ndarray
    w_q: np.ndarray
    b_q: np.ndarray
    w_k: np.ndarray
    b_k: np.ndarray
    w_v: np.ndarray
    b_v: np.ndarray
    w_o: np.ndarray
    b_o: np.ndarray
    w_in: np.ndarray
    b_in: np.ndarray
    w_out: np.ndarray
    b_out: np.ndarray
    unembed: np.ndarray
    b_u: np.ndarray
    causal: bool = False

    def __post_init__(self):
        d = self.embed.shape[1]
        L, H, _, dh = self.w_q.shape
        m = self.w_in.shape[-1]
        want = {"pos_embed": (self.pos_embed.shape[0], d), "w_q": (L, H, d, dh),
                "w_k": (L, H, d, dh), "w_v": (L, H, d, dh), "b_q": (L, H, dh),
                "b_k": (L, H, dh), "b_v": (L, H, dh), "w_o": (L, H, dh, d), "b_o": (L, d),
                "w_in": (L, d, m), "b_in": (L, m), "w_out": (L, m, d), "b_out": (L, d),
                "unembed": (d, self.unembed.shape[1]), "b_u": (self.unembed.shape[1],)}
        for name, shape in want.items():
            got = tuple(np.shape(getattr(self, name)))
            if got != shape:
                raise InputError(f"no-norm weights: {name} is {got}, expected {shape}")

    @property
    def n_layers(self) -> int:
        return int(self.w_q.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.w_q.shape[1])

    @classmethod
    def from_state_dict(cls, sd, *, causal: bool) -> NoNormWeights:
        """From a TransformerLens ``HookedTransformer`` state dict of arrays (``embed.W_E``,
        ``pos_embed.W_pos``, ``blocks.{l}.attn.W_Q`` …, ``unembed.W_U``, ``unembed.b_U``); a
        missing ``b_U`` is zero. One-line refusal of a missing array or a norm's weights."""
        keys = set(sd)
        norms = sorted(k for k in keys if ".ln" in k or k.startswith("ln_final"))
        if norms:
            raise InputError(f"no-norm weights: the state dict has norm weights ({norms[0]})")
        layers = sorted({int(k.split(".")[1]) for k in keys if k.startswith("blocks.")})
        if layers != list(range(len(layers))) or not layers:
            raise InputError("no-norm weights: the state dict's blocks are not 0 … L − 1")

        def get(name):
            if name not in keys:
                raise InputError(f"no-norm weights: the state dict lacks {name}")
            return np.asarray(sd[name], dtype=np.float64)

        fields = {f: np.stack([get(f"blocks.{li}.{k}") for li in layers])
                  for k, f in _LAYER.items()}
        w_u = get("unembed.W_U")
        b_u = get("unembed.b_U") if "unembed.b_U" in keys else np.zeros(w_u.shape[1])
        return cls(embed=get("embed.W_E"), pos_embed=get("pos_embed.W_pos"), unembed=w_u,
                   b_u=b_u, causal=bool(causal), **fields)


class _Linear:
    """``x ↦ x W + b`` with ``.bias`` (the attention output's, read by the graph forward)."""

    def __init__(self, w, b):
        self.weight, self.bias = w, b

    def __call__(self, x):
        return x @ self.weight + self.bias


class _Mlp:
    def __init__(self, w_in, b_in, w_out, b_out):
        self.w_in, self.b_in, self.w_out, self.b_out = w_in, b_in, w_out, b_out

    def __call__(self, x):
        import torch

        return torch.relu(x @ self.w_in + self.b_in) @ self.w_out + self.b_out


def _identity(x):
    return x


class _Heads:
    """What :meth:`~..core.forward.TaskModel.run` reads of :class:`~..core.heads.HeadModel`,
    for :class:`NoNormWeights` as torch tensors ``t``: no norm, per-head projections with
    biases, ``softmax(q kᵀ / √d_h + mask)``."""

    def __init__(self, t: dict, causal: bool):
        self.t, self.causal = t, causal
        self.n_layers, self.n_heads, self.d, self.d_head = (int(x) for x in t["w_q"].shape)

    def norm(self, layer: int):
        return _identity

    def post_norm(self, layer: int):
        return None

    def contribution_factor(self, layer: int) -> float:  # no residual multiplier
        return 1.0

    def _proj(self, x, layer, head, w, b):
        return x @ self.t[w][layer, head] + self.t[b][layer, head]

    def group(self, head: int) -> int:  # a key and value per query head
        return int(head)

    def query(self, layer, head, xn):
        return self._proj(xn, layer, head, "w_q", "b_q")

    def key(self, layer, head, xn):
        return self._proj(xn, layer, head, "w_k", "b_k")

    def value(self, layer, head, xn):
        return self._proj(xn, layer, head, "w_v", "b_v")

    def pattern(self, layer, q, k, head=None):
        import torch

        s = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
        if self.causal:
            t = s.shape[-1]
            upper = torch.ones(t, t, dtype=torch.bool, device=s.device).triu(1)
            s = s.masked_fill(upper, float("-inf"))
        return torch.softmax(s, dim=-1)

    def source_output(self, layer, head, z):
        return z @ self.t["w_o"][layer, head]

    def output_projection(self, layer):
        return _Linear(None, self.t["b_o"][layer])


class NoNormModel(TaskModel):
    """:class:`NoNormWeights` ``w`` on the task graph, in ``dtype`` (a torch dtype, float32 by
    default): ``graph``, :meth:`embed`, :meth:`run` (:meth:`~..core.forward.TaskModel.run`,
    sequential blocks), :meth:`model_logits`, :meth:`check`. ``read_from``: None: the metric reads
    the last position (logits ``(n, V)``); an int ``s``, it reads positions ``s … T − 1`` (logits
    ``(n, T − s, V)``, answers ``(n, T − s)``, :func:`..core.metric.metric`), as auto-circuit's
    tracr tasks read every position after BOS (``s = 1``)."""

    def __init__(self, w: NoNormWeights, dtype=None, *, read_from: int | None = None):
        import torch

        dtype = dtype or torch.float32
        self.read_from = None if read_from is None else int(read_from)
        t = {f: torch.as_tensor(np.asarray(getattr(w, f)), dtype=dtype)
             for f in ("embed", "pos_embed", "unembed", "b_u", *_LAYER.values())}
        self.w, self.t, self.net = w, t, None
        self.hm = _Heads(t, w.causal)
        self.parallel = False
        self.mlps = [_Mlp(t["w_in"][li], t["b_in"][li], t["w_out"][li], t["b_out"][li])
                     for li in range(w.n_layers)]
        self.mlp_norms = [_identity] * w.n_layers
        self.mlp_posts = [None] * w.n_layers
        self.softcap = None
        self.final = _identity
        self.head = _Linear(t["unembed"], t["b_u"])
        self.graph = Graph(w.n_layers, w.n_heads, parallel=False, d_model=self.hm.d)

    def readout(self, x):
        """Positions ``read_from …`` of ``x`` ``(n, T, d)``, or its last (class docstring)."""
        return x[:, -1] if self.read_from is None else x[:, self.read_from:]

    def embed(self, ids):
        """``(n, T, d)``: token plus position embeddings of ids ``(n, T)``; one-line refusal of
        an id outside the vocabulary or a prompt longer than the position table."""
        import torch

        x = torch.as_tensor(np.asarray(ids), dtype=torch.long)
        if x.ndim != 2:
            raise InputError(f"token ids are (n, T), got shape {tuple(x.shape)}")
        v, n_ctx = self.t["embed"].shape[0], self.t["pos_embed"].shape[0]
        if x.numel() and (int(x.min()) < 0 or int(x.max()) >= v):
            raise InputError(f"token ids must lie in 0 … {v - 1}")
        if x.shape[1] > n_ctx:
            raise InputError(f"prompts of {x.shape[1]} tokens; the model takes {n_ctx}")
        return self.t["embed"][x] + self.t["pos_embed"][: x.shape[1]]

    def model_logits(self, ids):
        """``(n, V)`` at the last position (or ``(n, P, V)``, :meth:`readout`) by the plain
        forward (module docstring), all heads of a layer at once, without the graph."""
        import torch

        t, hm = self.t, self.hm
        x = self.embed(ids)
        with torch.no_grad():
            for li in range(hm.n_layers):
                q = torch.einsum("ntd,hde->nhte", x, t["w_q"][li]) + t["b_q"][li][:, None]
                k = torch.einsum("ntd,hde->nhte", x, t["w_k"][li]) + t["b_k"][li][:, None]
                v = torch.einsum("ntd,hde->nhte", x, t["w_v"][li]) + t["b_v"][li][:, None]
                z = hm.pattern(li, q, k) @ v
                x = x + torch.einsum("nhte,hed->ntd", z, t["w_o"][li]) + t["b_o"][li]
                x = x + self.mlps[li](x)
            return self.head(self.readout(x))

    #: :meth:`check` compares the graph with the plain forward above, both this module's.
    CHECK_RTOL = 1e-5

    def _mismatch(self, err: float) -> str:
        return (f"no-norm model: the graph forward's logits differ from the plain forward's by "
                f"{err:.2g} of their scale")


__all__ = ["NoNormModel", "NoNormWeights"]
