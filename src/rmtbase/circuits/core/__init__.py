"""The circuit engine both searches configure: prompts, the graph and its names, the loader and
the family gate, the heads recomputed from a model's weights, the counterfactuals, the patched
forwards and their readouts, attribution, faithfulness, the confirmation rule and the standard
errors. It imports neither front end (:mod:`..head`, :mod:`..task`); importing it does not
import torch."""
