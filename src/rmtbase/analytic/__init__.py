"""Closed forms and special-function integrals (float64 numpy/scipy and mpmath, no JAX).

Submodules, imported on first attribute access: :mod:`.marchenko_pastur` (MP_c),
:mod:`.product` (MP_c ⊠ MP_c, finite-d moments of Σλ), :mod:`.variance_gamma` (one W_QK entry),
:mod:`.weibull` (half-normal Weibull anchor), :mod:`.gaussian` (Gaussian, half-normal, quarter
circle), :mod:`.constants` (citable constants to any digits), :mod:`.product_network` and
:mod:`.network_finite` (Ginibre and residual products: limit laws, finite-d moments),
:mod:`.composition_moments` (null moments of composition scores).

Each quantity has a float64 function and an ``*_mp`` one taking ``dps=`` (default ``mp.dps``)."""

from __future__ import annotations

import importlib

_SUBMODULES = ("marchenko_pastur", "product", "variance_gamma", "weibull", "gaussian", "constants",
               "product_network", "network_finite", "composition_moments")
__all__ = list(_SUBMODULES)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
