"""JAX samplers of the null ensembles (pure functions of explicit keys) and the chunked driver.

- :mod:`.gaussian`: :func:`named_key`, :func:`ginibre` (alias ``gaussian``),
  :func:`lowrank_factors` (one head's W_Q, W_K ``(d_h, d)``, i.i.d. N(0, σ²));
- :mod:`.residual`: residual-path products ∏(I + W_l);
- :mod:`.products`: product networks and their stable Benettin-QR factors (imported on use);
- :mod:`.wishart`: exact Gram-factor samplers (Bartlett L, bidiagonal B);
- :mod:`.chisquare`: exact χ²/χ variates (array-level Marsaglia–Tsang);
- :mod:`.threefry`: ``jax.random.normal``'s float32 draws, bit for bit (imported on use);
- :mod:`.draws`: :func:`map_draws`, the chunked driver (draw i uses ``fold_in(key, i)``)."""

from .draws import map_draws
from .gaussian import gaussian, ginibre, lowrank_factors, named_key
from .residual import residual_product, residual_rows, residual_stream

__all__ = ["gaussian", "ginibre", "lowrank_factors", "map_draws", "named_key", "residual_product",
           "residual_rows", "residual_stream"]
