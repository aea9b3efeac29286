"""Declarative checkpoint layouts: which tensors hold a layer's weights and how to unpack them.

Every matrix comes out in the ``nn.Linear`` (out, in) layout, float32 (``y = W x``):
:class:`Linear` (one weight; ``conv1d=True`` transposes a GPT-2 Conv1D), :class:`QKV` (a block
of a fused q/k/v projection, :func:`split_qkv`), :class:`Chunk` (one of ``count`` equal row
blocks of a fused projection). A :class:`Layout` names the parts of one layer (``{i}`` the
layer index); a :class:`LayerReader` reads a fused tensor once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ._config import Dims


class LayerReader:
    """Tensors of layer ``i`` by name suffix, cached for the layer; remembers storage."""

    def __init__(self, src, prefix: str, i: int):
        self.src, self.prefix, self.i = src, prefix, i
        self._cache: dict[str, np.ndarray] = {}

    def name(self, suffix: str, **kw) -> str:
        return self.prefix + suffix.format(i=self.i, **kw)

    def has(self, suffix: str, **kw) -> bool:
        return self.name(suffix, **kw) in self.src.keys()

    def get(self, suffix: str, **kw) -> np.ndarray:
        name = self.name(suffix, **kw)
        if name not in self._cache:
            self._cache[name] = self.src.get(name)
        return self._cache[name]

    def storage(self, suffix: str, **kw) -> str:
        return self.src.storage_of(self.name(suffix, **kw))


def expect_shape(w: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Raise ModelError unless ``w.shape == shape`` (a checkpoint that disagrees with config)."""
    if tuple(w.shape) != tuple(shape):
        raise ModelError(f"tensor {name!r} has shape {tuple(w.shape)}, but the config implies "
                         f"{tuple(shape)}")
    return w


def split_heads_rows(w: np.ndarray, n_heads: int, d_h: int, name: str) -> np.ndarray:
    """``(n_heads·d_h, …)`` → ``(n_heads, d_h, …)``: row ``h·d_h + r`` is feature r of head h,
    which is how every forward pass here views a projection's output (``view(…, -1, d_h)``)."""
    if w.shape[0] != n_heads * d_h:
        raise ModelError(f"tensor {name!r} has shape {tuple(w.shape)}, expected "
                         f"({n_heads * d_h}, …) for {n_heads} heads of size {d_h}")
    return w.reshape(n_heads, d_h, *w.shape[1:])


@dataclass(frozen=True)
class Linear:
    """An ``nn.Linear`` named ``name`` (without ``.weight``/``.bias``); ``conv1d``: stored
    ``(in, out)`` as GPT-2's Conv1D (``y = x W + b``)."""

    name: str
    conv1d: bool = False

    def read(self, r: LayerReader, dims: Dims) -> np.ndarray:
        w = r.get(self.name + ".weight")
        if w.ndim != 2:
            raise ModelError(f"tensor {r.name(self.name + '.weight')!r} has shape "
                             f"{tuple(w.shape)}, expected a matrix")
        return w.T if self.conv1d else w

    def read_bias(self, r: LayerReader, dims: Dims) -> np.ndarray | None:
        return r.get(self.name + ".bias") if r.has(self.name + ".bias") else None

    def tensor(self) -> str:
        return self.name + ".weight"


def split_qkv(w: np.ndarray, order: str, dims: Dims, name: str):
    """Split a fused q/k/v projection (``w`` ``(rows, d)`` or a bias ``(rows,)``) into ``(q, k, v)``
    with rows ``(n_heads·d_h)``, ``(n_kv·d_h)``, ``(n_kv·d_h)``, head-major.

    ``order`` is how the forward pass reads the fused output:

    - ``"blocks"``: ``[q of all heads | k of all kv heads | v of all kv heads]`` (GPT-2, Phi-3);
    - ``"per_head"``: ``(head, {q, k, v}, d_h)`` (GPT-NeoX, classic Falcon); n_kv = n;
    - ``"grouped"``: ``(kv group, {q_1 … q_g, k, v}, d_h)`` with g = n / n_kv (Falcon's
      ``new_decoder_architecture``): query head ``kv·g + j`` meets key ``kv``."""
    n, n_kv, d_h = dims.n_heads, dims.n_kv_heads, dims.d_h
    rows = (n + 2 * n_kv) * d_h
    if w.shape[0] != rows:
        raise ModelError(f"tensor {name!r} has shape {tuple(w.shape)}, but the config implies "
                         f"{rows} fused q/k/v rows ({n} query and 2×{n_kv} key/value heads of "
                         f"size {d_h})")
    tail = w.shape[1:]
    if order == "blocks":
        return w[:n * d_h], w[n * d_h:(n + n_kv) * d_h], w[(n + n_kv) * d_h:]
    if order == "per_head":
        x = w.reshape(n, 3, d_h, *tail)
        return tuple(x[:, j].reshape(n * d_h, *tail) for j in range(3))
    if order == "grouped":
        g = n // n_kv
        x = w.reshape(n_kv, g + 2, d_h, *tail)
        return (x[:, :g].reshape(n * d_h, *tail), x[:, g].reshape(n_kv * d_h, *tail),
                x[:, g + 1].reshape(n_kv * d_h, *tail))
    raise ValueError(f"unknown fused q/k/v order {order!r}")  # pragma: no cover - programming


_WHICH = {"q": 0, "k": 1, "v": 2}


@dataclass(frozen=True)
class QKV:
    """Block ``which`` (``"q"``, ``"k"``, ``"v"``) of the fused projection ``name``."""

    name: str
    which: str
    order: str = "blocks"
    conv1d: bool = False

    def read(self, r: LayerReader, dims: Dims) -> np.ndarray:
        rows = (dims.n_heads + 2 * dims.n_kv_heads) * dims.d_h
        name = r.name(self.tensor())
        w = expect_shape(r.get(self.tensor()), (dims.d, rows) if self.conv1d else (rows, dims.d),
                         name)
        return split_qkv(w.T if self.conv1d else w, self.order, dims, name)[_WHICH[self.which]]

    def read_bias(self, r: LayerReader, dims: Dims) -> np.ndarray | None:
        if not r.has(self.name + ".bias"):
            return None
        b = r.get(self.name + ".bias")
        return split_qkv(b, self.order, dims, r.name(self.name + ".bias"))[_WHICH[self.which]]

    def tensor(self) -> str:
        return self.name + ".weight"


@dataclass(frozen=True)
class Chunk:
    """Row block ``index`` of ``count`` equal blocks of the ``nn.Linear`` ``name``."""

    name: str
    index: int
    count: int = 2

    def read(self, r: LayerReader, dims: Dims) -> np.ndarray:
        w = Linear(self.name).read(r, dims)
        if w.shape[0] % self.count:
            raise ModelError(f"tensor {r.name(self.tensor())!r} has {w.shape[0]} rows, not "
                             f"divisible into {self.count} fused blocks")
        m = w.shape[0] // self.count
        return w[self.index * m:(self.index + 1) * m]

    def read_bias(self, r: LayerReader, dims: Dims) -> np.ndarray | None:
        if not r.has(self.name + ".bias"):
            return None
        b = r.get(self.name + ".bias")
        m = b.shape[0] // self.count
        return b[self.index * m:(self.index + 1) * m]

    def tensor(self) -> str:
        return self.name + ".weight"


def attention_parts(q: str, k: str, v: str, o: str, *, conv1d: bool = False) -> dict:
    """Separate q/k/v/o ``nn.Linear`` projections (the common case)."""
    return {"q": Linear(q, conv1d), "k": Linear(k, conv1d), "v": Linear(v, conv1d),
            "o": Linear(o, conv1d)}


def fused_attention(qkv: str, o: str, order: str = "blocks", *, conv1d: bool = False) -> dict:
    """One fused q/k/v projection plus the output projection."""
    return {"q": QKV(qkv, "q", order, conv1d), "k": QKV(qkv, "k", order, conv1d),
            "v": QKV(qkv, "v", order, conv1d), "o": Linear(o, conv1d)}


def gated_ffn(gate: str, up: str, down: str) -> dict:
    """A gated MLP ``down(act(gate x) ⊙ up x)`` (LLaMA naming; ``gate`` is the activated
    branch)."""
    return {"ffn_gate": Linear(gate), "ffn_up": Linear(up), "ffn_down": Linear(down)}


def plain_ffn(fc_in: str, fc_out: str, *, conv1d: bool = False) -> dict:
    """A two-layer MLP ``out(act(in x))``."""
    return {"ffn_in": Linear(fc_in, conv1d), "ffn_out": Linear(fc_out, conv1d)}


@dataclass(frozen=True)
class Layout:
    """Where one layer's matrices live in a checkpoint that uses this naming scheme.

    ``parts`` maps component names (``q``, ``k``, ``v``, ``o``, ``ffn_*``, ``router``) to parts.
    ``probe``: the tensor (with ``{i}``) whose presence in layer 0 identifies the scheme (default
    q's weight). ``prefixes``: model-class prefixes in order of preference."""

    parts: dict
    prefixes: tuple[str, ...] = ("",)
    probe: str = ""

    @property
    def probe_tensor(self) -> str:
        return self.probe or self.parts["q"].tensor()

    def candidates(self, keys: set[str]) -> list[str]:
        """Prefixes before the layer-0 probe in this checkpoint's tensor names."""
        suffix = self.probe_tensor.format(i=0)
        return sorted({k[: len(k) - len(suffix)] for k in keys
                       if k.endswith(suffix)
                       and (len(k) == len(suffix) or k[len(k) - len(suffix) - 1] == ".")})

    def pick_prefix(self, found: list[str], label: str) -> str:
        if len(found) == 1:
            return found[0]
        for prefix in self.prefixes:
            if prefix in found:
                return prefix
        raise ModelError(f"ambiguous tensor names in {label}: "
                         f"'{self.probe_tensor.format(i=0)}' appears under prefixes {found}")


def linear_layout(stem: str, attention: tuple[str, str, str, str], ffn: tuple[str, str],
                  prefixes: tuple[str, ...]) -> Layout:
    """The layout of separate q, k, v, o ``nn.Linear`` projections and a two-layer MLP, every tensor
    named ``stem + suffix`` (``stem`` carries ``{i}``)."""
    return Layout({**attention_parts(*(stem + a for a in attention)),
                   **plain_ffn(*(stem + f for f in ffn))}, prefixes=prefixes)
