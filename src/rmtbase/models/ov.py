"""The other half of a head: its OV circuit's factors, read as the QK path reads W_Q and W_K.

A head writes ``W_O,h W_V,h x`` into the residual stream (Elhage et al. 2021).
:func:`load_ov_heads` yields :class:`~rmtbase.models.types.LayerHeads` with ``wq`` = W_O,hᵀ and
``wk`` = W_V,h ``(d_h, d)``, so W_OV = wqᵀ wk (``q.*`` statistics are W_O's, ``k.*`` W_V's).
Nothing is folded in; under GQA W_V is shared."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..errors import ModelError
from .types import LayerHeads

#: What the factors of an OV score are (its ``factors`` attr).
OV_FACTORS = ("q = W_O,h^T (d_h, d), k = W_V,h (d_h, d), W_OV = W_O,h W_V,h = q^T k; q.* "
              "statistics are W_O's entries, k.* W_V's; biases, norm gains and the unembedding "
              "not folded")


#: How a refusal for want of V/O tensors ends.
OV_WHY = "its OV circuit (W_O,h W_V,h) cannot be read"


def ov_factors(v: np.ndarray, o: np.ndarray, n_heads: int, n_kv_heads: int, d_h: int,
               where: str = "") -> tuple[np.ndarray, np.ndarray]:
    """(W_O,hᵀ, W_V,h) of every head, each ``(n_heads, d_h, d)``, from ``v`` ``(n_kv_heads·d_h, d)``
    and ``o`` ``(d, n_heads·d_h)``; value heads expanded to query heads."""
    d = v.shape[1]
    if v.shape != (n_kv_heads * d_h, d) or o.shape != (d, n_heads * d_h):
        raise ModelError(f"{where}: value/output projections of shapes {tuple(v.shape)}, "
                         f"{tuple(o.shape)} do not fit {n_heads} heads ({n_kv_heads} value "
                         f"heads) of {d_h} at d={d}")
    wv = v.reshape(n_kv_heads, d_h, d)
    wo_t = np.ascontiguousarray(o.reshape(d, n_heads, d_h).transpose(1, 2, 0))
    group = n_heads // n_kv_heads
    if group > 1:
        wv = np.repeat(wv, group, axis=0)
    return wo_t, np.ascontiguousarray(wv)


def load_ov_heads(model, *, revision: str | None = None,
                  allow_pickle: bool = False) -> Iterator[LayerHeads]:
    """Yield every head's OV factors per layer as :class:`LayerHeads` (no biases; v and o
    storage), checked as by :func:`load_heads`; ModelError without value/output projections."""
    from .loading import check_located_parts, open_model

    info, located, weights = open_model(model, revision, allow_pickle)
    try:  # every layer's v and o tensors, from the index or header: before any layer is read
        check_located_parts(info, located, weights, ("v", "o"), OV_WHY)
    except BaseException:
        weights.close()
        raise
    return _iterate(weights, located, info)


def _iterate(weights, located, info) -> Iterator[LayerHeads]:
    from ._reader import split_storage

    try:
        for i in range(info.n_layers):
            weights.take_storage()
            got = located.read_components(located.reader(weights, i), {"v", "o"})
            storage, quant = split_storage(weights.take_storage().values())
            wq, wk = ov_factors(np.asarray(got["v"][0], dtype=np.float32),
                                np.asarray(got["o"][0], dtype=np.float32), info.n_heads,
                                info.n_kv_heads, info.d_h, f"layer {i} of {info.name}")
            del got
            yield LayerHeads(layer=i, wq=wq, wk=wk, bq=None, bk=None, storage=storage,
                             quantisation=quant)
            del wq, wk
    finally:
        weights.close()


__all__ = ["OV_FACTORS", "OV_WHY", "load_ov_heads", "ov_factors"]
