"""One run of the task graph's forward (:meth:`.forward.TaskModel.run`), a stage at a time: the
running residuals (``resid``; ``mlp_resid``, what a layer's MLP reads), the sums of the senders'
``o_s − c_s`` so far (``dsum``, ``mlp_dsum``), each sender's own in one buffer, and the
receivers' inputs of a stage (:func:`receiver_inputs`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np

from ...errors import InputError
from .edge_sets import copies
from .edge_sets import delta as edge_delta


class Rows(NamedTuple):
    """``count`` inputs: ``rows`` read ``x`` (None: none; a leaf with a gradient), others ``base``."""

    base: object
    rows: np.ndarray
    x: object
    count: int

    def row(self, r: int):
        hit = np.flatnonzero(self.rows == r)
        return self.x[int(hit[0])] if hit.size else self.base


def first(x):
    """The first receiver's input of a stage's inputs (a tensor or :class:`Rows`)."""
    return x.row(0) if isinstance(x, Rows) else x[0]


def _leaf(x):
    """``x`` with its gradient kept (a leaf where nothing before it takes one)."""
    if x.requires_grad:
        x.retain_grad()
        return x
    return x.detach().requires_grad_()


def receiver_inputs(resid, dsum, st, diffs, removed, leaves, sets=None):
    """``(R, n, T, d)`` the stage's receiver inputs (:mod:`.forward`): ``x − Σ_removed
    (o_s − c_s)``, or where fewer edges are kept than removed the same as ``x − D +
    Σ_kept (o_s − c_s)``, ``D = Σ_s (o_s − c_s)`` over the stage's senders (``dsum``).
    ``diffs(cols)``: ``(len(cols), n·T·d)`` the senders' ``o_s − c_s``. Only the receivers
    with a sparse-side edge are summed, as one matrix product. ``sets``: ``removed`` is
    ``(R, S, K)``, a column per edge set (:meth:`.forward.TaskModel.run_sets`). :class:`Rows`
    where only some receivers have a sparse-side edge (with a gradient: fewer edges kept)."""
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
        rows, upd = np.flatnonzero(sparse.any((1, *other))), None
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
        if rows.size < r_count and (leaves is None or (sign > 0 and not other)):
            xr = None if not rows.size else base + upd if sign > 0 else base - upd
            part = Rows(base, rows, xr if leaves is None or xr is None else _leaf(xr), r_count)
            if leaves is not None:
                leaves.append(part)
            return part
        if rows.size == r_count:
            x = x + upd if sign > 0 else x - upd
        elif rows.size:
            x = x.clone().index_add_(0, torch.as_tensor(rows), upd, alpha=sign)
    if leaves is not None:  # ∂m/∂x kept on x itself: no zero leaf, no materialised sum
        x = _leaf(x)
        leaves.append(x)
    return x


@dataclass(frozen=True)
class Frozen:
    """Held at clean values: ``layers`` ``{layer: (its heads' outputs or None, their sum with
    the bias)}``, not recomputed; ``stop``: the stage whose start ends the run (recorded);
    ``heads`` ``{layer: {head: z}}``: those ``z`` given, the projection recomputed around them;
    ``sum_only``: no edge set reads a head's own output, so a layer keeps only its heads' sum
    (its own projection of their ``z``, post-norm included)."""

    layers: dict = field(default_factory=dict)
    stop: int | None = None
    heads: dict = field(default_factory=dict)
    sum_only: bool = False


class Pass:
    """One forward of ``tm`` from ``emb``: ``cf``, removed ``blocks`` (None: none), ``sets``
    (None: one), ``grad`` (inputs kept as ``leaves``); ``frozen``: a :class:`Frozen`;
    ``attn_sums``: what each attention stage added."""

    def __init__(self, tm, emb, cf, blocks, sets, grad: bool, frozen=None):
        import torch

        self.tm, self.cf, self.blocks, self.sets = tm, cf, blocks, sets
        frozen = frozen or Frozen()
        self.frozen, self.given, self.attn_sums = frozen.layers, frozen.heads, []
        self.leaves = [] if grad else None
        self.sum_only = frozen.sum_only
        self.emb = copies(emb, sets)  # the prompts once per set, the k-th set's copy k-th
        self.delta = partial(edge_delta, sets=sets)
        self.buf = self.logits = None
        self.dl = []  # with a gradient (no buffer): each sender's o_s − c_s, computed once
        if blocks is not None and not grad:
            self.buf = torch.empty((len(tm.graph.senders), *self.emb.shape),
                                   dtype=self.emb.dtype)

    def diffs(self, st, cols):
        """``(len(cols), n·T·d)``: senders ``cols``' ``o_s − c_s`` (of ``st``'s senders)."""
        import torch

        if self.buf is not None:
            flat = self.buf[:st.n_senders].reshape(st.n_senders, -1)
            return flat if cols.size == st.n_senders else flat[torch.as_tensor(cols)]
        return torch.stack([self.dl[int(s)] for s in cols]).flatten(1)

    def _keep_delta(self, s: int, d) -> None:
        """Sender ``s``'s ``o_s − c_s`` into the buffer, or (with a gradient) the list."""
        if self.buf is not None:
            self.buf[s] = d
        else:
            self.dl.append(d)

    def start(self, resume) -> int:
        """Set the state at the first stage (``resume``: a recorded one); that stage."""
        if resume is not None:
            ck, first = resume
            state = ck["stages"][first]
            self.resid, self.mlp_resid, self.dsum, self.mlp_dsum = (copies(state[k], self.sets)
                                                                    for k in ("resid",
                                                                              "mlp_resid",
                                                                              "dsum",
                                                                              "mlp_dsum"))
            self.n_out = state["n_out"]
            self.buf[:self.n_out] = copies(ck["buffer"][:self.n_out], self.sets, axis=1)
            self.outs = [None] * self.n_out
            return first
        self.outs, self.n_out = [self.emb], 1
        self.resid = self.mlp_resid = self.emb
        self.dsum = self.mlp_dsum = None
        if self.blocks is not None:  # Σ (o_s − c_s) over senders so far
            self.dsum = self.delta(self.emb, self.cf[0])
            self._keep_delta(0, self.dsum)
        return 0

    def state(self) -> dict:
        """The state at a stage's start, as a record holds it."""
        return {"resid": self.resid, "mlp_resid": self.mlp_resid, "dsum": self.dsum,
                "mlp_dsum": self.mlp_dsum, "n_out": self.n_out}

    def through(self, first: int, stop: int | None = None, states: list | None = None, *,
                keep: bool = True):
        """Run stages ``first`` to ``stop`` (exclusive; None: all), appending each one's start
        state (and ``stop``'s) to ``states``; ``keep=False``: ``outs`` dropped (no edge set)."""
        for si in range(first, len(self.tm.graph.stages)):
            if states is not None:
                states.append(self.state())
            if si == stop:
                break
            blk = None if self.blocks is None else self.blocks[si]
            self.stage(self.tm.graph.stages[si], None if blk is None or not blk.any() else blk)
            if not keep:
                self.outs = []

    def stage(self, st, rem) -> None:
        """Run stage ``st`` with its removed block ``rem`` (None: nothing removed)."""
        {"attn": self._attn, "mlp": self._mlp}.get(st.kind, self._logits)(st, rem)

    def _in(self, resid, dsum, st, rem):
        return receiver_inputs(resid, dsum, st, partial(self.diffs, st), rem, self.leaves,
                               self.sets)

    def _attn(self, st, rem) -> None:
        tm, hm, li = self.tm, self.tm.hm, st.layer
        H = hm.n_heads
        if li in self.frozen:  # every head at its clean output: nothing recomputed
            outs, attn_sum = self.frozen[li]
            if outs is None and self.dsum is not None:
                raise InputError("an edge set's run reads a frozen layer's heads' outputs")
            new = [None] * H if outs is None else [copies(o, self.sets) for o in outs]
            attn_sum = copies(attn_sum, self.sets)
        else:
            new, attn_sum = self._heads(li, self._in(self.resid, self.dsum, st, rem))
        self.attn_sums.append(attn_sum)
        self.mlp_dsum = self.dsum
        if self.dsum is not None:
            heads = [self.delta(o, c) for o, c in zip(new, self.cf[self.n_out:self.n_out + H],
                                                      strict=True)]
            for j, dh in enumerate(heads):
                self._keep_delta(self.n_out + j, dh)
            self.dsum = self.dsum + sum(heads)
            self.mlp_dsum = self.mlp_dsum if tm.parallel else self.dsum
        self.outs += new
        self.n_out += H
        self.mlp_resid = self.resid if tm.parallel else self.resid + attn_sum
        self.resid = self.resid + attn_sum

    def _heads(self, li: int, x):
        """(each head's output, their sum with the block's bias) of layer ``li`` from its
        receivers' inputs ``x`` ``(3H, n, T, d)``."""
        import torch

        hm, H = self.tm.hm, self.tm.hm.n_heads
        if isinstance(x, Rows):  # the shared input normed once, each row's on its own
            xs = [hm.norm(li)(x.base)] * (3 * H)
            for r, xr in zip(x.rows, () if x.x is None else hm.norm(li)(x.x).unbind(0),
                             strict=True):
                xs[r] = xr
        elif x.stride(0) == 0 and not x.requires_grad:  # one input, no own gradient
            xs = [hm.norm(li)(x[0])] * (3 * H)
        else:
            xs = hm.norm(li)(x).unbind(0)  # one backward for all 3H inputs
        seen: dict = {}  # a GQA group's key and value, once per distinct input

        def group(fn, which, h):
            at = (which, hm.group(h), id(xs[which * H + h]))
            if at not in seen:
                seen[at] = fn(li, h, xs[which * H + h])
            return seen[at]

        zs = []
        for h in range(H):
            q = hm.query(li, h, xs[h])
            k, v = group(hm.key, 1, h), group(hm.value, 2, h)
            zs.append(hm.pattern(li, q, k, head=h).to(v.dtype) @ v)
        for h, z in self.given.get(li, {}).items():
            zs[h] = copies(z, self.sets).to(zs[h].dtype)
        if self.sum_only:  # the block's own projection (and post-norm) of the heads' z
            y, post = hm.output_projection(li)(torch.cat(zs, -1)), hm.post_norm(li)
            return [None] * H, (y if post is None else post(y)) * hm.contribution_factor(li)
        new, b = self.tm._head_outputs(li, zs)
        return new, torch.stack(new).sum(0) + (0 if b is None else b)

    def _mlp(self, st, rem) -> None:
        tm, li = self.tm, st.layer
        x = self._in(self.mlp_resid, self.mlp_dsum, st, rem)
        y = tm.mlps[li](tm.mlp_norms[li](first(x)))
        y = y[0] if isinstance(y, tuple) else y
        if tm.mlp_posts[li] is not None:
            y = tm.mlp_posts[li](y)
        if self.dsum is not None:
            dy = self.delta(y, self.cf[self.n_out])
            self._keep_delta(self.n_out, dy)
            self.dsum = self.dsum + dy
        self.outs.append(y)
        self.n_out += 1
        self.resid = self.resid + y

    def _logits(self, st, rem) -> None:
        tm = self.tm
        if tm.head is None or tm.final is None:
            raise InputError("this model has no unembedding: its run stops before the logits")
        x = self._in(self.resid, self.dsum, st, rem)
        self.logits = tm.unembed(tm.readout(first(x)))


__all__ = ["Frozen", "Pass", "Rows", "first", "receiver_inputs"]
