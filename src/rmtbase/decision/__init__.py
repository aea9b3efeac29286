"""The decision: from a head's statistics and their null draws to p-values, effects and one
decision per head (or per whole matrix).

- :mod:`.verdict`: :func:`score_values` (precomputed statistics and null draws → the scored
  Dataset): per-statistic tests and the per-head decision;
- :mod:`.tails`: tail-resolving Monte Carlo p-values (add-one, GPD tails);
- :mod:`.omnibus`: the calibrated combination per head;
- :mod:`.family`: which statistics are tested, what each tests, duplicates;
- :mod:`.significance`: add-one empirical p-values and Benjamini–Hochberg.

Nothing here reads a model or draws a null: inputs are arrays, outputs are arrays and Datasets.
"""

from .significance import benjamini_hochberg, empirical_p
from .verdict import score_values

__all__ = ["benjamini_hochberg", "empirical_p", "score_values"]
