"""The computational graph a task circuit lives in: nodes, edges and their names.

Nodes: ``input`` (the embeddings: everything entering layer 0), every head ``a{l}.h{h}``,
every MLP ``m{l}``, and ``logits`` (the residual the final norm and unembedding read, hence
the metric). Senders, in order: ``input``, then per layer its heads and its MLP. Receivers,
per layer: the heads' inputs ``q``, ``k``, ``v`` (kept distinct: an edge feeds one of them),
then the MLP; last ``logits``. An edge runs from every sender before a receiver to it; in a
sequential block a layer's heads precede its MLP, in a parallel block (attention and MLP read
the same residual) they do not. This is the graph of EAP-IG and MIB (Hanna et al. 2024,
arXiv:2403.17806; Mueller et al. 2025, arXiv:2504.13151): the names follow theirs, edges into
heads carry the input as ``<q>``, ``<k>``, ``<v>``. Every naming derives from a structured
:class:`Node`; :func:`parse` is the one reader of a name.

Edges are numbered stage by stage (:attr:`Graph.stages`): a stage is the receivers of one
kind in one layer (the 3H head inputs of a layer, its MLP, the logits) with the same senders,
a prefix of the sender list; its edges form an ``(R, S)`` block, row-major, and the blocks are
concatenated. A set of edges is a boolean vector over that numbering, or a boolean ``(E, T)``
array where an edge is kept or removed position by position (the token-position edges of
auto-circuit's tracr tasks); no ``(E, N, T, d)`` tensor is ever formed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...errors import InputError

QKV = ("q", "k", "v")


def head_name(layer: int, head: int) -> str:
    """``"L16H0"``: layer and head, 0-based."""
    return f"L{int(layer)}H{int(head)}"


class Node(NamedTuple):
    """A node: ``kind`` ``"input"``, ``"head"``, ``"mlp"`` or ``"logits"``, ``layer`` and
    ``head`` (None where it has none), a receiver head's ``input`` (q, k or v). Its names:
    :attr:`name` MIB's and EAP-IG's (``input``, ``a1.h0``, ``a1.h0<k>``, ``m1``, ``logits``),
    :attr:`head_name` (``L1H0``), :attr:`auto_circuit` (auto-circuit's graph with q, k, v
    inputs: ``Resid Start``, ``A1.0``, ``A1.0.K``, ``MLP 1``, ``Resid End``), TransformerLens's
    :meth:`sender_hook` (``blocks.0.hook_resid_pre``, ``blocks.L.attn.hook_result[h]``,
    ``blocks.L.hook_mlp_out``) and :meth:`receiver_hook` (``blocks.L.hook_q_input[h]``,
    ``blocks.L.hook_mlp_in``, ``blocks.{L−1}.hook_resid_post`` for the logits)."""

    layer: int | None
    head: int | None
    kind: str
    input: str | None = None

    @property
    def name(self) -> str:
        if self.kind == "head":
            return f"a{self.layer}.h{self.head}" + (f"<{self.input}>" if self.input else "")
        return f"m{self.layer}" if self.kind == "mlp" else self.kind

    @property
    def node(self) -> Node:  # the node itself, without a receiver's input
        return self._replace(input=None)

    @property
    def head_name(self) -> str:
        return head_name(self.layer, self.head)

    @property
    def auto_circuit(self) -> str:
        if self.kind == "head":
            return f"A{self.layer}.{self.head}" + (f".{self.input.upper()}" if self.input
                                                   else "")
        if self.kind == "mlp":
            return f"MLP {self.layer}"
        return "Resid Start" if self.kind == "input" else "Resid End"

    def sender_hook(self) -> str:
        if self.kind == "input":
            return "blocks.0.hook_resid_pre"
        if self.kind == "head":
            return f"blocks.{self.layer}.attn.hook_result[{self.head}]"
        if self.kind == "mlp":
            return f"blocks.{self.layer}.hook_mlp_out"
        raise InputError("the logits send nothing")

    def receiver_hook(self, n_layers: int) -> str:
        if self.kind == "logits":
            return f"blocks.{int(n_layers) - 1}.hook_resid_post"
        if self.kind == "head" and self.input:
            return f"blocks.{self.layer}.hook_{self.input}_input[{self.head}]"
        if self.kind == "mlp":
            return f"blocks.{self.layer}.hook_mlp_in"
        raise InputError(f"{self.name} receives nothing (a head receives on q, k or v)")


_NAME = re.compile(r"a(\d+)\.h(\d+)(?:<([qkv])>)?|m(\d+)")


def parse(name: str) -> Node:
    """The :class:`Node` named ``name``; one-line :class:`InputError` for a name no graph has."""
    if name in ("input", "logits"):
        return Node(None, None, name)
    m = _NAME.fullmatch(name) if isinstance(name, str) else None
    if m is None:
        raise InputError(f"{name!r} is not a node of the task graph")
    if m[4] is not None:
        return Node(int(m[4]), None, "mlp")
    return Node(int(m[1]), int(m[2]), "head", m[3])


@dataclass(frozen=True)
class Stage:
    """Receivers ``receivers`` (names) reading the first ``n_senders`` senders; edges
    ``offset … offset + len(receivers) · n_senders``; ``layer`` (``n_layers`` for logits),
    ``kind`` ``"attn"``, ``"mlp"`` or ``"logits"``."""

    layer: int
    kind: str
    receivers: tuple
    n_senders: int
    offset: int

    @property
    def size(self) -> int:
        return len(self.receivers) * self.n_senders


class Graph:
    """The graph of a model with ``n_layers`` layers of ``n_heads`` heads (module docstring);
    ``parallel``: attention and MLP read the same residual; ``d_model`` the residual width
    (None where unknown), which MIB's config carries; ``heads`` the
    :class:`rmtbase.circuits.core.heads.HeadModel` it was built from, where known (a composition
    attached to its edges is checked against it)."""

    def __init__(self, n_layers: int, n_heads: int, parallel: bool = False,
                 d_model: int | None = None, heads=None):
        self.heads = heads
        self.n_layers, self.n_heads, self.parallel = int(n_layers), int(n_heads), bool(parallel)
        self.d_model = None if d_model is None else int(d_model)
        senders = ["input"]
        stages, off = [], 0
        for li in range(self.n_layers):
            heads = [Node(li, h, "head").name for h in range(self.n_heads)]
            recv = tuple(Node(li, h, "head", x).name for x in QKV for h in range(self.n_heads))
            stages.append(Stage(li, "attn", recv, len(senders), off))
            off += stages[-1].size
            n_mlp = len(senders) if self.parallel else len(senders) + self.n_heads
            mlp = Node(li, None, "mlp").name
            stages.append(Stage(li, "mlp", (mlp,), n_mlp, off))
            off += stages[-1].size
            senders += heads + [mlp]
        stages.append(Stage(self.n_layers, "logits", ("logits",), len(senders), off))
        self.senders = tuple(senders)
        self.stages = tuple(stages)
        self.n_edges = off + stages[-1].size
        self._index = self._receiver_nodes = self._ends = None

    @property
    def cfg(self) -> dict:
        """The MIB / EAP-IG graph config (EAP-IG's ``Graph.from_json`` needs ``d_model``)."""
        cfg = {"n_layers": self.n_layers, "n_heads": self.n_heads,
               "parallel_attn_mlp": self.parallel}
        if self.d_model is not None:
            cfg["d_model"] = self.d_model
        return cfg

    def nodes(self) -> list[str]:
        return [*self.senders, "logits"]

    def edge_names(self) -> list[str]:
        """``sender->receiver`` (``a1.h0<k>`` for a head's key input), in edge order."""
        out = []
        for st in self.stages:
            for r in st.receivers:
                out += [f"{s}->{r}" for s in self.senders[:st.n_senders]]
        return out

    def edge(self, i: int) -> tuple[str, str]:
        """(sender, receiver) of edge ``i`` (receiver with its ``<q>``-style input)."""
        for st in self.stages:
            if st.offset <= i < st.offset + st.size:
                r, s = divmod(i - st.offset, st.n_senders)
                return self.senders[s], st.receivers[r]
        raise InputError(f"edge {i} is outside this graph's {self.n_edges} edges")

    def index(self, name: str) -> int:
        """The number of edge ``name``; one-line refusal of a name outside the graph."""
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self.edge_names())}
        try:
            return self._index[name]
        except KeyError:
            raise InputError(f"edge {name!r} is not in this model's graph ({self.n_layers} "
                             f"layers, {self.n_heads} heads)") from None

    def blocks(self, kept: np.ndarray) -> list[np.ndarray]:
        """``kept`` ``(n_edges,)`` bool as one ``(R, S)`` block per stage; a per-position set
        ``(n_edges, T)`` (edge ``e`` kept at position ``t``: the receiver's input at ``t``
        reads the sender's output at ``t``) as ``(R, S, T)`` blocks."""
        kept = np.asarray(kept, dtype=bool)
        if kept.ndim not in (1, 2) or kept.shape[0] != self.n_edges:
            raise InputError(f"an edge set has {self.n_edges} entries here (or {self.n_edges} "
                             f"rows, one column per position), got {kept.shape}")
        return [kept[st.offset:st.offset + st.size].reshape(
            len(st.receivers), st.n_senders, *kept.shape[1:]) for st in self.stages]

    def alive(self, kept: np.ndarray, forward: bool = True) -> np.ndarray:
        """The edges of ``kept`` on a kept path to ``logits`` (and from ``input``: ``forward``,
        exact where the counterfactual is a run's output, ``corrupted`` or ``resample``); the
        others carry nothing (tests/test_circuits_alive.py)."""
        return np.asarray(kept, dtype=bool) & self.carrying(kept, forward)

    def carrying(self, kept: np.ndarray, forward: bool = True) -> np.ndarray:
        """``(n_edges,)``: each edge, kept or not, on a kept path (:meth:`alive`'s) were it in
        ``kept``: its sender reached from ``input``, its receiver reaching ``logits``."""
        if self._receiver_nodes is None:  # each stage's receivers as node numbers
            node = {n: i for i, n in enumerate(self.nodes())}
            self._receiver_nodes = [np.array([node[split_receiver(r)[0]] for r in st.receivers])
                                    for st in self.stages]
            pairs = list(zip(self.stages, self._receiver_nodes, strict=True))
            self._ends = (np.concatenate([np.tile(np.arange(st.n_senders), rn.size)
                                          for st, rn in pairs]),
                          np.concatenate([np.repeat(rn, st.n_senders) for st, rn in pairs]))
        blocks = self.blocks(kept)  # (R, S) per stage; a stage's senders are earlier nodes
        reach = np.zeros((2, len(self.senders) + 1), dtype=bool)
        reach[0] = not forward  # from the input: all of them where not asked
        reach[0, 0] = reach[1, -1] = True  # input, logits
        for st, b, rn in zip(self.stages, blocks, self._receiver_nodes, strict=True):
            reach[0, rn[(b & reach[0, :st.n_senders]).any(1)]] = True
        for st, b, rn in zip(self.stages[::-1], blocks[::-1], self._receiver_nodes[::-1],
                             strict=True):
            reach[1, :st.n_senders] |= (b & reach[1, rn][:, None]).any(0)
        sender, receiver = self._ends
        return reach[0, sender] & reach[1, receiver]

    def full(self) -> np.ndarray:
        return np.ones(self.n_edges, dtype=bool)

    def empty(self) -> np.ndarray:
        return np.zeros(self.n_edges, dtype=bool)


def split_receiver(name: str) -> tuple[str, str]:
    """(node, input) of a receiver's name: ``("a1.h0", "k")`` for ``a1.h0<k>``, ``("m1", "")``."""
    n = parse(name)
    return n.node.name, n.input or ""


def sender_hook(name: str) -> str:
    """:meth:`Node.sender_hook` of the sender named ``name``."""
    return parse(name).sender_hook()


def receiver_hook(name: str, n_layers: int) -> str:
    """:meth:`Node.receiver_hook` of the receiver named ``name``."""
    return parse(name).receiver_hook(n_layers)


__all__ = ["QKV", "Graph", "Node", "Stage", "head_name", "parse", "receiver_hook", "sender_hook",
           "split_receiver"]
