"""The model recomputed on the graph (:mod:`.graph`): every receiver reads its own residual.

The residual a receiver ``r`` reads is the sum of its senders' outputs plus the constant
biases: ``x_r = b + Σ_{s→r} o_s``, ``o_input`` the embeddings (what enters layer 0), ``o_{a l.h
h} = z_h W_O[h]`` (:meth:`.heads.HeadModel.source_output`), ``o_{m l} = MLP_l(norm_l(x_{m l}))``;
the attention output projection's bias joins ``b``. With an edge set ``C`` kept, the rest
carries the counterfactual ``c_s`` (the sender's output on the corrupted prompt, its mean or
zero):

    x_r = b + Σ_{s→r ∈ C} o_s + Σ_{s→r ∉ C} c_s = x_r^run − Σ_{s→r ∉ C} (o_s − c_s),

``o_s`` the sender's output in this same run (Conmy et al. 2023; Hanna et al. 2024). A head
computes ``q``, ``k``, ``v`` from its three own residuals (:meth:`.heads.HeadModel.query`, …,
each through the layer's input norm) and ``z = softmax(q kᵀ …) v`` (:meth:`.heads.HeadModel
.pattern`); a query head of a GQA group recomputes the group's key and value for itself.
With every edge kept this is the model's forward; :meth:`TaskModel.check` compares its
logits with the transformers forward's and refuses a model where they differ.

Families (:data:`.families.SUPPORTED`): pre-norm blocks ``x + attn(norm(x)) + mlp(norm'(·))``,
and post-norm ones (Gemma-2/3, OLMo-2) adding ``P(y) = g ⊙ y / rms(y)`` of the attention output
``y``: a head's output is its share ``(z_h W_O[h]) ⊙ g / rms(y)``, ``rms(y)`` of the same run
(:meth:`.heads.HeadModel.source_output`); an MLP's post-norm is part of the MLP. Gemma-2's
logit soft-cap; OPT's MLP ``fc2(act(fc1(·)))``; Bloom's given a zero residual; Granite's
``r · attn`` and ``r · mlp`` (``residual_multiplier``), logits over ``logits_scaling``."""

from __future__ import annotations

import numpy as np

from ...errors import InputError, ModelError
from .edge_sets import EdgeSets
from .families import check_family
from .graph import Graph
from .heads import HeadModel

_MLP_NORMS = ("ln_2", "post_attention_layernorm", "final_layer_norm")
#: A post-norm block's MLP input norm (none: identity) and output norm.
_PRE_FFW, _POST_FFW = "pre_feedforward_layernorm", "post_feedforward_layernorm"
_FINAL_NORMS = ("ln_f", "norm", "final_layer_norm", "final_layernorm")



def config_graph(config) -> Graph:
    """The task graph of a model from its ``config`` alone (:class:`.graph.Graph`)."""
    from .families import SPECS, parallel, text_config

    tc = text_config(config)
    return Graph(int(tc.num_hidden_layers), int(tc.num_attention_heads),
                 parallel(tc, SPECS[config.model_type]))


def _first(obj, names):
    for n in names:
        m = getattr(obj, n, None)
        if m is not None:
            return m
    return None


def _fused(mlp):
    """``mlp``, or for GPT-2's ``gelu_new`` MLP (``c_fc``, ``NewGELUActivation``, ``c_proj``;
    dropout idle in eval) the same map with torch's fused tanh GELU, which computes the same
    formula ``½x(1 + tanh(√(2/π)(x + 0.044715x³)))`` in one kernel (equal to float rounding)."""
    if type(getattr(mlp, "act", None)).__name__ != "NewGELUActivation" or \
            not all(hasattr(mlp, n) for n in ("c_fc", "c_proj")):
        return mlp
    import torch.nn.functional as F

    return lambda x: mlp.c_proj(F.gelu(mlp.c_fc(x), approximate="tanh"))


def _layer_mlp(layer, mult: float):
    """``layer``'s MLP of its normed input times ``mult`` (module docstring); None: none."""
    import inspect

    import torch

    mlp = getattr(layer, "mlp", None)
    if mlp is None and all(hasattr(layer, n) for n in ("fc1", "fc2", "activation_fn")):
        f = lambda x: layer.fc2(layer.activation_fn(layer.fc1(x)))  # noqa: E731
    elif mlp is not None and "residual" in inspect.signature(mlp.forward).parameters:
        f = lambda x: mlp(x, torch.zeros_like(x))  # noqa: E731
    elif mlp is not None:
        f = _fused(mlp)
    else:
        return None
    return f if mult == 1.0 else (lambda x: f(x) * mult)


def _final_norm(decoder):
    """The final norm beside ``decoder``'s layers (OPT's followed by its ``project_out``)."""
    final, out = _first(decoder, _FINAL_NORMS), getattr(decoder, "project_out", None)
    return final if final is None or out is None else (lambda x: out(final(x)))


class TaskModel:
    """A causal LM ``net`` (transformers, with its output embeddings) on the task graph:
    ``hm`` (:class:`.heads.HeadModel`), ``graph`` (:class:`.graph.Graph`), :meth:`embed`,
    :meth:`run`. One-line :class:`~rmtbase.errors.InputError` for a family outside
    :data:`.families.SUPPORTED`, or a model without an
    unembedding (``logits=False``: a base model, run only up to the logits' stage)."""

    #: What the logits are divided by (Granite's ``logits_scaling``).
    logit_scale = 1.0

    def __init__(self, net, *, logits: bool = True):
        mt = net.config.model_type
        check_family(net.config)
        hm = HeadModel(net)
        self.softcap = getattr(net.config, "final_logit_softcapping", None)
        self.logit_scale = float(getattr(net.config, "logits_scaling", 1.0) or 1.0) \
            if mt == "granite" else 1.0
        self.net, self.hm = net, hm
        self.head = net.get_output_embeddings() if hasattr(net, "get_output_embeddings") \
            else None
        if self.head is None and logits:
            raise InputError(f"{mt}: this model has no unembedding (load it as a causal LM)")
        self.final = _final_norm(hm.decoder)
        if self.final is None and logits:
            raise InputError(f"{mt}: cannot find the final norm")
        self.parallel = hm.parallel(0)
        self.mlps, self.mlp_norms, self.mlp_posts = [], [], []
        for li, layer in enumerate(hm.layers):
            mlp = _layer_mlp(layer, hm.contribution_factor(li))
            if mlp is None:
                raise InputError(f"{mt}: layer {li} has no mlp module")
            post = None
            if hm.post_norm(li) is not None:  # post-norm block: its own MLP norms
                norm = getattr(layer, _PRE_FFW, None) or hm._identity
                post = getattr(layer, _POST_FFW, None)
            else:
                norm = _first(layer, _MLP_NORMS)
            if norm is None and self.parallel:
                norm = hm.norm(li)
            if norm is None:
                raise InputError(f"{mt}: cannot find layer {li}'s MLP norm")
            self.mlps.append(mlp)
            self.mlp_norms.append(norm)
            self.mlp_posts.append(post)
        self.graph = Graph(hm.n_layers, hm.n_heads, self.parallel, d_model=hm.d, heads=hm)

    # embeddings --------------------------------------------------------------------------
    def embed(self, ids):
        """``(n, T, d)`` float: what enters layer 0 for token ids ``ids`` ``(n, T)`` (positions
        ``0 … T − 1``), read by a pre-hook on the first block."""
        import torch

        from .hooks import Stop, forward, hooked

        got = {}

        def hook(_mod, args, kwargs):
            got["x"] = (args[0] if args else kwargs["hidden_states"]).detach()
            raise Stop

        with hooked([(self.hm.layers[0], hook, "pre_kwargs")]), torch.no_grad():
            forward(self.net, ids)
        return got["x"]

    def readout(self, x):
        """The positions the metric reads of the logits' residual ``x`` ``(n, T, d)``: the
        last, ``(n, d)``."""
        return x[:, -1]

    def unembed(self, x):
        """Logits of residuals ``x`` ``(…, d)``: the final norm, the unembedding (Granite's
        divided by ``logits_scaling``), the final soft-cap (Gemma-2's) where there is one."""
        import torch

        logits = self.head(self.final(x))
        logits = logits if self.logit_scale == 1.0 else logits / self.logit_scale
        return torch.tanh(logits / self.softcap) * self.softcap if self.softcap else logits

    # the graph forward ---------------------------------------------------------------------
    def run(self, emb, *, cf=None, kept=None, grad: bool = False, record: bool = False,
            resume=None, frozen=None):
        """One graph forward from embeddings ``emb`` ``(n, T, d)``: ``{"logits"`` ``(n, V)`` at
        the last position (:meth:`readout`), ``"outs"`` the senders' outputs, ``"leaves"``
        (``grad``: each stage's ``(R, n, T, d)`` receiver inputs, their ``.grad`` kept after a
        backward pass: ``∂metric/∂x_r``)``}``.
        ``kept``: ``(n_edges,)`` bool (None: every edge), the others read ``cf`` (a list of
        the senders' counterfactual outputs, each ``(n, T, d)`` or broadcastable); or
        ``(n_edges, T)`` bool, an edge kept or removed position by position
        (:meth:`.graph.Graph.blocks`); or :class:`.edge_sets.EdgeSets` (:meth:`run_sets`).

        Without ``grad`` an edge set's run keeps every sender's ``o_s − c_s`` in one
        ``(S, n, T, d)`` buffer, written once. ``record``: also return ``"checkpoint"``, the
        state at every stage's start and that buffer (None without an edge set);
        ``resume=(checkpoint, stage)`` starts at ``stage`` from a recorded edge-set run of the
        same ``emb`` and ``cf``, exactly as a run whose ``kept`` equals the recorded run's before
        ``stage`` would compute it (its ``"outs"`` are ``None`` before that stage). ``frozen``: a
        :class:`.stages.Frozen`; ``"attn_sums"``: what each attention stage added."""
        import torch

        from .stages import Frozen, Pass

        sets = kept.k if isinstance(kept, EdgeSets) else None
        blocks = None if kept is None else self._blocks(kept, cf, emb.shape[1])
        if (record or resume is not None) and grad:
            raise InputError("record and resume take no gradient")
        if resume is not None and blocks is None:
            raise InputError("resume needs an edge set")
        frozen = frozen or Frozen()
        if grad and (frozen.layers or frozen.stop is not None):  # no leaf for every stage
            raise InputError("frozen layers and a stop take no gradient")
        run = Pass(self, emb, cf, blocks, sets, grad, frozen)
        first = run.start(resume)
        stages = [] if record else None
        with torch.enable_grad() if grad else torch.no_grad():
            run.through(first, frozen.stop, stages)
        out = {"logits": run.logits, "outs": run.outs, "leaves": run.leaves,
               "attn_sums": run.attn_sums}
        if record:
            out["checkpoint"] = {"stages": stages, "buffer": run.buf}
        return out

    def _blocks(self, kept, cf, positions: int):
        """Each stage's removed edges (:meth:`.graph.Graph.blocks`) of ``kept``, checked."""
        if cf is None:
            raise InputError("an edge set needs the senders' counterfactual outputs")
        if isinstance(kept, EdgeSets):
            return [~b for b in self.graph.blocks(np.transpose(kept.kept))]
        if np.ndim(kept) == 2 and np.shape(kept)[1] != positions:
            raise InputError(f"a per-position edge set has {np.shape(kept)[1]} positions, "
                             f"the prompts {positions}")
        return [~b for b in self.graph.blocks(kept)]

    def run_sets(self, emb, cf, kept_sets, *, resume=None):
        """``(K, n, …)`` logits of ``K`` edge sets ``kept_sets`` ``(K, n_edges)`` in one
        forward (:mod:`.edge_sets`); ``cf``, ``resume`` as :meth:`run`'s, for the ``n`` prompts
        once. Each set's logits are its own :meth:`run`'s up to float rounding."""
        sets = EdgeSets(kept_sets, self.graph.n_edges)
        logits = self.run(emb, cf=cf, kept=sets, resume=resume)["logits"]
        return logits.view(sets.k, -1, *logits.shape[1:])

    def _head_outputs(self, li: int, zs):
        """(each head's output ``(n, T, d)``, the bias the block adds besides) of layer ``li``
        from the heads' ``z`` (module docstring: a post-norm block's scale is its own
        run's)."""
        import torch

        hm = self.hm
        if hm.post_norm(li) is None:
            b, r = hm.output_projection(li).bias, hm.contribution_factor(li)
            return ([hm.source_output(li, h, z) for h, z in enumerate(zs)],
                    b if b is None or r == 1.0 else b * r)
        scale = hm.source_scale(li, hm.output_projection(li)(torch.cat(zs, -1)))
        return ([hm.source_output(li, h, z, scale=scale) for h, z in enumerate(zs)],
                hm.contribution_bias(li, scale=scale))

    def first_removal(self, kept) -> int:
        """The first stage (:attr:`.graph.Graph.stages`) with an edge of ``kept`` removed;
        the number of stages when none is."""
        return self.first_difference(kept, self.graph.full())

    def first_difference(self, kept, base) -> int:
        """The first stage where edge set ``kept`` differs from ``base`` (an ``(n_edges,)``
        set, broadcast over a per-position set's positions); the number of stages when
        nowhere."""
        kept, base = np.asarray(kept, dtype=bool), np.asarray(base, dtype=bool)
        if kept.ndim == 2:
            base = base[:, None]
        for si, st in enumerate(self.graph.stages):
            sl = slice(st.offset, st.offset + st.size)
            if not (kept[sl] == base[sl]).all():
                return si
        return len(self.graph.stages)

    def model_logits(self, ids):
        """``(n, V)`` the transformers forward's logits at the last position."""
        import torch

        x = torch.as_tensor(ids)
        with torch.no_grad():
            return self.net(input_ids=x, attention_mask=torch.ones_like(x)).logits[:, -1]

    #: The relative logit difference :meth:`check` accepts by default.
    CHECK_RTOL = 1e-3

    def check(self, ids, *, rtol: float | None = None) -> float:
        """The largest ``|graph − model|`` logit over ``ids`` (:meth:`model_logits`), relative
        to the largest ``|logit|``; :class:`~rmtbase.errors.ModelError` above ``rtol`` (None:
        :data:`CHECK_RTOL`)."""
        rtol = self.CHECK_RTOL if rtol is None else rtol
        want = self.model_logits(ids).double()
        got = self.run(self.embed(ids))["logits"].double()
        err = float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))
        if not err <= rtol:
            raise ModelError(self._mismatch(err))
        return err

    def _mismatch(self, err: float) -> str:
        """The refusal of :meth:`check` at relative difference ``err``."""
        return (f"{self.net.config.model_type}: the graph forward's logits differ from the "
                f"model's by {err:.2g} of their scale; this model's block is not one the task "
                f"graph follows")


__all__ = ["TaskModel", "config_graph"]
