"""Gaussian query/key heads as a model reader gives them, for scoring tests that skip the
model: ``(ModelInfo, [LayerHeads])``, entries N(0, scale²), float32."""

from __future__ import annotations

import numpy as np


def gaussian_heads(n_layers: int, n_heads: int, d_h: int, d: int, seed: int,
                   scale: float = 0.05):
    from rmtbase.models.types import LayerHeads, ModelInfo

    rng = np.random.default_rng(seed)
    layers = [LayerHeads(layer=i, wq=rng.normal(0, scale, (n_heads, d_h, d)).astype(np.float32),
                         wk=rng.normal(0, scale, (n_heads, d_h, d)).astype(np.float32))
              for i in range(n_layers)]
    info = ModelInfo(name="gaussian", revision=None, architecture="bert", d=d, d_h=d_h,
                     n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_heads)
    return info, layers
