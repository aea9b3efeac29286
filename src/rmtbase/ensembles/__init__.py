"""JAX samplers of the null ensembles (pure functions of explicit keys) and the chunked driver.

:mod:`.gaussian` (:func:`ginibre`, :func:`lowrank_factors`: one head's W_Q, W_K ``(d_h, d)``
i.i.d. N(0, σ²)), :mod:`.residual`, :mod:`.products` (product networks), :mod:`.wishart`
(Bartlett Gram factors), :mod:`.chisquare`, :mod:`.threefry`, :mod:`.draws` (:func:`map_draws`:
draw i uses ``fold_in(key, i)``)."""

from .draws import map_draws
from .gaussian import gaussian, ginibre, lowrank_factors, named_key
from .residual import residual_product, residual_rows, residual_stream

__all__ = ["gaussian", "ginibre", "lowrank_factors", "map_draws", "named_key", "residual_product",
           "residual_rows", "residual_stream"]
