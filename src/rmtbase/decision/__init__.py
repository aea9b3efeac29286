"""The decision: from a head's statistics and null draws to p-values, effects and one decision per
head (:mod:`.verdict`, :mod:`.tails`, :mod:`.omnibus`, :mod:`.family`, :mod:`.significance`).
Nothing here reads a model or draws a null: inputs and outputs are arrays and Datasets."""

import importlib

#: Public names and their modules, imported on first use (PEP 562): a light submodule such as
#: :mod:`.axes` is read at the CLI's start-up without numpy, xarray or JAX.
_LAZY = {"benjamini_hochberg": "significance", "empirical_p": "significance",
         "score_values": "verdict"}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
