"""Closed forms and special-function integrals (float64 numpy/scipy and mpmath, no JAX).

Submodules, imported on first attribute access: :mod:`.marchenko_pastur`, :mod:`.product`
(MP_c ⊠ MP_c), :mod:`.variance_gamma` (one W_QK entry), :mod:`.weibull`, :mod:`.gaussian`,
:mod:`.constants`, :mod:`.product_network`, :mod:`.network_finite`, :mod:`.composition_moments`.
Each quantity has a float64 function and an ``*_mp`` one taking ``dps=``."""

from __future__ import annotations

import importlib

_SUBMODULES = ("marchenko_pastur", "product", "variance_gamma", "weibull", "gaussian", "constants",
               "product_network", "network_finite", "composition_moments")
__all__ = list(_SUBMODULES)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
