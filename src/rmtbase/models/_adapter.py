"""Base class of the per-architecture adapters and the helpers they share.

An adapter knows one checkpoint layout: which tensors hold a layer's query and key
projections, how they are laid out, and which config keys give (d, d_h, heads, layers). It
returns per-head factors in rmtbase's convention, W_Q and W_K of shape ``(d_h, d)`` so that the
head's logit is ``x_iᵀ W_Qᵀ W_K x_j`` (``docs/conventions.md``). Raw weights: nothing is
folded, centred or rescaled.

Tensor names are matched with or without the model-class prefix (``"transformer."``,
``"gpt_neox."``, ``"model."``, ``"bert."`` …): the adapter names the suffix of a layer-0
tensor and :meth:`Adapter.find_prefix` finds the prefix that the checkpoint actually uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError


@dataclass(frozen=True)
class Dims:
    """Attention sizes read from a config."""

    d: int
    d_h: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    rotary_fraction: float = 0.0


def cfg_get(cfg: dict, *names: str, default=None, required: bool = True):
    """The first of ``names`` present (and not None) in ``cfg``; ModelError if none is."""
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return value
    if required and default is None:
        raise ModelError(f"config of a {cfg.get('model_type', '?')} model lacks "
                         f"{' / '.join(names)}")
    return default


def cfg_int(cfg: dict, *names: str, default: int | None = None) -> int:
    """Like :func:`cfg_get`, as a positive int."""
    value = cfg_get(cfg, *names, default=default)
    try:
        out = int(value)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"config value {names[0]}={value!r} is not an integer") from exc
    if out != value or out < 1:
        raise ModelError(f"config value {names[0]}={value!r} is not a positive integer")
    return out


def mha_dims(cfg: dict, label: str, *, width=("hidden_size",), heads=("num_attention_heads",),
             layers=("num_hidden_layers",), rotary_fraction: float = 0.0) -> Dims:
    """Dims of a plain multi-head config (no GQA): d_h = d / n_heads, n_kv_heads = n_heads.

    ``width``, ``heads``, ``layers``: config keys tried in order (e.g. GPT-2's ``n_embd`` before
    ``hidden_size``). ModelError if d is not a multiple of the head count.
    """
    d = cfg_int(cfg, *width)
    n_heads = cfg_int(cfg, *heads)
    if d % n_heads:
        raise ModelError(f"{label} config: {width[0]}={d} is not divisible by "
                         f"{heads[0]}={n_heads}")
    return Dims(d=d, d_h=d // n_heads, n_layers=cfg_int(cfg, *layers), n_heads=n_heads,
                n_kv_heads=n_heads, rotary_fraction=rotary_fraction)


def split_heads_rows(w: np.ndarray, n_heads: int, d_h: int, name: str) -> np.ndarray:
    """``(n_heads·d_h, d)`` in the nn.Linear (out, in) layout → ``(n_heads, d_h, d)``.

    Row ``h·d_h + r`` of a Linear weight is output feature r of head h, which is how every
    unfused projection here (BERT, OPT, GPT-J, LLaMA) orders its heads.
    """
    if w.ndim != 2 or w.shape[0] != n_heads * d_h:
        raise ModelError(f"tensor {name!r} has shape {tuple(w.shape)}, expected "
                         f"({n_heads * d_h}, d) for {n_heads} heads of size {d_h}")
    return w.reshape(n_heads, d_h, w.shape[1])


def expect_shape(w: np.ndarray, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Raise ModelError unless ``w.shape == shape`` (a checkpoint that disagrees with config)."""
    if tuple(w.shape) != tuple(shape):
        raise ModelError(f"tensor {name!r} has shape {tuple(w.shape)}, but the config implies "
                         f"{tuple(shape)}")
    return w


class Adapter:
    """One checkpoint layout. Subclasses set the class attributes and implement two methods.

    Attributes
    ----------
    model_types : tuple of str
        Hugging Face ``model_type`` values handled.
    probe : str
        Suffix of a tensor present in layer 0, with ``{i}`` for the layer index; used to find
        the key prefix and to check the layer count.
    prefixes : tuple of str
        Known prefixes, in order of preference when a checkpoint matches several.
    """

    model_types: tuple[str, ...] = ()
    probe: str = ""
    prefixes: tuple[str, ...] = ("",)

    def dims(self, cfg: dict) -> Dims:  # pragma: no cover - abstract
        raise NotImplementedError

    def read_layer(self, src, prefix: str, i: int, dims: Dims):  # pragma: no cover
        """Return ``(wq, wk, bq, bk)``: wq ``(n_heads, d_h, d)``, wk ``(n_kv_heads, d_h, d)``,
        biases ``(n_heads, d_h)`` / ``(n_kv_heads, d_h)`` or None."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------
    def find_prefix(self, keys: set[str], label: str) -> str:
        """The prefix before ``probe`` (layer 0) in this checkpoint's tensor names."""
        suffix = self.probe.format(i=0)
        found = sorted({k[: len(k) - len(suffix)] for k in keys
                        if k.endswith(suffix)
                        and (len(k) == len(suffix) or k[len(k) - len(suffix) - 1] == ".")})
        if not found:
            raise ModelError(f"no tensor named '*{suffix}' in {label}: the weights do not look "
                             f"like a {self.model_types[0]} checkpoint")
        if len(found) == 1:
            return found[0]
        for prefix in self.prefixes:
            if prefix in found:
                return prefix
        raise ModelError(f"ambiguous tensor names in {label}: '{suffix}' appears under "
                         f"prefixes {found}")

    def check_layers(self, keys: set[str], prefix: str, n_layers: int, label: str) -> None:
        """The weights must hold exactly the config's n_layers attention layers."""
        last = prefix + self.probe.format(i=n_layers - 1)
        if last not in keys:
            raise ModelError(f"config of {label} says {n_layers} layers but tensor {last!r} "
                             "is missing")
        extra = prefix + self.probe.format(i=n_layers)
        if extra in keys:
            raise ModelError(f"weights of {label} have more layers than the config's "
                             f"{n_layers} (found {extra!r})")

    def read_linear_pair(self, src, q_name: str, k_name: str, dims: Dims):
        """Separate nn.Linear query/key projections (weight ``(out, in)``, ``y = x Wᵀ + b``).

        ``q_name``/``k_name`` are full tensor names without ``.weight``/``.bias``. Query rows
        are split into ``n_heads`` heads, key rows into ``n_kv_heads`` heads of size d_h.
        """
        d, d_h = dims.d, dims.d_h
        wq = expect_shape(src.get(q_name + ".weight"), (dims.n_heads * d_h, d), q_name + ".weight")
        wk = expect_shape(src.get(k_name + ".weight"), (dims.n_kv_heads * d_h, d),
                          k_name + ".weight")
        bq = self.optional(src, q_name + ".bias")
        bk = self.optional(src, k_name + ".bias")
        if bq is not None:
            bq = expect_shape(bq, (dims.n_heads * d_h,), q_name + ".bias").reshape(-1, d_h)
        if bk is not None:
            bk = expect_shape(bk, (dims.n_kv_heads * d_h,), k_name + ".bias").reshape(-1, d_h)
        return (split_heads_rows(wq, dims.n_heads, d_h, q_name + ".weight"),
                split_heads_rows(wk, dims.n_kv_heads, d_h, k_name + ".weight"), bq, bk)

    @staticmethod
    def optional(src, name: str) -> np.ndarray | None:
        """Tensor ``name`` if the checkpoint has it, else None (biases)."""
        return src.get(name) if name in src.keys() else None
