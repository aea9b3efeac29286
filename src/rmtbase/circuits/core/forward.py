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

Families (:data:`.families.TASK_FAMILIES`): pre-norm decoders whose block is ``x +
attn(norm(x)) + mlp(norm'(·))`` with one output projection, and post-norm blocks (Gemma-2/3,
OLMo-2) whose attention output passes a norm ``P`` before the residual add, ``P(y) = g ⊙ y /
rms(y)``: there a head's output is its share of ``P(y)``, ``(z_h W_O[h]) ⊙ g / rms(y)`` with
``y`` the layer's attention output in the same run (:meth:`.heads.HeadModel.source_output`), so
the heads' outputs add up to what the block adds; the MLP's own post-norm is part of the MLP.
Gemma-2's final logit soft-cap is applied. Residual multipliers (Granite) are refused."""

from __future__ import annotations

from functools import partial

import numpy as np

from ...errors import InputError, ModelError
from .edge_sets import EdgeSets, copies
from .edge_sets import delta as edge_delta
from .families import check_family
from .graph import Graph
from .heads import HeadModel

_MLP_NORMS = ("ln_2", "post_attention_layernorm")
#: A post-norm block's MLP input norm (none: identity) and output norm.
_PRE_FFW, _POST_FFW = "pre_feedforward_layernorm", "post_feedforward_layernorm"
_FINAL_NORMS = ("ln_f", "norm", "final_layer_norm", "final_layernorm")



def config_graph(config) -> Graph:
    """The task graph of a model from its ``config`` alone (:class:`.graph.Graph`)."""
    from .families import SPECS, parallel, text_config

    tc = text_config(config)
    return Graph(int(tc.num_hidden_layers), int(tc.num_attention_heads),
                 parallel(tc, SPECS[config.model_type]))


class _Stop(Exception):
    pass


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


class TaskModel:
    """A causal LM ``net`` (transformers, with its output embeddings) on the task graph:
    ``hm`` (:class:`.heads.HeadModel`), ``graph`` (:class:`.graph.Graph`), :meth:`embed`,
    :meth:`run`. One-line :class:`~rmtbase.errors.InputError` for a family outside
    :data:`.families.TASK_FAMILIES` or one with a residual multiplier, or a model without an
    unembedding."""

    def __init__(self, net):
        mt = net.config.model_type
        check_family(net.config, task=True)
        hm = HeadModel(net)
        self.softcap = getattr(net.config, "final_logit_softcapping", None)
        self.net, self.hm = net, hm
        self.head = net.get_output_embeddings() if hasattr(net, "get_output_embeddings") \
            else None
        if self.head is None:
            raise InputError(f"{mt}: this model has no unembedding (load it as a causal LM)")
        base = getattr(net, "base_model", net)
        self.final = _first(base, _FINAL_NORMS) or _first(getattr(base, "decoder", base),
                                                           _FINAL_NORMS)
        if self.final is None:
            raise InputError(f"{mt}: cannot find the final norm")
        self.parallel = hm.parallel(0)
        self.mlps, self.mlp_norms, self.mlp_posts = [], [], []
        for li, layer in enumerate(hm.layers):
            mlp = getattr(layer, "mlp", None)
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
            self.mlps.append(_fused(mlp))
            self.mlp_norms.append(norm)
            self.mlp_posts.append(post)
        self.graph = Graph(hm.n_layers, hm.n_heads, self.parallel, d_model=hm.d, heads=hm)

    # embeddings --------------------------------------------------------------------------
    def embed(self, ids):
        """``(n, T, d)`` float: what enters layer 0 for token ids ``ids`` ``(n, T)`` (positions
        ``0 … T − 1``), read by a pre-hook on the first block."""
        import torch

        got = {}

        def hook(_mod, args, kwargs):
            got["x"] = (args[0] if args else kwargs["hidden_states"]).detach()
            raise _Stop

        h = self.hm.layers[0].register_forward_pre_hook(hook, with_kwargs=True)
        try:
            x = torch.as_tensor(ids)
            with torch.no_grad():
                self.net(input_ids=x, attention_mask=torch.ones_like(x))
        except _Stop:
            pass
        finally:
            h.remove()
        return got["x"]

    def readout(self, x):
        """The positions the metric reads of the logits' residual ``x`` ``(n, T, d)``: the
        last, ``(n, d)``."""
        return x[:, -1]

    # the graph forward ---------------------------------------------------------------------
    def _inputs(self, resid, dsum, st, diffs, removed, leaves, sets=None):
        """``(R, n, T, d)`` the stage's receiver inputs (module docstring): ``x − Σ_removed
        (o_s − c_s)``, or where fewer edges are kept than removed the same as ``x − D +
        Σ_kept (o_s − c_s)``, ``D = Σ_s (o_s − c_s)`` over the stage's senders (``dsum``).
        ``diffs(cols)``: ``(len(cols), n·T·d)`` the senders' ``o_s − c_s``. Only the receivers
        with a sparse-side edge are summed, as one matrix product. ``sets``: ``removed`` is
        ``(R, S, K)``, a column per edge set (:meth:`run_sets`)."""
        import torch

        r_count = len(st.receivers)
        if removed is None:
            x = resid.expand(r_count, *resid.shape)
        else:
            keep = ~removed
            sparse, sign = (keep, 1.0) if keep.sum() < removed.sum() else (removed, -1.0)
            base = resid - dsum if sign > 0 else resid
            x = base.expand(r_count, *resid.shape)
            other = tuple(range(2, sparse.ndim))  # positions (one set) or sets (a batch)
            rows = np.flatnonzero(sparse.any((1, *other)))
            if rows.size:
                cols = np.flatnonzero(sparse.any((0, *other)))
                diff = diffs(cols)
                w = torch.as_tensor(sparse[np.ix_(rows, cols)], dtype=diff.dtype)
                if other and sets:  # Σ_s w[r, s, k] (o_s − c_s)[k-th set's prompts]
                    upd = torch.einsum("rck,ckm->rkm", w, diff.view(cols.size, sets, -1))
                    upd = upd.reshape(rows.size, *resid.shape)
                elif other:  # Σ_s w[r, s, t] (o_s − c_s)[n, t, :]
                    upd = torch.einsum("rct,cntd->rntd", w, diff.view(cols.size, *resid.shape))
                else:
                    upd = (w @ diff).view(rows.size, *resid.shape)
                if rows.size == r_count:
                    x = x + upd if sign > 0 else x - upd
                else:
                    x = x.clone().index_add_(0, torch.as_tensor(rows), upd, alpha=sign)
        if leaves is not None:  # ∂m/∂x kept on x itself: no zero leaf, no materialised sum
            if x.requires_grad:
                x.retain_grad()
            else:
                x = x.detach().requires_grad_()
            leaves.append(x)
        return x

    def run(self, emb, *, cf=None, kept=None, grad: bool = False, record: bool = False,
            resume=None):
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
        state at every stage's start and that buffer; ``resume=(checkpoint, stage)`` starts
        at ``stage`` from a recorded run of the same ``emb`` and ``cf`` (with every edge kept,
        or any edge set), exactly as a run whose ``kept`` equals the recorded run's before
        ``stage`` would compute it
        (its ``"outs"`` are ``None`` before that stage)."""
        import torch

        g, hm = self.graph, self.hm
        sets = kept.k if isinstance(kept, EdgeSets) else None
        blocks = None if kept is None else self._blocks(kept, cf, emb.shape[1])
        if (record or resume is not None) and (blocks is None or grad):
            raise InputError("record and resume need an edge set and no gradient")
        leaves = [] if grad else None
        n_send = len(g.senders)
        emb = copies(emb, sets)  # the prompts once per set, the k-th set's copy k-th
        delta = partial(edge_delta, sets=sets)
        buf = None
        if blocks is not None and not grad:
            buf = torch.empty((n_send, *emb.shape), dtype=emb.dtype)

        if buf is not None:
            def diffs(cols):
                flat = buf[:st.n_senders].reshape(st.n_senders, -1)
                return flat if cols.size == st.n_senders else flat[torch.as_tensor(cols)]
        else:
            def diffs(cols):
                return torch.stack([delta(outs[int(s)], cf[int(s)]) for s in cols]).flatten(1)

        H = hm.n_heads
        first = 0
        if resume is not None:
            ck, first = resume
            state = ck["stages"][first]
            resid, mlp_resid, dsum, mlp_dsum = (copies(state[k], sets) for k in (
                "resid", "mlp_resid", "dsum", "mlp_dsum"))
            n_out = state["n_out"]
            buf[:n_out] = copies(ck["buffer"][:n_out], sets, axis=1)
            outs = [None] * n_out
        else:
            outs, n_out = [emb], 1
            resid = mlp_resid = emb
            dsum = mlp_dsum = None
            if blocks is not None:  # Σ (o_s − c_s) over senders so far
                dsum = delta(emb, cf[0])
                if buf is not None:
                    buf[0] = dsum
        stages = [] if record else None
        ctx = torch.enable_grad() if grad else torch.no_grad()
        with ctx:
            for si in range(first, len(g.stages)):
                st = g.stages[si]
                if record:
                    stages.append({"resid": resid, "mlp_resid": mlp_resid, "dsum": dsum,
                                   "mlp_dsum": mlp_dsum, "n_out": n_out})
                rem = None if blocks is None or not blocks[si].any() else blocks[si]
                if st.kind == "attn":
                    li = st.layer
                    x = self._inputs(resid, dsum, st, diffs, rem, leaves, sets)
                    xn = hm.norm(li)(x)
                    zs = []
                    for h in range(H):
                        q = hm.query(li, h, xn[h])
                        k = hm.key(li, h, xn[H + h])
                        v = hm.value(li, h, xn[2 * H + h])
                        zs.append(hm.pattern(li, q, k, head=h).to(v.dtype) @ v)
                    new, b = self._head_outputs(li, zs)
                    attn_sum = torch.stack(new).sum(0) + (0 if b is None else b)
                    mlp_dsum = dsum
                    if dsum is not None:
                        heads = [delta(o, c) for o, c in zip(new, cf[n_out:n_out + H],
                                                             strict=True)]
                        if buf is not None:
                            for j, dh in enumerate(heads):
                                buf[n_out + j] = dh
                        dsum = dsum + sum(heads)
                        mlp_dsum = mlp_dsum if self.parallel else dsum
                    outs += new
                    n_out += H
                    mlp_resid = resid if self.parallel else resid + attn_sum
                    resid = resid + attn_sum
                elif st.kind == "mlp":
                    li = st.layer
                    x = self._inputs(mlp_resid, mlp_dsum, st, diffs, rem, leaves, sets)
                    y = self.mlps[li](self.mlp_norms[li](x[0]))
                    y = y[0] if isinstance(y, tuple) else y
                    if self.mlp_posts[li] is not None:
                        y = self.mlp_posts[li](y)
                    if dsum is not None:
                        dy = delta(y, cf[n_out])
                        if buf is not None:
                            buf[n_out] = dy
                        dsum = dsum + dy
                    outs.append(y)
                    n_out += 1
                    resid = resid + y
                else:
                    x = self._inputs(resid, dsum, st, diffs, rem, leaves, sets)
                    logits = self.head(self.final(self.readout(x[0])))
                    if self.softcap:
                        logits = torch.tanh(logits / self.softcap) * self.softcap
        out = {"logits": logits, "outs": outs, "leaves": leaves}
        if record:
            out["checkpoint"] = {"stages": stages, "buffer": buf}
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
            return [hm.source_output(li, h, z) for h, z in enumerate(zs)], \
                hm.output_projection(li).bias
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
