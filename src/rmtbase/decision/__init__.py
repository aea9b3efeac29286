"""The decision: from a head's statistics and null draws to p-values, effects and one decision per
head (:mod:`.verdict`, :mod:`.tails`, :mod:`.omnibus`, :mod:`.family`, :mod:`.significance`).
Nothing here reads a model or draws a null: inputs and outputs are arrays and Datasets."""

from .significance import benjamini_hochberg, empirical_p
from .verdict import score_values

__all__ = ["benjamini_hochberg", "empirical_p", "score_values"]
